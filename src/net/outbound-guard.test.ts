import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { isTouchstoneError, type TouchstoneError } from '../core/index.js';
import {
  addressRefusal,
  type Connector,
  createHttpClient,
  createOutboundGuard,
  type OutboundPolicy,
  type Resolver,
} from './index.js';

const POLICY: OutboundPolicy = {
  allowHosts: [],
  requireHttps: false,
  setting: 'webhooks.allow_hosts',
};

async function refusal(p: Promise<unknown>): Promise<TouchstoneError> {
  try {
    await p;
  } catch (err) {
    if (isTouchstoneError(err)) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

/** A resolver from a fixed table; names not in it do not resolve. */
function fakeDns(table: Record<string, string[]>): Resolver {
  return async (name) => {
    const found = table[name];
    if (found === undefined)
      throw Object.assign(new Error(`ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}

/** Runs the wrapped connector once against a base that records the dial instead of connecting. */
function dial(
  guard: ReturnType<typeof createOutboundGuard>,
  url: string,
): Promise<{ hostname: string; servername?: string | null }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const base: Connector = (options) => resolve(options);
    const hostname = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
    const options = { hostname, host: u.host, protocol: u.protocol, port: u.port };
    const callback = ((err: Error | null) => reject(err)) as unknown as Parameters<Connector>[1];
    guard.wrapConnector(base)(options as unknown as Parameters<Connector>[0], callback);
  });
}

describe('addressRefusal', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.5.4', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'linkLocal'],
    ['100.100.100.200', 'carrierGradeNat'],
    ['0.0.0.0', 'unspecified'],
    ['255.255.255.255', 'broadcast'],
    ['224.0.0.1', 'multicast'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fe80::1', 'linkLocal'],
    ['fd00::1', 'uniqueLocal'],
    ['fd00:ec2::254', 'uniqueLocal'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:169.254.169.254', 'linkLocal'],
    ['64:ff9b::7f00:1', 'rfc6052'],
    ['64:ff9b::808:808', 'rfc6052'],
    ['2002:7f00:1::', '6to4'],
    ['2002:a00:1::1', '6to4'],
    ['::127.0.0.1', 'ipv4Compatible'],
    ['::7f00:1', 'ipv4Compatible'],
    ['::a9fe:a9fe', 'ipv4Compatible'],
    ['::808:808', 'ipv4Compatible'],
    ['::ffff:0:127.0.0.1', 'rfc6145'],
    ['::ffff:0:a00:1', 'rfc6145'],
  ])('refuses %s (%s)', (address, range) => {
    expect(addressRefusal(address)).toBe(range);
  });

  it.each(['93.184.215.14', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8'])(
    'allows the public address %s',
    (address) => {
      expect(addressRefusal(address)).toBeUndefined();
    },
  );
});

describe('checkTarget (no DNS): literal and loopback targets', () => {
  const guard = createOutboundGuard(POLICY, fakeDns({}));

  it.each([
    'http://127.0.0.1/private-path?token=abc',
    'http://localhost:8080/private-path?token=abc',
    'http://LOCALHOST./private-path?token=abc',
    'http://api.localhost/private-path?token=abc',
    'http://2130706433/private-path?token=abc',
    'http://0x7f.1/private-path?token=abc',
    'http://0177.0.0.1/private-path?token=abc',
    'http://127.1/private-path?token=abc',
    'http://[::1]/private-path?token=abc',
    'http://[::ffff:127.0.0.1]/private-path?token=abc',
    'http://[0:0:0:0:0:ffff:7f00:1]/private-path?token=abc',
    'https://169.254.169.254/latest/meta-data/?token=abc',
    'http://10.0.0.1/private-path?token=abc',
    'http://0.0.0.0/private-path?token=abc',
    'http://0/private-path?token=abc',
    'http://[fd00::1]/private-path?token=abc',
    'http://[fe80::1]/private-path?token=abc',
  ])('refuses %s', async (url) => {
    const err = await refusal(guard.checkTarget(new URL(url)));
    expect(err.code).toBe('OUTBOUND_TARGET_REFUSED');
    expect(err.kind).toBe('permission_denied');
    expect(err.message).toContain('webhooks.allow_hosts');
    expect(err.message).not.toMatch(/private-path|meta-data|abc/);
  });

  it('allows a public IP literal and public names over http and https', async () => {
    await guard.checkTarget(new URL('http://93.184.215.14/hook'));
    await guard.checkTarget(new URL('https://[2606:4700:4700::1111]/hook'));
    await guard.checkTarget(new URL('https://hooks.example.com/hook'));
  });

  it('refuses other schemes', async () => {
    for (const url of ['ftp://example.com/', 'file:///etc/passwd', 'gopher://127.0.0.1/']) {
      expect((await refusal(guard.checkTarget(new URL(url)))).code).toBe('OUTBOUND_INVALID_URL');
    }
  });

  it('with requireHttps refuses plain http unless the host is allowed', async () => {
    const strict = createOutboundGuard(
      { allowHosts: ['mlflow.internal'], requireHttps: true, setting: 'sources.allow_hosts' },
      fakeDns({}),
    );
    const err = await refusal(strict.checkTarget(new URL('http://example.com/')));
    expect(err.message).toContain('plain http');
    await strict.checkTarget(new URL('https://example.com/'));
    await strict.checkTarget(new URL('http://mlflow.internal:5000/'));
  });
});

describe('allow_hosts patterns', () => {
  const guard = createOutboundGuard(
    {
      ...POLICY,
      allowHosts: ['localhost', '*.svc.cluster.local', '127.0.0.1', '10.0.0.0/8', '[fd00::1]'],
    },
    fakeDns({}),
  );

  it.each([
    'http://localhost:9000/',
    'http://receiver.ns.svc.cluster.local/',
    'http://a.b.svc.cluster.local/',
    'http://127.0.0.1:8080/',
    'http://2130706433/',
    'http://[::ffff:127.0.0.1]/',
    'http://10.20.30.40/',
    'http://[fd00::1]/',
  ])('lets %s through', async (url) => {
    await guard.checkTarget(new URL(url));
  });

  it.each([
    'http://127.0.0.2/',
    'http://172.16.0.1/',
    'http://[fd00::2]/',
    'http://169.254.169.254/',
  ])('still refuses %s', async (url) => {
    expect((await refusal(guard.checkTarget(new URL(url)))).code).toBe('OUTBOUND_TARGET_REFUSED');
  });

  it('matches a wildcard on whole labels only', async () => {
    const dns = fakeDns({
      'svc.cluster.local': ['10.96.0.1'],
      'evilsvc.cluster.local': ['10.96.0.2'],
    });
    const g = createOutboundGuard({ ...POLICY, allowHosts: ['*.svc.cluster.local'] }, dns);
    expect((await dial(g, 'http://a.svc.cluster.local/')).hostname).toBe('a.svc.cluster.local');
    expect((await refusal(dial(g, 'http://svc.cluster.local/'))).code).toBe(
      'OUTBOUND_TARGET_REFUSED',
    );
    expect((await refusal(dial(g, 'http://evilsvc.cluster.local/'))).code).toBe(
      'OUTBOUND_TARGET_REFUSED',
    );
  });

  it('rejects malformed patterns at construction', () => {
    expect(() => createOutboundGuard({ ...POLICY, allowHosts: ['10.0.0.0/40'] })).toThrow(/CIDR/);
    expect(() => createOutboundGuard({ ...POLICY, allowHosts: ['a.*.example'] })).toThrow(
      /wildcard/,
    );
  });

  it('"*" allows everything', async () => {
    const open = createOutboundGuard({ ...POLICY, allowHosts: ['*'] }, fakeDns({}));
    await open.checkTarget(new URL('http://169.254.169.254/'));
  });
});

describe('wrapConnector: resolve, check every address, dial the checked one', () => {
  const dns = fakeDns({
    'hooks.example.com': ['93.184.215.14'],
    'both.example.com': ['93.184.215.14', '10.1.2.3'],
    'rebind.example.com': ['127.0.0.1'],
    'meta.example.com': ['::ffff:169.254.169.254'],
    'v6.example.com': ['2606:4700:4700::1111'],
    'inside.example.com': ['10.9.9.9'],
  });
  const guard = createOutboundGuard({ ...POLICY, allowHosts: ['10.9.0.0/16'] }, dns);

  it('dials the resolved public address and keeps the name for TLS', async () => {
    expect(await dial(guard, 'https://hooks.example.com/x')).toMatchObject({
      hostname: '93.184.215.14',
      servername: 'hooks.example.com',
    });
    expect((await dial(guard, 'https://v6.example.com/x')).hostname).toBe('2606:4700:4700::1111');
  });

  it('dials a public IP literal as is, without SNI', async () => {
    const d = await dial(guard, 'http://93.184.215.14:8080/x');
    expect(d.hostname).toBe('93.184.215.14');
    expect(d.servername ?? undefined).toBeUndefined();
  });

  it('refuses a public name resolving to a private, loopback or metadata address', async () => {
    for (const url of [
      'http://both.example.com/',
      'http://rebind.example.com/',
      'http://meta.example.com/',
    ]) {
      const err = await refusal(dial(guard, url));
      expect(err.code).toBe('OUTBOUND_TARGET_REFUSED');
      expect(err.message).toContain('resolves to a');
    }
  });

  it('accepts a name resolving into an allowed range', async () => {
    expect((await dial(guard, 'http://inside.example.com/')).hostname).toBe('10.9.9.9');
  });

  it('refuses a private IP literal that reached the connector', async () => {
    expect((await refusal(dial(guard, 'http://[::1]/'))).code).toBe('OUTBOUND_TARGET_REFUSED');
  });
});

describe('the guard in createHttpClient (real sockets on 127.0.0.1)', () => {
  let server: Server;
  let port: number;
  const seen: IncomingMessage['headers'][] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req.headers);
      res.end('ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  beforeEach(() => {
    seen.length = 0;
  });

  function client(allowHosts: string[], dns: Resolver = fakeDns({})) {
    const guard = createOutboundGuard({ ...POLICY, allowHosts }, dns);
    return createHttpClient({
      timeoutMs: 2000,
      checkTarget: guard.checkTarget,
      wrapConnector: guard.wrapConnector,
    });
  }

  it('refuses loopback before connecting; nothing reaches the server', async () => {
    const c = client([]);
    try {
      for (const url of [
        `http://127.0.0.1:${port}/`,
        `http://2130706433:${port}/`,
        `http://[::ffff:127.0.0.1]:${port}/`,
      ]) {
        expect((await refusal(c.request({ method: 'GET', url }))).code).toBe(
          'OUTBOUND_TARGET_REFUSED',
        );
      }
      expect(seen).toHaveLength(0);
    } finally {
      await c.close();
    }
  });

  it('refuses a name that resolves to loopback at dial time (DNS rebinding)', async () => {
    const c = client([], fakeDns({ 'public.example.com': ['127.0.0.1'] }));
    try {
      const err = await refusal(
        c.request({ method: 'GET', url: `http://public.example.com:${port}/` }),
      );
      expect(err.code).toBe('OUTBOUND_TARGET_REFUSED');
      expect(seen).toHaveLength(0);
    } finally {
      await c.close();
    }
  });

  it('connects to the checked address while keeping the Host header', async () => {
    const c = client(['127.0.0.0/8'], fakeDns({ 'receiver.example.com': ['127.0.0.1'] }));
    try {
      const res = await c.request({ method: 'GET', url: `http://receiver.example.com:${port}/` });
      expect(res.status).toBe(200);
      expect(seen[0]?.host).toBe(`receiver.example.com:${port}`);
    } finally {
      await c.close();
    }
  });

  it('lets an allowed loopback host through', async () => {
    const c = client(['127.0.0.1']);
    try {
      expect((await c.request({ method: 'GET', url: `http://127.0.0.1:${port}/` })).status).toBe(
        200,
      );
    } finally {
      await c.close();
    }
  });
});
