import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { isTouchstoneError, type TouchstoneError } from '../core/index.js';
import { createHttpClient, type HttpClient } from './index.js';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

let server: Server;
let base: string;
let handler: Handler;
const hits: string[] = [];
const seenHeaders: IncomingMessage['headers'][] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    hits.push(req.url ?? '');
    seenHeaders.push(req.headers);
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  hits.length = 0;
  seenHeaders.length = 0;
  handler = (_req, res) => res.end('ok');
});

async function caught(p: Promise<unknown>): Promise<TouchstoneError> {
  try {
    await p;
  } catch (err) {
    if (isTouchstoneError(err)) return err;
    throw err;
  }
  throw new Error('expected a TouchstoneError');
}

describe('createHttpClient', () => {
  let client: HttpClient;
  beforeAll(() => {
    client = createHttpClient({ timeoutMs: 2000 });
  });
  afterAll(() => client.close());

  it('sends method, headers and body and returns status, lower-case headers and body', async () => {
    let received = '';
    handler = (req, res) => {
      req.setEncoding('utf8');
      req.on('data', (c: string) => {
        received += c;
      });
      req.on('end', () => {
        res.writeHead(201, { 'X-Thing': 'yes', 'Retry-After': '7' });
        res.end('created');
      });
    };
    const res = await client.request({
      method: 'POST',
      url: `${base}/things?a=1`,
      headers: { 'X-Api-Key': 'k' },
      body: '{"x":1}',
    });
    expect(res.status).toBe(201);
    expect(res.headers['x-thing']).toBe('yes');
    expect(res.body.toString()).toBe('created');
    expect(res.retryAfterSeconds).toBe(7);
    expect(received).toBe('{"x":1}');
    expect(hits).toEqual(['/things?a=1']);
    expect(seenHeaders[0]?.['x-api-key']).toBe('k');
    expect(seenHeaders[0]?.['user-agent']).toBe('touchstone');
  });

  it('parses Retry-After given as an HTTP date', async () => {
    const at = new Date(Date.now() + 120_000).toUTCString();
    handler = (_req, res) => {
      res.writeHead(503, { 'Retry-After': at });
      res.end();
    };
    const res = await client.request({ method: 'GET', url: `${base}/busy` });
    expect(res.status).toBe(503);
    expect(res.retryAfterSeconds).toBeGreaterThan(110);
    expect(res.retryAfterSeconds).toBeLessThanOrEqual(120);
  });

  it('does not follow redirects', async () => {
    handler = (req, res) => {
      if (req.url === '/start') {
        res.writeHead(302, { Location: '/elsewhere' });
        res.end();
      } else res.end('followed');
    };
    const res = await client.request({ method: 'GET', url: `${base}/start` });
    expect(res.status).toBe(302);
    expect(res.headers.location).toBe('/elsewhere');
    expect(hits).toEqual(['/start']);
  });

  it('times out a server that never answers, without leaking headers or path', async () => {
    handler = () => {
      // Never answers.
    };
    const started = Date.now();
    const err = await caught(
      client.request({
        method: 'GET',
        url: `${base}/slow/secret-path?token=abc123`,
        headers: { authorization: 'Bearer sk-very-secret' },
        timeoutMs: 150,
      }),
    );
    expect(Date.now() - started).toBeLessThan(1500);
    expect(err.code).toBe('OUTBOUND_TIMEOUT');
    expect(err.kind).toBe('deadline_exceeded');
    expect(err.retryable).toBe(true);
    expect(err.message).not.toMatch(/sk-very-secret|abc123|secret-path/);
  });

  it('the deadline covers a body that trickles in', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const timer = setInterval(() => {
        if (res.destroyed) clearInterval(timer);
        else res.write('.');
      }, 20);
      res.on('close', () => clearInterval(timer));
    };
    const err = await caught(
      client.request({ method: 'GET', url: `${base}/drip`, timeoutMs: 200 }),
    );
    expect(err.code).toBe('OUTBOUND_TIMEOUT');
  });

  it('refuses a body over the cap, declared or streamed, without echoing it', async () => {
    const big = 'SECRETBODY'.repeat(1000);
    handler = (_req, res) => res.end(big);
    const declared = await caught(
      client.request({ method: 'GET', url: `${base}/big`, maxResponseBytes: 1000 }),
    );
    expect(declared.code).toBe('OUTBOUND_RESPONSE_TOO_LARGE');
    expect(declared.message).not.toContain('SECRETBODY');

    handler = (_req, res) => {
      res.writeHead(200);
      for (let i = 0; i < 10; i++) res.write('SECRETBODY'.repeat(100));
      res.end();
    };
    const streamed = await caught(
      client.request({ method: 'GET', url: `${base}/chunked`, maxResponseBytes: 1500 }),
    );
    expect(streamed.code).toBe('OUTBOUND_RESPONSE_TOO_LARGE');
    expect(streamed.retryable).toBe(false);
    const ok = await client.request({
      method: 'GET',
      url: `${base}/chunked`,
      maxResponseBytes: 10_000,
    });
    expect(ok.body.length).toBe(10_000);
  });

  it('reports a refused connection as retryable unavailability', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const err = await caught(client.request({ method: 'GET', url: `http://127.0.0.1:${port}/` }));
    expect(err.code).toBe('OUTBOUND_UNAVAILABLE');
    expect(err.kind).toBe('unavailable');
    expect(err.retryable).toBe(true);
  });

  it("throws the caller's abort reason when the caller cancels", async () => {
    handler = () => {
      // Never answers.
    };
    const controller = new AbortController();
    const reason = new Error('shutting down');
    setTimeout(() => controller.abort(reason), 50);
    await expect(
      client.request({ method: 'GET', url: `${base}/hang`, signal: controller.signal }),
    ).rejects.toBe(reason);
  });

  it('refuses malformed URLs, other schemes and URLs with credentials', async () => {
    expect((await caught(client.request({ method: 'GET', url: 'not a url' }))).code).toBe(
      'OUTBOUND_INVALID_URL',
    );
    expect((await caught(client.request({ method: 'GET', url: 'file:///etc/passwd' }))).code).toBe(
      'OUTBOUND_INVALID_URL',
    );
    const withUser = await caught(
      client.request({ method: 'GET', url: `http://user:hunter2@127.0.0.1:1/` }),
    );
    expect(withUser.code).toBe('OUTBOUND_INVALID_URL');
    expect(withUser.message).not.toContain('hunter2');
  });
});

