import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { Resolver as DnsResolver } from 'node:dns/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import ipaddr from 'ipaddr.js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { isTouchstoneError, type TouchstoneError } from '../core/index.js';
import {
  type Connector,
  compileHostPatterns,
  createHttpClient,
  createOutboundGuard,
  type HttpClient,
  type OutboundPolicy,
  type ResolvedAddress,
  type Resolver,
} from './index.js';

/**
 * The SSRF matrix: every internal form the outbound rules must refuse, tried through the real
 * client, once without an allow-list entry (refused; nothing is dialled and the server sees
 * nothing) and once with one (allowed: the request is made, to the address the guard chose).
 *
 * Nothing here touches a real internal network: the connector under the guard records the
 * address the guard asked to dial and then connects to a local test server instead, so `0.0.0.0`
 * or `169.254.169.254` are checked for real but answered locally. Names resolve through a stub
 * resolver (and, in one block, through a real DNS server on 127.0.0.1).
 */

const SENTINEL = 'SENTINEL-ssrf-9b1f3c';

/** Names the stub resolver knows; everything else does not resolve. */
const DNS: Record<string, string[]> = {
  'public.example.com': ['93.184.215.14'],
  'other.example.com': ['93.184.215.15'],
  'loopback.example.com': ['127.0.0.1'],
  'metadata.example.com': ['169.254.169.254'],
  'private10.example.com': ['10.1.2.3'],
  'private172.example.com': ['172.20.0.5'],
  'private192.example.com': ['192.168.1.20'],
  'ula.example.com': ['fd00::1'],
  'mixed.example.com': ['93.184.215.14', '192.168.1.1'],
  'mapped.example.com': ['::ffff:127.0.0.1'],
  'compatible.example.com': ['::127.0.0.1'],
  'zero.example.com': ['0.0.0.0'],
};

