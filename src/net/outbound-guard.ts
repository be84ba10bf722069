import { lookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import { CoreErrors } from '../core/index.js';
import type { Connector } from './connector.js';
import { NetErrors } from './error-codes.js';

/**
 * The outbound rules (SSRF guard) for URLs that users configure: webhooks, trace-source endpoints,
 * judges. Plugged into `createHttpClient` through its `checkTarget` and `wrapConnector` seams.
 *
 * - Only http and https. With `requireHttps`, plain http needs an allowed host.
 * - Every address a name resolves to must be public unicast: loopback, private, link-local (cloud
 *   metadata at 169.254.169.254), unique-local, CGNAT (100.64/10, Alibaba's metadata), unspecified,
 *   multicast, reserved, and IPv6 forms that embed an IPv4 address (IPv4-mapped, IPv4-compatible
 *   `::a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`, NAT64, 6to4, Teredo) are refused. One bad address refuses the name: a receiver has no reason to publish a
 *   private address beside a public one, and an attacker controlling DNS would.
 * - The check runs in the connector, on every new connection, and the connector dials the address
 *   it checked (TLS keeps the original name for SNI and certificate checks, HTTP keeps its Host
 *   header), so a name that resolves differently a second time (DNS rebinding) gains nothing.
 * - Redirects are not followed unless the client is built with `maxRedirects`; then every hop's
 *   URL runs `checkTarget` again and is dialled through this same connector, so a redirect to an
 *   internal address is refused like a configured one.
 * - Through an environment proxy the connector still resolves and checks the name first, then asks
 *   the proxy for a tunnel to the checked address (never the name), so the proxy cannot resolve it
 *   to something else.
 * - `allowHosts` lifts the address and scheme rules for matching hosts: exact names, `*.suffix`
 *   wildcards (one or more labels), IP literals, CIDR ranges (`10.0.0.0/8`), or `*` for all.
 *
 * Numeric host spellings (`2130706433`, `0x7f.1`, `0177.0.0.1`, `[::ffff:127.0.0.1]`) are
 * normalized by the WHATWG URL parser before anything here sees them, so they are checked as the
 * address they denote.
 */

export interface OutboundPolicy {
  /** Host patterns exempt from the address and scheme rules (see above). */
  allowHosts: readonly string[];
  /** Refuse plain http to hosts not in `allowHosts` (trace sources); webhooks may use http. */
  requireHttps: boolean;
  /** The setting that holds `allowHosts`, named in refusals (`webhooks.allow_hosts`). */
  setting: string;
}

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Resolves a host name to every address it has; injectable so tests need no DNS. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

const systemResolver: Resolver = (hostname) => lookup(hostname, { all: true, verbatim: true });

export interface OutboundGuard {
  /**
   * The checks that need no DNS: scheme, https rule, IP literals and `localhost` names. Usable at
   * apply time to refuse obviously internal URLs early; the client runs it before every request.
   */
  checkTarget(url: URL, signal?: AbortSignal): Promise<void>;
  /** Resolves, checks every address and dials the checked one (see above). */
  wrapConnector(base: Connector): Connector;
}

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** Brackets and a trailing dot removed, lower case: the form patterns are matched against. */
export function bareHost(hostname: string): string {
  let h = hostname.toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.endsWith('.')) h = h.slice(0, -1);
  return h;
}

/**
 * `x:…:a.b.c.d` with the dotted tail as two hex groups: ipaddr.js reads `::a.b.c.d` as
 * `::ffff:a.b.c.d`, so the same address would otherwise parse two ways (resolvers and the URL
 * parser write `::7f00:1`).
 */
