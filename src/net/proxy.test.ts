import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { isTouchstoneError, type TouchstoneError } from '../core/index.js';
import {
  createHttpClient,
  createOutboundGuard,
  createProxyRouter,
  type HttpClient,
  type ProxySettings,
  proxySettingsFromConfig,
  type Resolver,
} from './index.js';

const PASSWORD = 'SENTINEL-proxy-pw-71c0';

async function caught(p: Promise<unknown>): Promise<TouchstoneError> {
  try {
    await p;
  } catch (err) {
    if (isTouchstoneError(err)) return err;
    throw err;
  }
  throw new Error('expected a TouchstoneError');
}

function stubDns(table: Record<string, string[]>): Resolver {
  return async (name) => {
    const found = table[name];
    if (found === undefined) {
      throw Object.assign(new Error(`ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    }
    return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}

describe('createProxyRouter', () => {
  const https = (host: string) => new URL(`https://${host}/`);
  const http = (host: string) => new URL(`http://${host}/`);

  it('sends https to HTTPS_PROXY and http to HTTP_PROXY; https falls back to HTTP_PROXY', () => {
    const both = createProxyRouter({
      httpsProxy: 'http://secure-proxy:3128',
      httpProxy: 'http://plain-proxy:8080',
    });
    expect(both.forTarget(https('api.example.com'))?.label).toBe('secure-proxy:3128');
    expect(both.forTarget(http('api.example.com'))?.label).toBe('plain-proxy:8080');

    const onlyHttp = createProxyRouter({ httpProxy: 'plain-proxy:8080' });
    expect(onlyHttp.forTarget(https('api.example.com'))?.label).toBe('plain-proxy:8080');
    const onlyHttps = createProxyRouter({ httpsProxy: 'https://secure-proxy' });
    expect(onlyHttps.forTarget(https('api.example.com'))?.label).toBe('secure-proxy:443');
    expect(onlyHttps.forTarget(http('api.example.com'))).toBeUndefined();
    expect(createProxyRouter({}).forTarget(https('api.example.com'))).toBeUndefined();
    expect(
      createProxyRouter({ httpsProxy: '  ' }).forTarget(https('a.example.com')),
    ).toBeUndefined();
  });

  it.each([
    ['example.com', 'example.com', true],
    ['example.com', 'api.example.com', true],
    ['example.com', 'badexample.com', false],
    ['.example.com', 'api.example.com', true],
    ['*.example.com', 'api.example.com', true],
    ['example.com:8443', 'example.com:8443', true],
    ['example.com:8443', 'example.com', false],
    ['10.0.0.0/8', '10.1.2.3', true],
    ['10.0.0.0/8', '11.1.2.3', false],
    ['192.168.1.5', '192.168.1.5', true],
    ['[::1]', '[::1]', true],
    ['fd00::/8', '[fd00::7]', true],
    ['*', 'anything.example.org', true],
    ['localhost, 127.0.0.1  internal.corp', 'svc.internal.corp', true],
    ['', 'api.example.com', false],
  ])('NO_PROXY %j covers %s: %s', (noProxy, host, bypassed) => {
    const router = createProxyRouter({ httpsProxy: 'http://proxy:3128', noProxy });
    expect(router.forTarget(https(host)) === undefined).toBe(bypassed);
  });

  it('takes the config section (snake_case) as settings', () => {
    expect(
      proxySettingsFromConfig({
        https_proxy: 'http://p:1',
        http_proxy: 'http://q:2',
        no_proxy: 'a',
      }),
    ).toEqual({ httpsProxy: 'http://p:1', httpProxy: 'http://q:2', noProxy: 'a' });
    expect(proxySettingsFromConfig({})).toEqual({});
    expect(proxySettingsFromConfig(undefined)).toEqual({});
  });

  it('turns URL credentials into Proxy-Authorization and never echoes a bad URL', () => {
    const router = createProxyRouter({ httpsProxy: `http://me:${PASSWORD}@proxy:3128` });
    const proxy = router.forTarget(https('api.example.com'));
    expect(proxy?.label).toBe('proxy:3128');
    expect(proxy?.authorization).toBe(`Basic ${Buffer.from(`me:${PASSWORD}`).toString('base64')}`);
    expect(JSON.stringify({ label: proxy?.label })).not.toContain(PASSWORD);

    for (const bad of [`socks5://me:${PASSWORD}@proxy:1080`, `http://me:${PASSWORD}@[bad`]) {
      let message = '';
      try {
        createProxyRouter({ httpsProxy: bad });
      } catch (err) {
        expect((err as TouchstoneError).code).toBe('OUTBOUND_INVALID_URL');
        message = (err as Error).message;
      }
      expect(message).toContain('proxy.https_proxy');
      expect(message).not.toContain(PASSWORD);
    }
  });
});

// --- a real CONNECT proxy ------------------------------------------------------------------------

interface ProxyLog {
  connects: { target: string; headers: IncomingMessage['headers'] }[];
  /** Answer CONNECT with this status instead of opening the tunnel. */
  refuseWith?: number;
}

async function startProxy(log: ProxyLog): Promise<{ server: Server; port: number }> {
  const server = createServer((_req, res) => {
    res.writeHead(405);
    res.end();
  });
  const sockets = new Set<Socket>();
  server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    log.connects.push({ target: req.url ?? '', headers: req.headers });
    if (log.refuseWith !== undefined) {
      client.end(`HTTP/1.1 ${log.refuseWith} No\r\nContent-Length: 0\r\n\r\n`);
      return;
    }
    const { hostname, port } = new URL(`http://${req.url}`);
    const upstream = connect(Number(port), hostname.replace(/^\[|\]$/g, ''), () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  server.on('close', () => {
    for (const s of sockets) s.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

describe('createHttpClient through an environment proxy (real CONNECT proxy on 127.0.0.1)', () => {
  let target: Server;
  let targetPort: number;
  const targetSeen: IncomingMessage['headers'][] = [];
  let proxy: { server: Server; port: number };
  const log: ProxyLog = { connects: [] };

  beforeAll(async () => {
    target = createServer((req, res) => {
      targetSeen.push(req.headers);
      const to = new URL(req.url ?? '/', 'http://x').searchParams.get('to');
      if (to !== null) {
        res.writeHead(302, { location: to });
        res.end();
      } else res.end(`hello ${req.headers.host}`);
    });
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    targetPort = (target.address() as AddressInfo).port;
    proxy = await startProxy(log);
  });
  afterAll(async () => {
    target.closeAllConnections();
    await new Promise<void>((resolve) => target.close(() => resolve()));
    proxy.server.closeAllConnections();
    await new Promise<void>((resolve) => proxy.server.close(() => resolve()));
  });
  beforeEach(() => {
    log.connects.length = 0;
    delete log.refuseWith;
    targetSeen.length = 0;
  });

  const DNS = stubDns({
    'app.example.com': ['127.0.0.1'],
    'private.example.com': ['10.0.0.9'],
    'meta.example.com': ['169.254.169.254'],
  });

  /** A guarded client (127/8 allowed so the local target is reachable) with proxy settings. */
  function guarded(proxySettings: ProxySettings, allowHosts = ['127.0.0.0/8']): HttpClient {
    const guard = createOutboundGuard(
      { allowHosts, requireHttps: false, setting: 'sources.allow_hosts' },
      DNS,
    );
    return createHttpClient({
      timeoutMs: 3000,
      maxRedirects: 2,
      checkTarget: guard.checkTarget,
      wrapConnector: guard.wrapConnector,
      proxy: proxySettings,
    });
  }

  it('resolves and checks the name locally, then tunnels to the checked address', async () => {
    const client = guarded({ httpProxy: `http://127.0.0.1:${proxy.port}` });
    try {
      const res = await client.request({
        method: 'GET',
        url: `http://app.example.com:${targetPort}/x`,
        headers: { authorization: 'Bearer token-for-target' },
      });
      expect(res.status).toBe(200);
      expect(res.body.toString()).toBe(`hello app.example.com:${targetPort}`);
      // The proxy is asked for the address, never the name: it cannot resolve it differently.
      expect(log.connects.map((c) => c.target)).toEqual([`127.0.0.1:${targetPort}`]);
      // Request headers travel inside the tunnel, not to the proxy.
      expect(log.connects[0]?.headers.authorization).toBeUndefined();
      expect(targetSeen[0]?.authorization).toBe('Bearer token-for-target');
    } finally {
      await client.close();
    }
  });

  it.each([
    ['a name resolving to a private address', 'http://private.example.com/'],
    ['a name resolving to the metadata address', 'http://meta.example.com/latest/meta-data/'],
    ['the metadata address', 'http://169.254.169.254/latest/meta-data/'],
    ['loopback outside the allowed range', 'http://[::1]/'],
    ['localhost', 'http://localhost/'],
  ])('refuses %s before asking the proxy', async (_name, url) => {
    const client = guarded({ httpProxy: `http://127.0.0.1:${proxy.port}` });
    try {
      const err = await caught(client.request({ method: 'GET', url }));
      expect(err.code).toBe('OUTBOUND_TARGET_REFUSED');
      expect(err.message).toContain('sources.allow_hosts');
      expect(log.connects).toEqual([]);
    } finally {
      await client.close();
    }
  });

  it('checks every redirect hop before asking the proxy for it', async () => {
    const client = guarded({ httpProxy: `http://127.0.0.1:${proxy.port}` });
    try {
      const err = await caught(
        client.request({
          method: 'GET',
          url: `http://app.example.com:${targetPort}/r?to=${encodeURIComponent('http://meta.example.com/')}`,
        }),
      );
      expect(err.code).toBe('OUTBOUND_TARGET_REFUSED');
      expect(err.message).toContain(
        `redirect from app.example.com:${targetPort} to meta.example.com`,
      );
      expect(log.connects).toHaveLength(1);
    } finally {
      await client.close();
    }
  });

  it('goes direct for NO_PROXY hosts, still through the guard', async () => {
    const client = guarded({
      httpProxy: `http://127.0.0.1:${proxy.port}`,
      noProxy: 'localhost,.example.com',
    });
    try {
      const res = await client.request({
        method: 'GET',
        url: `http://app.example.com:${targetPort}/`,
      });
      expect(res.status).toBe(200);
      expect(log.connects).toEqual([]);
      const err = await caught(
        client.request({ method: 'GET', url: 'http://private.example.com/' }),
      );
      expect(err.code).toBe('OUTBOUND_TARGET_REFUSED');
    } finally {
      await client.close();
    }
  });

  it('authenticates to the proxy from the URL and keeps the password out of errors', async () => {
    const client = guarded({ httpProxy: `http://me:${PASSWORD}@127.0.0.1:${proxy.port}` });
    try {
      await client.request({ method: 'GET', url: `http://app.example.com:${targetPort}/` });
      expect(log.connects[0]?.headers['proxy-authorization']).toBe(
        `Basic ${Buffer.from(`me:${PASSWORD}`).toString('base64')}`,
      );
      expect(JSON.stringify(targetSeen)).not.toContain(PASSWORD);

      log.refuseWith = 407;
      const err = await caught(
        client.request({ method: 'GET', url: `http://app.example.com:${targetPort}/other` }),
      );
      expect(err.code).toBe('OUTBOUND_TARGET_REFUSED');
      expect(err.message).toContain(`the proxy 127.0.0.1:${proxy.port} refused a tunnel`);
      expect(err.message).toContain('status 407');
      expect(`${err.message} ${JSON.stringify(err)}`).not.toContain(PASSWORD);
    } finally {
      await client.close();
    }
  });

  it('reports a proxy failure as retryable unavailability, naming no credentials', async () => {
    log.refuseWith = 502;
    const client = guarded({ httpProxy: `http://me:${PASSWORD}@127.0.0.1:${proxy.port}` });
    try {
      const err = await caught(
        client.request({ method: 'GET', url: `http://app.example.com:${targetPort}/` }),
      );
      expect(err.code).toBe('OUTBOUND_UNAVAILABLE');
      expect(err.retryable).toBe(true);
      expect(err.message).not.toContain(PASSWORD);
    } finally {
      await client.close();
    }
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const dead = guarded({ httpProxy: `http://me:${PASSWORD}@127.0.0.1:${deadPort}` });
    try {
      const err = await caught(
        dead.request({ method: 'GET', url: `http://app.example.com:${targetPort}/` }),
      );
      expect(err.code).toBe('OUTBOUND_UNAVAILABLE');
      expect(err.message).toContain(`the proxy 127.0.0.1:${deadPort} could not be reached`);
      expect(err.message).not.toContain(PASSWORD);
    } finally {
      await dead.close();
    }
  });

  describe('https targets: TLS inside the tunnel, with the name for SNI', () => {
    let dir: string | undefined;
    let tls: TlsServer | undefined;
    let tlsPort = 0;
    const sni: (string | undefined)[] = [];

    beforeAll(async () => {
      try {
        dir = mkdtempSync(join(tmpdir(), 'ts-proxy-tls-'));
        execFileSync(
          'openssl',
          [
            'req',
            '-x509',
            '-newkey',
            'rsa:2048',
            '-nodes',
            '-days',
            '1',
            '-subj',
            '/CN=app.example.com',
            '-keyout',
            join(dir, 'key.pem'),
            '-out',
            join(dir, 'cert.pem'),
          ],
          { stdio: 'ignore' },
        );
      } catch {
        return; // no openssl here: the test below is skipped
      }
      tls = createTlsServer({
        key: readFileSync(join(dir, 'key.pem')),
        cert: readFileSync(join(dir, 'cert.pem')),
        SNICallback: (name, cb) => {
          sni.push(name);
          cb(null, undefined);
        },
      });
      tls.on('tlsClientError', () => {});
      await new Promise<void>((resolve) => tls?.listen(0, '127.0.0.1', resolve));
      tlsPort = (tls.address() as AddressInfo).port;
    });
    afterAll(async () => {
      if (tls) await new Promise<void>((resolve) => tls?.close(() => resolve()));
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('handshakes through the tunnel (self-signed: the certificate check fails, as it must)', async (ctx) => {
      if (tls === undefined) ctx.skip();
      // No HTTPS_PROXY: https falls back to HTTP_PROXY.
      const client = guarded({ httpProxy: `http://127.0.0.1:${proxy.port}` });
      try {
        const err = await caught(
          client.request({ method: 'GET', url: `https://app.example.com:${tlsPort}/` }),
        );
        expect(err.code).toBe('OUTBOUND_TLS_FAILED');
        expect(log.connects.map((c) => c.target)).toEqual([`127.0.0.1:${tlsPort}`]);
        expect(sni).toEqual(['app.example.com']);
      } finally {
        await client.close();
      }
    });
  });
});