function stubDns(table: Record<string, string[]> = DNS): Resolver {
  return async (name) => {
    const found = table[name];
    if (found === undefined) {
      throw Object.assign(new Error(`ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    }
    return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}

async function refusal(p: Promise<unknown>): Promise<TouchstoneError> {
  try {
    await p;
  } catch (err) {
    if (isTouchstoneError(err)) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

function sameAddress(a: string, b: string): boolean {
  if (!ipaddr.isValid(a) || !ipaddr.isValid(b)) return a === b;
  return ipaddr.process(a).toString() === ipaddr.process(b).toString();
}

// --- the local server every allowed dial lands on ------------------------------------------------

let server: Server;
let port: number;
const seen: { host: string; url: string; headers: IncomingMessage['headers'] }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push({ host: req.headers.host ?? '', url: req.url ?? '', headers: req.headers });
    const url = new URL(req.url ?? '/', 'http://x');
    const to = url.searchParams.get('to');
    if (url.pathname === '/redirect' && to !== null) {
      res.writeHead(Number(url.searchParams.get('status') ?? 302), { location: to });
      res.end();
      return;
    }
    res.end(`ok ${req.headers.host}`);
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

const WEBHOOKS: Omit<OutboundPolicy, 'allowHosts'> = {
  requireHttps: false,
  setting: 'webhooks.allow_hosts',
};
const SOURCES: Omit<OutboundPolicy, 'allowHosts'> = {
  requireHttps: true,
  setting: 'sources.allow_hosts',
};

interface Harness {
  client: HttpClient;
  /** Addresses (or allowed names) the guard asked the connector to dial, in order. */
  dialled: string[];
  resolved: string[];
}

/** The real client with the real guard; the dial is recorded, then sent to the local server. */
function harness(
  policy: Omit<OutboundPolicy, 'allowHosts'>,
  allowHosts: string[],
  resolver: Resolver = stubDns(),
  maxRedirects = 5,
): Harness {
  const dialled: string[] = [];
  const resolved: string[] = [];
  const guard = createOutboundGuard({ ...policy, allowHosts }, async (name) => {
    resolved.push(name);
    return resolver(name);
  });
  const reroute =
    (base: Connector): Connector =>
    (options, callback) => {
      dialled.push(options.hostname);
      base({ ...options, hostname: '127.0.0.1', port: String(port) }, callback);
    };
  const client = createHttpClient({
    timeoutMs: 3000,
    maxRedirects,
    checkTarget: guard.checkTarget,
    wrapConnector: (base) => guard.wrapConnector(reroute(base)),
  });
  return { client, dialled, resolved };
}

async function withHarness<T>(h: Harness, fn: (h: Harness) => Promise<T>): Promise<T> {
  try {
    return await fn(h);
  } finally {
    await h.client.close();
  }
}

// --- the matrix ----------------------------------------------------------------------------------

interface Case {
  /** What the row is about. */
  name: string;
  /** `host[:port]` as written in the URL. */
  host: string;
  /** The allow-list entry that lets it through. */
  allow: string;
  /** What the guard dials once allowed (an address, or the name itself for allowed names). */
  dials: string;
}

const MATRIX: Case[] = [
  { name: 'IPv4 loopback', host: '127.0.0.1', allow: '127.0.0.1', dials: '127.0.0.1' },
  {
    name: 'loopback elsewhere in 127/8',
    host: '127.8.9.10',
    allow: '127.0.0.0/8',
    dials: '127.8.9.10',
  },
  { name: 'localhost', host: 'localhost', allow: 'localhost', dials: 'localhost' },
  {
    name: 'a *.localhost name',
    host: 'api.localhost',
    allow: '*.localhost',
    dials: 'api.localhost',
  },
  { name: 'decimal 2130706433', host: '2130706433', allow: '127.0.0.1', dials: '127.0.0.1' },
  { name: 'hex 0x7f.1', host: '0x7f.1', allow: '127.0.0.1', dials: '127.0.0.1' },
  { name: 'octal 0177.0.0.1', host: '0177.0.0.1', allow: '127.0.0.1', dials: '127.0.0.1' },
  { name: 'short 127.1', host: '127.1', allow: '127.0.0.1', dials: '127.0.0.1' },
  { name: 'IPv6 loopback [::1]', host: '[::1]', allow: '::1', dials: '::1' },
  {
    name: 'IPv4-mapped [::ffff:127.0.0.1]',
    host: '[::ffff:127.0.0.1]',
    allow: '127.0.0.1',
    dials: '::ffff:127.0.0.1',
  },
  {
    name: 'IPv4-mapped, hex form [::ffff:7f00:1]',
    host: '[::ffff:7f00:1]',
    allow: '127.0.0.0/8',
    dials: '::ffff:127.0.0.1',
  },
  {
    name: 'cloud metadata 169.254.169.254',
    host: '169.254.169.254',
    allow: '169.254.169.254',
    dials: '169.254.169.254',
  },
  {
    name: 'metadata, IPv4-mapped',
    host: '[::ffff:169.254.169.254]',
    allow: '169.254.0.0/16',
    dials: '::ffff:169.254.169.254',
  },
  {
    name: 'metadata, IPv6 (AWS)',
    host: '[fd00:ec2::254]',
    allow: 'fd00::/8',
    dials: 'fd00:ec2::254',
  },
  {
    name: 'metadata, Alibaba (CGNAT range)',
    host: '100.100.100.200',
    allow: '100.64.0.0/10',
    dials: '100.100.100.200',
  },
  { name: 'unique-local fd00::1', host: '[fd00::1]', allow: '[fd00::1]', dials: 'fd00::1' },
  { name: 'link-local fe80::1', host: '[fe80::1]', allow: 'fe80::/10', dials: 'fe80::1' },
  { name: '10/8, first host', host: '10.0.0.1', allow: '10.0.0.0/8', dials: '10.0.0.1' },
  { name: '10/8, last host', host: '10.255.255.254', allow: '10.0.0.0/8', dials: '10.255.255.254' },
  {
    name: '172.16/12, first host',
    host: '172.16.0.1',
    allow: '172.16.0.0/12',
    dials: '172.16.0.1',
  },
  {
    name: '172.16/12, last host',
    host: '172.31.255.254',
    allow: '172.16.0.0/12',
    dials: '172.31.255.254',
  },
  {
    name: '192.168/16, first host',
    host: '192.168.0.1',
    allow: '192.168.0.0/16',
    dials: '192.168.0.1',
  },
  {
    name: '192.168/16, last host',
    host: '192.168.255.254',
    allow: '192.168.0.0/16',
    dials: '192.168.255.254',
  },
  { name: 'unspecified 0.0.0.0', host: '0.0.0.0', allow: '0.0.0.0', dials: '0.0.0.0' },
  { name: 'unspecified, short 0', host: '0', allow: '0.0.0.0', dials: '0.0.0.0' },
  { name: 'unspecified [::]', host: '[::]', allow: '::', dials: '::' },
  {
    name: 'NAT64 of loopback [64:ff9b::7f00:1]',
    host: '[64:ff9b::7f00:1]',
    allow: '64:ff9b::/96',
    dials: '64:ff9b::7f00:1',
  },
  {
    name: 'IPv4-compatible loopback [::127.0.0.1]',
    host: '[::127.0.0.1]',
    allow: '::/96',
    dials: '::7f00:1',
  },
  {
    name: 'IPv4-compatible metadata [::169.254.169.254]',
    host: '[::169.254.169.254]',
    allow: '[::169.254.169.254]',
    dials: '::a9fe:a9fe',
  },
  {
    name: 'IPv4-translated loopback [::ffff:0:127.0.0.1]',
    host: '[::ffff:0:127.0.0.1]',
    allow: '::ffff:0:0:0/96',
    dials: '::ffff:0:7f00:1',
  },
  {
    name: 'NAT64 of 10/8 [64:ff9b::10.0.0.1]',
    host: '[64:ff9b::10.0.0.1]',
    allow: '64:ff9b::/96',
    dials: '64:ff9b::a00:1',
  },
  {
    name: '6to4 of loopback [2002:7f00:1::1]',
    host: '[2002:7f00:1::1]',
    allow: '2002::/16',
    dials: '2002:7f00:1::1',
  },
  {
    name: '6to4 of 192.168/16 [2002:c0a8:101::1]',
    host: '[2002:c0a8:101::1]',
    allow: '2002:c0a8::/32',
    dials: '2002:c0a8:101::1',
  },
  // Public names whose DNS answer is internal (the stub resolver plays the attacker's DNS).
  {
    name: 'public name resolving to 127.0.0.1',
    host: 'loopback.example.com',
    allow: 'loopback.example.com',
    dials: 'loopback.example.com',
  },
  {
    name: 'public name resolving to the metadata address',
    host: 'metadata.example.com',
    allow: '169.254.169.254',
    dials: '169.254.169.254',
  },
  {
    name: 'public name resolving into 10/8',
    host: 'private10.example.com',
    allow: '10.0.0.0/8',
    dials: '10.1.2.3',
  },
  {
    name: 'public name resolving into 172.16/12',
    host: 'private172.example.com',
    allow: '*.example.com',
    dials: 'private172.example.com',
  },
  {
    name: 'public name resolving into 192.168/16',
    host: 'private192.example.com',
    allow: '192.168.0.0/16',
    dials: '192.168.1.20',
  },
  {
    name: 'public name resolving to fd00::1',
    host: 'ula.example.com',
    allow: 'fd00::/8',
    dials: 'fd00::1',
  },
  {
    name: 'public name with one public and one private address',
    host: 'mixed.example.com',
    allow: '192.168.0.0/16',
    dials: '93.184.215.14',
  },
  {
    name: 'public name resolving to ::ffff:127.0.0.1',
    host: 'mapped.example.com',
    allow: '127.0.0.0/8',
    dials: '::ffff:127.0.0.1',
  },
  {
    name: 'public name resolving to ::127.0.0.1 (IPv4-compatible)',
    host: 'compatible.example.com',
    allow: '::/96',
    dials: '::127.0.0.1',
  },
  {
    name: 'public name resolving to 0.0.0.0',
    host: 'zero.example.com',
    allow: '0.0.0.0',
    dials: '0.0.0.0',
  },
];

describe.each([
  ['webhooks rules (http allowed)', WEBHOOKS],
  ['sources rules (https required)', SOURCES],
])('SSRF matrix, %s', (_label, policy) => {
  describe('plain client: every internal target is refused before anything is sent', () => {
    it.each(MATRIX)('$name ($host)', async ({ host }) => {
      await withHarness(harness(policy, []), async (h) => {
        // https, so the refusal below is the address rule and not the https rule.
        const err = await refusal(
          h.client.request({
            method: 'GET',
            url: `https://${host}/secret-path?token=${SENTINEL}`,
            headers: { authorization: `Bearer ${SENTINEL}` },
          }),
        );
        expect(err.code).toBe('OUTBOUND_TARGET_REFUSED');
        expect(err.kind).toBe('permission_denied');
        expect(err.message).toContain(policy.setting);
        expect(err.message).not.toContain('plain http');
        expect(err.message).not.toMatch(/secret-path|SENTINEL/);
        expect(h.dialled).toEqual([]);
        expect(seen).toEqual([]);
      });
    });
  });

  describe('allow-listed client: the same target is reached, at the address checked', () => {
    it.each(MATRIX)('$name ($host) allowed by "$allow"', async ({ host, allow, dials }) => {
      await withHarness(harness(policy, [allow]), async (h) => {
        const url = new URL(`http://${host}/path`);
        // An allow-listed host is exempt from the https rule too. A name let through only by its
        // address range is not, so under the sources rules it must still be https: the dial then
        // happens (at the checked address) and only TLS fails, against this plain-http server.
        const nameListed = compileHostPatterns([allow], 'test').matchesHost(url.hostname);
        if (policy.requireHttps && !nameListed) {
          url.protocol = 'https:';
          const err = await refusal(h.client.request({ method: 'GET', url }));
          expect(err.code).not.toBe('OUTBOUND_TARGET_REFUSED');
        } else {
          const res = await h.client.request({ method: 'GET', url });
          expect(res.status).toBe(200);
          expect(seen).toHaveLength(1);
          // The Host header keeps what the URL said (normalized by the parser), not the address.
          expect(seen[0]?.host).toBe(url.host);
        }
        expect(h.dialled).toHaveLength(1);
        expect(sameAddress(h.dialled[0] as string, dials), `dialled ${h.dialled[0]}`).toBe(true);
      });
    });
  });

  it('a public name is allowed without any entry (https), and dialled at its checked address', async () => {
    await withHarness(harness(policy, []), async (h) => {
      // The local server speaks http only; the TLS failure proves the dial got that far.
      const err = await refusal(
        h.client.request({ method: 'GET', url: 'https://public.example.com/' }),
      );
      expect(err.code).not.toBe('OUTBOUND_TARGET_REFUSED');
      expect(h.dialled).toEqual(['93.184.215.14']);
    });
  });
});