describe('createHttpClient seams', () => {
  it('checkTarget sees every URL and can refuse it before any connection', async () => {
    const checked: string[] = [];
    const client = createHttpClient({
      checkTarget: async (url) => {
        checked.push(url.pathname);
        if (url.pathname.startsWith('/private')) throw new Error('private address');
      },
    });
    try {
      await client.request({ method: 'GET', url: `${base}/public` });
      const err = await caught(client.request({ method: 'GET', url: `${base}/private` }));
      expect(err.code).toBe('OUTBOUND_TARGET_REFUSED');
      expect(err.kind).toBe('permission_denied');
      expect(checked).toEqual(['/public', '/private']);
      expect(hits).toEqual(['/public']);
    } finally {
      await client.close();
    }
  });

  it('wrapConnector decides which address is dialled', async () => {
    const port = (server.address() as AddressInfo).port;
    const dialled: string[] = [];
    const client = createHttpClient({
      // What the SSRF guard will do: resolve and check the name, then dial the checked address.
      wrapConnector: (connect) => (options, callback) => {
        dialled.push(options.hostname);
        connect({ ...options, hostname: '127.0.0.1' }, callback);
      },
    });
    try {
      const res = await client.request({ method: 'GET', url: `http://judge.invalid:${port}/x` });
      expect(res.status).toBe(200);
      expect(dialled).toEqual(['judge.invalid']);
      expect(seenHeaders[0]?.host).toBe(`judge.invalid:${port}`);
    } finally {
      await client.close();
    }
  });

  it('close is safe twice and later requests fail cleanly', async () => {
    const client = createHttpClient();
    await client.close();
    await client.close();
    const err = await caught(client.request({ method: 'GET', url: `${base}/` }));
    expect(err.code).toBe('OUTBOUND_UNAVAILABLE');
  });
});

