import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import { type McpFixture, mcpFixture } from '../../test/support/mcp.js';
import { MAX_BATCH_MESSAGES } from './http.js';

const ACCEPT = 'application/json, text/event-stream';

function call(id: number, name: string, args: Record<string, unknown> = {}) {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } };
}

/** The raw HTTP checks of the transport: the wire as a client without an SDK sees it. */
describe('/mcp over raw HTTP', () => {
  let f: McpFixture;
  beforeAll(async () => {
    f = await mcpFixture();
  });
  afterAll(async () => {
    await f?.close();
  });

  const post = (body: unknown, headers: Record<string, string> = {}) =>
    fetch(f.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: ACCEPT,
        authorization: `Bearer ${f.keys.viewer}`,
        ...headers,
      },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });

  it('401 without a credential carries the Bearer challenge MCP clients read', async () => {
    const res = await post(call(1, 'whoami'), { authorization: '' });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer realm="touchstone"');
    const wrong = await post(call(1, 'whoami'), { authorization: 'Bearer ts_nope' });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toBe(
      'Bearer realm="touchstone", error="invalid_token"',
    );
  });

  it('a stateless server: tools/call without initialize, no session id, GET and DELETE 405', async () => {
    const res = await post(call(7, 'whoami'));
    expect(res.status).toBe(200);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    expect(((await res.json()) as { id: number }).id).toBe(7);
    for (const method of ['GET', 'DELETE']) {
      const other = await fetch(f.url, {
        method,
        headers: { accept: ACCEPT, authorization: `Bearer ${f.keys.viewer}` },
      });
      expect(other.status, method).toBe(405);
      expect(other.headers.get('allow'), method).toBe('POST');
    }
  });

  it('answers a notification 202, a missing event-stream Accept 406, an unknown protocol version 400', async () => {
    const note = await post({ jsonrpc: '2.0', method: 'notifications/initialized' });
    expect(note.status).toBe(202);
    expect((await post(call(1, 'whoami'), { accept: 'application/json' })).status).toBe(406);
    const future = await post(call(1, 'whoami'), { 'mcp-protocol-version': '2026-07-28' });
    expect(future.status).toBe(400);
  });

  it('refuses a foreign Origin and a foreign Host (DNS rebinding), accepts localhost', async () => {
    const evil = await post(call(1, 'whoami'), { origin: 'http://evil.example.com' });
    expect(evil.status).toBe(403);
    expect(((await evil.json()) as { error: { code: string } }).error.code).toBe(
      'MCP_ORIGIN_REFUSED',
    );
    const port = new URL(f.url).port;
    const local = await post(call(1, 'whoami'), { origin: `http://localhost:${port}` });
    expect(local.status).toBe(200);
    // fetch will not send another Host: the server is reached by a name that is not localhost.
    const rebound = await fetch(f.url.replace('localhost', '127.0.0.1'), {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: ACCEPT,
        authorization: `Bearer ${f.keys.viewer}`,
      },
      body: JSON.stringify(call(1, 'whoami')),
    });
    expect(rebound.status).toBe(200);
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        f.url,
        {
          method: 'POST',
          headers: {
            host: 'evil.example.com',
            'content-type': 'application/json',
            accept: ACCEPT,
            authorization: `Bearer ${f.keys.viewer}`,
          },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify(call(1, 'whoami')));
    });
    expect(status).toBe(403);
  });

  it('checks each call of a JSON-RPC batch on its own', async () => {
    const res = await post([
      call(1, 'whoami'),
      call(2, 'create_run', { spec: {} }),
      call(3, 'get_trace', { trace_id: f.traceId }),
    ]);
    expect(res.status).toBe(200);
    const answers = (await res.json()) as {
      id: number;
      result: { isError?: boolean; content: { text: string }[] };
    }[];
    const byId = new Map(answers.map((a) => [a.id, a.result]));
    expect(byId.get(1)?.isError).toBeUndefined();
    // A viewer may not create runs: that call alone is "not found".
    expect(byId.get(2)).toEqual({
      content: [{ type: 'text', text: 'tool create_run not found' }],
      isError: true,
    });
    expect(byId.get(3)?.isError).toBeUndefined();
  });

  it(`refuses a batch of more than ${MAX_BATCH_MESSAGES} messages before running any`, async () => {
    const batch = Array.from({ length: 1000 }, (_, i) => call(i, 'whoami'));
    const res = await post(batch);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('MCP_BATCH_TOO_LARGE');
    expect(body.error.message).toBe(
      `a batch of 1000 messages; at most ${MAX_BATCH_MESSAGES} per request`,
    );
  });

  it('refuses a body over 2 MiB without reading it into a tool', async () => {
    const huge = JSON.stringify(call(1, 'get_trace', { trace_id: 'x'.repeat(10 * 1024 * 1024) }));
    const res = await post(huge);
    expect(res.status).toBe(413);
    const text = await res.text();
    expect(text).not.toContain('xxxxxxxx');
  });
});

describe('/mcp with an identity provider configured', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await testApp({
      auth: {
        oidc: [
          {
            issuer: 'https://login.example.com',
            audiences: ['touchstone'],
            mappings: [{ groups: ['agents'], project: 'p1', roles: ['viewer'] }],
          },
        ],
      },
    });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('401 points at the protected-resource metadata, served without a credential', async () => {
    const res = await t.app.server.inject({
      method: 'POST',
      url: '/mcp',
      headers: { host: 'localhost:4318', 'content-type': 'application/json', accept: ACCEPT },
      payload: JSON.stringify(call(1, 'whoami')),
    });
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toBe(
      'Bearer realm="touchstone", resource_metadata="http://localhost:4318/.well-known/oauth-protected-resource/mcp"',
    );
    const prm = await t.app.server.inject({
      method: 'GET',
      url: '/.well-known/oauth-protected-resource/mcp',
      headers: { host: 'localhost:4318' },
    });
    expect(prm.statusCode).toBe(200);
    expect(prm.json()).toEqual({
      resource: 'http://localhost:4318/mcp',
      authorization_servers: ['https://login.example.com'],
      bearer_methods_supported: ['header'],
      resource_name: 'Touchstone',
    });
  });
});