describe('the https rule for sources', () => {
  it('refuses plain http to a public name unless the host is allow-listed', async () => {
    await withHarness(harness(SOURCES, []), async (h) => {
      const err = await refusal(
        h.client.request({ method: 'GET', url: 'http://public.example.com/' }),
      );
      expect(err.code).toBe('OUTBOUND_TARGET_REFUSED');
      expect(err.message).toContain('plain http');
      expect(h.dialled).toEqual([]);
    });
    await withHarness(harness(SOURCES, ['public.example.com']), async (h) => {
      expect(
        (await h.client.request({ method: 'GET', url: 'http://public.example.com/' })).status,
      ).toBe(200);
    });
  });
});

// --- redirects -----------------------------------------------------------------------------------

interface RedirectCase {
  name: string;
  /** Where the public origin redirects to. */
  to: string;
  allow: string;
}

const REDIRECTS: RedirectCase[] = [
  { name: 'to 127.0.0.1', to: 'http://127.0.0.1/', allow: '127.0.0.1' },
  { name: 'to localhost', to: 'http://localhost/admin', allow: 'localhost' },
  { name: 'to 2130706433', to: 'http://2130706433/', allow: '127.0.0.1' },
  { name: 'to [::1]', to: 'http://[::1]/', allow: '::1' },
  { name: 'to [::ffff:127.0.0.1]', to: 'http://[::ffff:127.0.0.1]/', allow: '127.0.0.1' },
  {
    name: 'to the metadata address',
    to: 'http://169.254.169.254/latest/meta-data/iam/security-credentials/',
    allow: '169.254.169.254',
  },
  { name: 'to 10/8', to: 'http://10.0.0.1/', allow: '10.0.0.0/8' },
  { name: 'to 172.16/12', to: 'http://172.16.0.1/', allow: '172.16.0.0/12' },
  { name: 'to 192.168/16', to: 'http://192.168.0.1/', allow: '192.168.0.0/16' },
  { name: 'to 0.0.0.0', to: 'http://0.0.0.0/', allow: '0.0.0.0' },
  { name: 'to [fd00::1]', to: 'http://[fd00::1]/', allow: 'fd00::/8' },
  {
    name: 'to a name resolving to 127.0.0.1',
    to: 'http://loopback.example.com/',
    allow: 'loopback.example.com',
  },
  {
    name: 'to a name resolving to the metadata address',
    to: 'http://metadata.example.com/latest/meta-data/',
    allow: '169.254.0.0/16',
  },
];