describe('createHttpClient redirects (maxRedirects)', () => {
  const SENTINEL = 'SENTINEL-redirect-4d2a';
  let other: Server;
  let otherBase: string;
  const otherHeaders: IncomingMessage['headers'][] = [];

  beforeAll(async () => {
    // A second origin (same address, other port: a different origin all the same).
    other = createServer((req, res) => {
      otherHeaders.push(req.headers);
      const to = new URL(req.url ?? '/', 'http://x').searchParams.get('to');
      if (to !== null) {
        res.writeHead(302, { location: to });
        res.end();
      } else res.end('other');
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    otherBase = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    other.closeAllConnections();
    await new Promise<void>((resolve) => other.close(() => resolve()));
  });
  beforeEach(() => {
    otherHeaders.length = 0;
  });

  /** Answers `/r/<status>?to=<location>` with that redirect; every other path with its method. */
  function redirecting(): void {
    handler = (req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const m = /^\/r\/(\d{3})$/.exec(url.pathname);
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => {
        body += c;
      });
      req.on('end', () => {
        if (m) {
          res.writeHead(Number(m[1]), { location: url.searchParams.get('to') ?? '/' });
          res.end('moved');
        } else res.end(`${req.method} ${url.pathname} body=${body}`);
      });
    };
  }

  it('follows a relative redirect and reports the final URL', async () => {
    redirecting();
    const client = createHttpClient({ maxRedirects: 2 });
    try {
      const res = await client.request({ method: 'GET', url: `${base}/r/302?to=/final` });
      expect(res.status).toBe(200);
      expect(res.body.toString()).toBe('GET /final body=');
      expect(res.url).toBe(`${base}/final`);
      expect(hits).toEqual(['/r/302?to=/final', '/final']);
    } finally {
      await client.close();
    }
  });

  it('a request may ask for redirects the client does not follow by default', async () => {
    redirecting();
    const client = createHttpClient();
    try {
      expect((await client.request({ method: 'GET', url: `${base}/r/301?to=/a` })).status).toBe(
        301,
      );
      const res = await client.request({
        method: 'GET',
        url: `${base}/r/301?to=/a`,
        maxRedirects: 1,
      });
      expect(res.status).toBe(200);
    } finally {
      await client.close();
    }
  });

  it.each([
    [303, 'POST', 'GET /next body='],
    [302, 'POST', 'GET /next body='],
    [301, 'POST', 'GET /next body='],
    [307, 'POST', 'POST /next body={"x":1}'],
    [308, 'PUT', 'PUT /next body={"x":1}'],
    [303, 'PUT', 'GET /next body='],
  ] as const)('a %i after %s continues as the spec says', async (status, method, expected) => {
    redirecting();
    const client = createHttpClient({ maxRedirects: 1 });
    try {
      const res = await client.request({
        method,
        url: `${base}/r/${status}?to=/next`,
        headers: { 'content-type': 'application/json' },
        body: '{"x":1}',
      });
      expect(res.body.toString()).toBe(expected);
      const second = seenHeaders[1];
      if (expected.startsWith('GET')) expect(second?.['content-type']).toBeUndefined();
      else expect(second?.['content-type']).toBe('application/json');
    } finally {
      await client.close();
    }
  });

  it('keeps credentials on the same origin and drops them on another', async () => {
    redirecting();
    const client = createHttpClient({ maxRedirects: 3 });
    const headers = {
      authorization: `Bearer ${SENTINEL}`,
      'x-api-key': SENTINEL,
      cookie: `session=${SENTINEL}`,
      accept: 'application/json',
    };
    try {
      await client.request({ method: 'GET', url: `${base}/r/302?to=/same`, headers });
      expect(seenHeaders[1]?.authorization).toBe(`Bearer ${SENTINEL}`);
      expect(seenHeaders[1]?.['x-api-key']).toBe(SENTINEL);

      const res = await client.request({
        method: 'GET',
        url: `${base}/r/302?to=${encodeURIComponent(`${otherBase}/landing`)}`,
        headers,
      });
      expect(res.body.toString()).toBe('other');
      expect(otherHeaders).toHaveLength(1);
      expect(JSON.stringify(otherHeaders[0])).not.toContain(SENTINEL);
      expect(otherHeaders[0]?.accept).toBe('application/json');
      expect(otherHeaders[0]?.['user-agent']).toBe('touchstone');
    } finally {
      await client.close();
    }
  });

  it('does not send credentials again after leaving the origin and coming back', async () => {
    redirecting();
    const client = createHttpClient({ maxRedirects: 3 });
    try {
      const away = `${otherBase}/back?to=${encodeURIComponent(`${base}/home`)}`;
      const res = await client.request({
        method: 'GET',
        url: `${base}/r/302?to=${encodeURIComponent(away)}`,
        headers: { authorization: `Bearer ${SENTINEL}` },
      });
      expect(res.body.toString()).toBe('GET /home body=');
      expect(hits).toEqual([expect.stringMatching(/^\/r\/302/), '/home']);
      expect(seenHeaders[0]?.authorization).toBe(`Bearer ${SENTINEL}`);
      expect(otherHeaders[0]?.authorization).toBeUndefined();
      expect(seenHeaders[1]?.authorization).toBeUndefined();
    } finally {
      await client.close();
    }
  });

  it('stops after maxRedirects with OUTBOUND_TOO_MANY_REDIRECTS', async () => {
    handler = (_req, res) => {
      res.writeHead(302, { location: '/loop' });
      res.end();
    };
    const client = createHttpClient({ maxRedirects: 3 });
    try {
      const err = await caught(client.request({ method: 'GET', url: `${base}/loop?token=abc123` }));
      expect(err.code).toBe('OUTBOUND_TOO_MANY_REDIRECTS');
      expect(err.retryable).toBe(false);
      expect(err.message).toContain('more than 3');
      expect(err.message).not.toContain('abc123');
      expect(hits).toHaveLength(4);
    } finally {
      await client.close();
    }
  });

  it.each([
    ['file:///etc/passwd', '"file:"'],
    ['gopher://127.0.0.1:70/', '"gopher:"'],
    [`http://user:${'SENTINEL-pw'}@127.0.0.1:1/`, 'credentials'],
    ['http://[::1', 'malformed'],
  ])('refuses a redirect to %s', async (location, why) => {
    handler = (_req, res) => {
      res.writeHead(302, { location });
      res.end();
    };
    const client = createHttpClient({ maxRedirects: 2 });
    try {
      const err = await caught(client.request({ method: 'GET', url: `${base}/start` }));
      expect(err.code).toBe('OUTBOUND_TARGET_REFUSED');
      expect(err.message).toContain(why);
      expect(err.message).not.toContain('SENTINEL');
      expect(hits).toEqual(['/start']);
    } finally {
      await client.close();
    }
  });

  it('runs checkTarget on every hop, and names both hosts when it refuses one', async () => {
    redirecting();
    const checked: string[] = [];
    const client = createHttpClient({
      maxRedirects: 3,
      checkTarget: async (url) => {
        checked.push(url.href);
        if (url.hostname === 'localhost') throw new Error('internal');
      },
    });
    const port = (server.address() as AddressInfo).port;
    try {
      const err = await caught(
        client.request({
          method: 'GET',
          url: `${base}/r/302?to=${encodeURIComponent(`http://localhost:${port}/secret?token=abc123`)}`,
        }),
      );
      expect(err.code).toBe('OUTBOUND_TARGET_REFUSED');
      expect(err.message).toContain(`redirect from 127.0.0.1:${port} to localhost:${port} refused`);
      expect(err.message).not.toMatch(/secret|abc123/);
      expect(checked).toHaveLength(2);
      expect(hits).toHaveLength(1);
    } finally {
      await client.close();
    }
  });

  it('one deadline covers every hop', async () => {
    handler = (req, res) => {
      if (req.url === '/slow') return; // never answers
      res.writeHead(302, { location: '/slow' });
      res.end();
    };
    const client = createHttpClient({ maxRedirects: 2 });
    try {
      const started = Date.now();
      const err = await caught(
        client.request({ method: 'GET', url: `${base}/first`, timeoutMs: 200 }),
      );
      expect(err.code).toBe('OUTBOUND_TIMEOUT');
      expect(Date.now() - started).toBeLessThan(1500);
    } finally {
      await client.close();
    }
  });
});