function hexTail(text: string): string {
  const m = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (m === null) return text;
  const [a, b, c, d] = m.slice(2).map(Number) as [number, number, number, number];
  if ([a, b, c, d].some((n) => n > 255)) return text;
  return `${m[1]}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
}

/** IPv4-mapped IPv6 addresses are their IPv4 address for every rule and pattern. */
export function parseAddress(raw: string): Address | undefined {
  const text = raw.includes(':') ? hexTail(raw) : raw;
  if (!ipaddr.isValid(text)) return undefined;
  const addr = ipaddr.parse(text);
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) {
    return (addr as ipaddr.IPv6).toIPv4Address();
  }
  return addr;
}

/** Compiled host patterns (the `allow_hosts` syntax); also used by credential grants. */
export interface HostPatterns {
  /** True when the host (a name or IP literal; brackets and a trailing dot allowed) matches. */
  matchesHost(host: string): boolean;
  /** True when the address lies in one of the IP or CIDR patterns (or the list holds `*`). */
  matchesAddress(address: string): boolean;
}

interface CompiledAllowList {
  all: boolean;
  names: Set<string>;
  suffixes: string[];
  ranges: [Address, number][];
}

function compileAllowList(patterns: readonly string[], setting: string): CompiledAllowList {
  const out: CompiledAllowList = { all: false, names: new Set(), suffixes: [], ranges: [] };
  patterns.forEach((raw, i) => {
    const p = bareHost(raw.trim());
    if (p === '*') out.all = true;
    else if (p.startsWith('*.') && p.length > 2 && !p.slice(2).includes('*')) {
      out.suffixes.push(p.slice(1));
    } else if (p.includes('/')) {
      try {
        const [addr, bits] = ipaddr.parseCIDR(p);
        const v4 = addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress();
        out.ranges.push(
          v4 ? [(addr as ipaddr.IPv6).toIPv4Address(), Math.max(0, bits - 96)] : [addr, bits],
        );
      } catch {
        throw CoreErrors.INVALID_ARGUMENT(`${setting}[${i}] is not a valid CIDR range`, {
          details: [
            { path: `${setting}[${i}]`, message: 'expected a CIDR range such as 10.0.0.0/8' },
          ],
        });
      }
    } else if (p.includes('*') || p === '') {
      throw CoreErrors.INVALID_ARGUMENT(
        `${setting}[${i}]: only a leading "*." wildcard is allowed`,
        {
          details: [
            { path: `${setting}[${i}]`, message: 'expected a name, *.suffix, IP, CIDR or *' },
          ],
        },
      );
    } else {
      const addr = parseAddress(p);
      if (addr === undefined) out.names.add(p);
      else out.ranges.push([addr, addr.kind() === 'ipv4' ? 32 : 128]);
    }
  });
  return out;
}

function inRanges(addr: Address, ranges: CompiledAllowList['ranges']): boolean {
  return ranges.some(([net, bits]) => net.kind() === addr.kind() && addr.match(net, bits));
}

/**
 * Compiles host patterns: exact names, `*.suffix` (one or more whole labels), IP literals, CIDR
 * ranges, or `*`. A malformed pattern throws INVALID_ARGUMENT naming `<setting>[i]`.
 */
export function compileHostPatterns(patterns: readonly string[], setting: string): HostPatterns {
  const list = compileAllowList(patterns, setting);
  return {
    matchesHost(hostname) {
      const host = bareHost(hostname);
      if (list.all || list.names.has(host)) return true;
      if (list.suffixes.some((s) => host.endsWith(s))) return true;
      const addr = parseAddress(host);
      return addr !== undefined && inRanges(addr, list.ranges);
    },
    matchesAddress(address) {
      if (list.all) return true;
      const addr = parseAddress(bareHost(address));
      return addr !== undefined && inRanges(addr, list.ranges);
    },
  };
}

/**
 * `::a.b.c.d` (IPv4-compatible, ::/96, deprecated by RFC 4291): ipaddr.js calls these unicast,
 * but a host with a 6-in-4 tunnel sends them to the IPv4 address, so `[::127.0.0.1]` (which the
 * URL parser writes `[::7f00:1]`) would reach loopback. (`::` and `::1` have ranges of their own.)
 */
function isIpv4Compatible(addr: Address): boolean {
  if (addr.kind() !== 'ipv6') return false;
  return (addr as ipaddr.IPv6).parts.slice(0, 6).every((p) => p === 0);
}

/** Why an address may not be dialled without an allow-list entry, or undefined when it may. */
export function addressRefusal(text: string): string | undefined {
  const addr = parseAddress(text);
  if (addr === undefined) return 'not an IP address';
  const range = addr.range();
  if (range === 'unicast' && isIpv4Compatible(addr)) return 'ipv4Compatible';
  return range === 'unicast' ? undefined : range;
}

export function createOutboundGuard(
  policy: OutboundPolicy,
  resolve: Resolver = systemResolver,
): OutboundGuard {
  const allow = compileHostPatterns(policy.allowHosts, policy.setting);
  const hostAllowed = (host: string) => allow.matchesHost(host);

  function refuse(host: string, why: string) {
    return NetErrors.OUTBOUND_TARGET_REFUSED(
      `${host} is refused by the outbound rules: ${why}; list the host in ${policy.setting} to allow it`,
    );
  }

  /** Throws unless the address is public or inside an allowed range. */
  function checkAddress(host: string, address: string): void {
    if (allow.matchesAddress(address)) return;
    const why = addressRefusal(address);
    if (why !== undefined) {
      throw refuse(host, host === address ? `${why} address` : `it resolves to a ${why} address`);
    }
  }

  async function checkTarget(url: URL): Promise<void> {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw NetErrors.OUTBOUND_INVALID_URL(
        `outbound URL scheme ${JSON.stringify(url.protocol)} is not http or https`,
      );
    }
    const host = bareHost(url.hostname);
    if (hostAllowed(host)) return;
    if (policy.requireHttps && url.protocol === 'http:') throw refuse(host, 'plain http');
    if (host === 'localhost' || host.endsWith('.localhost')) throw refuse(host, 'loopback name');
    if (parseAddress(host) !== undefined) checkAddress(host, host);
  }

  async function pickAddress(hostname: string): Promise<string> {
    const host = bareHost(hostname);
    if (hostAllowed(host)) return hostname;
    if (parseAddress(host) !== undefined) {
      checkAddress(host, host);
      return host;
    }
    const addresses = await resolve(host);
    if (addresses.length === 0) throw refuse(host, 'it resolves to no address');
    for (const a of addresses) checkAddress(host, a.address);
    return (addresses[0] as ResolvedAddress).address;
  }

  function wrapConnector(base: Connector): Connector {
    return (options, callback) => {
      pickAddress(options.hostname).then(
        (address) => {
          // The certificate is checked against the name, not the address dialled.
          const servername =
            options.servername ??
            (parseAddress(bareHost(options.hostname)) ? undefined : options.hostname);
          base({ ...options, hostname: address, ...(servername ? { servername } : {}) }, callback);
        },
        (err: Error) => callback(err, null),
      );
    };
  }

  return { checkTarget, wrapConnector };
}