function redirectUrl(to: string, status = 302): string {
  return `http://public.example.com/redirect?status=${status}&to=${encodeURIComponent(to)}`;
}

describe('redirects: every hop is checked', () => {
  describe('refused without an allow-list entry; only the first hop reaches a server', () => {
    it.each(REDIRECTS)('$name', async ({ to }) => {
      await withHarness(harness(WEBHOOKS, []), async (h) => {
        const err = await refusal(
          h.client.request({
            method: 'GET',
            url: redirectUrl(to),
            headers: { authorization: `Bearer ${SENTINEL}` },
          }),
        );
        expect(err.code).toBe('OUTBOUND_TARGET_REFUSED');
        expect(err.message).toContain(`redirect from public.example.com to ${new URL(to).host}`);
        expect(err.message).toContain('webhooks.allow_hosts');
        expect(err.message).not.toMatch(/meta-data|admin|SENTINEL/);
        expect(h.dialled).toEqual(['93.184.215.14']);
        expect(seen.map((s) => s.host)).toEqual(['public.example.com']);
      });
    });
  });

  describe('followed when the target is allow-listed', () => {
    it.each(REDIRECTS)('$name', async ({ to, allow }) => {
      await withHarness(harness(WEBHOOKS, [allow]), async (h) => {
        const res = await h.client.request({ method: 'GET', url: redirectUrl(to) });
        expect(res.status).toBe(200);
        expect(res.url).toBe(new URL(to).href);
        expect(h.dialled).toHaveLength(2);
        expect(seen.map((s) => s.host)).toEqual(['public.example.com', new URL(to).host]);
      });
    });
  });

  it.each([301, 302, 303, 307, 308])('a %i to the metadata address is refused', async (status) => {
    await withHarness(harness(WEBHOOKS, []), async (h) => {
      const err = await refusal(
        h.client.request({
          method: 'POST',
          url: redirectUrl('http://169.254.169.254/', status),
          body: '{}',
        }),
      );
      expect(err.code).toBe('OUTBOUND_TARGET_REFUSED');
      expect(seen).toHaveLength(1);
    });
  });

  it('follows a redirect to another public name, then refuses the next hop to loopback', async () => {
    const second = `http://other.example.com/redirect?to=${encodeURIComponent('http://127.0.0.1/')}`;
    await withHarness(harness(WEBHOOKS, []), async (h) => {
      const err = await refusal(h.client.request({ method: 'GET', url: redirectUrl(second) }));
      expect(err.message).toContain('redirect from other.example.com to 127.0.0.1');
      expect(h.dialled).toEqual(['93.184.215.14', '93.184.215.15']);
      expect(seen.map((s) => s.host)).toEqual(['public.example.com', 'other.example.com']);
    });
  });

  it('follows a public redirect to the end', async () => {
    await withHarness(harness(WEBHOOKS, []), async (h) => {
      const res = await h.client.request({
        method: 'GET',
        url: redirectUrl('http://other.example.com/final'),
      });
      expect(res.status).toBe(200);
      expect(res.body.toString()).toBe('ok other.example.com');
      expect(h.dialled).toEqual(['93.184.215.14', '93.184.215.15']);
    });
  });

  it('without maxRedirects the 3xx is returned and nothing else is dialled', async () => {
    await withHarness(harness(WEBHOOKS, [], stubDns(), 0), async (h) => {
      const res = await h.client.request({ method: 'GET', url: redirectUrl('http://127.0.0.1/') });
      expect(res.status).toBe(302);
      expect(res.headers.location).toBe('http://127.0.0.1/');
      expect(h.dialled).toEqual(['93.184.215.14']);
    });
  });

  it('with the sources rules, a redirect from https to plain http is refused', async () => {
    // The origin is allow-listed so the test server can answer it over http; the hop is not.
    await withHarness(harness(SOURCES, ['public.example.com']), async (h) => {
      const err = await refusal(
        h.client.request({ method: 'GET', url: redirectUrl('http://other.example.com/') }),
      );
      expect(err.message).toContain('redirect from public.example.com to other.example.com');
      expect(err.message).toContain('plain http');
    });
  });
});

// --- DNS rebinding -------------------------------------------------------------------------------

describe('DNS rebinding: the address checked is the address dialled', () => {
  it('resolves once per connection and dials that answer, whatever DNS says next', async () => {
    let calls = 0;
    const flipping: Resolver = async () => {
      calls++;
      return [{ address: calls === 1 ? '93.184.215.14' : '127.0.0.1', family: 4 }];
    };
    await withHarness(harness(WEBHOOKS, [], flipping), async (h) => {
      const res = await h.client.request({ method: 'GET', url: 'http://rebind.example.com/' });
      expect(res.status).toBe(200);
      expect(h.dialled).toEqual(['93.184.215.14']);
      expect(calls).toBe(1);
    });
    // A new connection resolves again and meets the second answer: refused.
    await withHarness(harness(WEBHOOKS, [], flipping), async (h) => {
      const err = await refusal(
        h.client.request({ method: 'GET', url: 'http://rebind.example.com/' }),
      );
      expect(err.code).toBe('OUTBOUND_TARGET_REFUSED');
      expect(h.dialled).toEqual([]);
    });
  });
});

// --- a real DNS server on 127.0.0.1 --------------------------------------------------------------

/** A minimal authoritative DNS server over UDP: A and AAAA answers from a table. */
async function startDnsServer(
  table: Record<string, string[]>,
): Promise<{ socket: UdpSocket; port: number }> {
  const socket = createSocket('udp4');
  socket.on('message', (msg, rinfo) => {
    if (msg.length < 12) return;
    let offset = 12;
    const labels: string[] = [];
    while (offset < msg.length) {
      const len = msg[offset] as number;
      if (len === 0) break;
      labels.push(msg.subarray(offset + 1, offset + 1 + len).toString('ascii'));
      offset += 1 + len;
    }
    const questionEnd = offset + 5;
    const qtype = msg.readUInt16BE(offset + 1);
    const name = labels.join('.').toLowerCase();
    const known = table[name];
    const want = qtype === 1 ? 4 : qtype === 28 ? 6 : 0;
    const answers = (known ?? []).filter((a) => want !== 0 && (a.includes(':') ? 6 : 4) === want);
    const header = Buffer.alloc(12);
    msg.copy(header, 0, 0, 2);
    header.writeUInt16BE(known === undefined ? 0x8183 : 0x8180, 2); // NXDOMAIN or NOERROR
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answers.length, 6);
    const records = answers.map((a) => {
      const rdata = Buffer.from(ipaddr.parse(a).toByteArray());
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0); // pointer to the question's name
      rr.writeUInt16BE(qtype, 2);
      rr.writeUInt16BE(1, 4); // IN
      rr.writeUInt32BE(5, 6); // TTL
      rr.writeUInt16BE(rdata.length, 10);
      return Buffer.concat([rr, rdata]);
    });
    socket.send(
      Buffer.concat([header, msg.subarray(12, questionEnd), ...records]),
      rinfo.port,
      rinfo.address,
    );
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return { socket, port: socket.address().port };
}

/** A guard Resolver on node:dns pointed at one server (what a pod's resolv.conf would give). */
function dnsServerResolver(serverPort: number): Resolver {
  const resolver = new DnsResolver({ timeout: 1000, tries: 1 });
  resolver.setServers([`127.0.0.1:${serverPort}`]);
  return async (name) => {
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)]);
    const out: ResolvedAddress[] = [];
    if (v4.status === 'fulfilled') out.push(...v4.value.map((address) => ({ address, family: 4 })));
    if (v6.status === 'fulfilled') out.push(...v6.value.map((address) => ({ address, family: 6 })));
    if (out.length === 0 && v4.status === 'rejected') throw v4.reason;
    return out;
  };
}

describe('with a real DNS server on 127.0.0.1', () => {
  let dns: { socket: UdpSocket; port: number };
  beforeAll(async () => {
    dns = await startDnsServer({
      'www.public.test': ['93.184.215.14'],
      'rebind.public.test': ['127.0.0.1'],
      'meta.public.test': ['169.254.169.254'],
      'v6.public.test': ['fd00::1'],
      'both.public.test': ['93.184.215.14', '10.0.0.7'],
    });
  });
  afterAll(() => new Promise<void>((resolve) => dns.socket.close(() => resolve())));

  it.each([
    ['rebind.public.test', '127.0.0.1'],
    ['meta.public.test', '169.254.169.254'],
    ['v6.public.test', 'fd00::1'],
    ['both.public.test', '10.0.0.7'],
  ])('refuses %s (resolves to %s)', async (name) => {
    await withHarness(harness(WEBHOOKS, [], dnsServerResolver(dns.port)), async (h) => {
      const err = await refusal(h.client.request({ method: 'GET', url: `http://${name}/` }));
      expect(err.code).toBe('OUTBOUND_TARGET_REFUSED');
      expect(err.message).toContain('resolves to a');
      expect(h.resolved).toEqual([name]);
      expect(h.dialled).toEqual([]);
      expect(seen).toEqual([]);
    });
  });

  it('dials the public answer, and an allow-listed range lets the private one through', async () => {
    await withHarness(harness(WEBHOOKS, [], dnsServerResolver(dns.port)), async (h) => {
      expect(
        (await h.client.request({ method: 'GET', url: 'http://www.public.test/' })).status,
      ).toBe(200);
      expect(h.dialled).toEqual(['93.184.215.14']);
    });
    await withHarness(
      harness(WEBHOOKS, ['127.0.0.0/8'], dnsServerResolver(dns.port)),
      async (h) => {
        expect(
          (await h.client.request({ method: 'GET', url: 'http://rebind.public.test/' })).status,
        ).toBe(200);
        expect(h.dialled).toEqual(['127.0.0.1']);
      },
    );
  });

  it('refuses a name the server does not know (no address to check)', async () => {
    await withHarness(harness(WEBHOOKS, [], dnsServerResolver(dns.port)), async (h) => {
      const err = await refusal(
        h.client.request({ method: 'GET', url: 'http://nowhere.public.test/' }),
      );
      expect(err.code).toBe('OUTBOUND_UNAVAILABLE');
      expect(err.message).toContain('ENOTFOUND');
      expect(h.dialled).toEqual([]);
    });
  });
});
