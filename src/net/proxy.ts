import type { Socket } from 'node:net';
import type { Connector } from './connector.js';
import { NetErrors } from './error-codes.js';
import { bareHost, parseAddress } from './outbound-guard.js';

/**
 * Proxy settings in the environment's terms (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`). Only
 * `main.ts` reads the environment: config copies these variables into `proxy.*` and the
 * composition root hands them to `createHttpClient`.
 *
 * - https targets use `httpsProxy`, or `httpProxy` when that is unset; http targets use
 *   `httpProxy` (the curl and undici convention).
 * - Both targets are reached with a `CONNECT` tunnel (the proxy must allow CONNECT to the target's
 *   port); TLS to an https target runs inside the tunnel with the target's name for SNI and the
 *   certificate check, so the proxy sees neither the path nor the headers.
 * - `noProxy` lists hosts reached directly: comma- or space-separated names (a name also covers
 *   its subdomains; a leading `.` or `*.` is the same), optional `:port`, IP addresses, CIDR ranges,
 *   or `*` for every host.
 * - A proxy URL may carry `user:password@`; it becomes a `Proxy-Authorization: Basic` header and
 *   never appears in an error.
 */
export interface ProxySettings {
  /** Proxy for https targets (`HTTPS_PROXY`); falls back to `httpProxy`. */
  httpsProxy?: string;
  /** Proxy for http targets (`HTTP_PROXY`), and for https ones when `httpsProxy` is unset. */
  httpProxy?: string;
  /** Hosts reached without the proxy (`NO_PROXY`). */
  noProxy?: string;
}

/**
 * The server config's `proxy` section (snake_case, as `config.proxy` holds it) as ProxySettings,
 * so the composition root passes `proxy: proxySettingsFromConfig(config.proxy)` to each client.
 */
export function proxySettingsFromConfig(
  section: { https_proxy?: string; http_proxy?: string; no_proxy?: string } | undefined,
): ProxySettings {
  const out: ProxySettings = {};
  if (section?.https_proxy) out.httpsProxy = section.https_proxy;
  if (section?.http_proxy) out.httpProxy = section.http_proxy;
  if (section?.no_proxy) out.noProxy = section.no_proxy;
  return out;
}

/** A parsed proxy: where to connect and how to authenticate; `label` is safe to print. */
export interface ProxyEndpoint {
  protocol: 'http:' | 'https:';
  hostname: string;
  host: string;
  port: string;
  /** `host:port` of the proxy, without credentials: what errors name. */
  label: string;
  authorization?: string;
}

const MAX_CONNECT_RESPONSE_BYTES = 16 * 1024;

function defaultPort(protocol: string): string {
  return protocol === 'https:' ? '443' : '80';
}

/**
 * Parses a proxy URL as the environment writes it (`http://user:pw@proxy:3128`, or `proxy:3128`
 * meaning http). Throws OUTBOUND_INVALID_URL naming the setting, never the value.
 */
export function parseProxyUrl(text: string, setting: string): ProxyEndpoint {
  const raw = text.trim();
  let url: URL;
  try {
    url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`);
  } catch {
    throw NetErrors.OUTBOUND_INVALID_URL(`${setting} is not a valid proxy URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw NetErrors.OUTBOUND_INVALID_URL(
      `${setting} uses scheme ${JSON.stringify(url.protocol)}; only http and https proxies are supported`,
    );
  }
  const port = url.port || defaultPort(url.protocol);
  const endpoint: ProxyEndpoint = {
    protocol: url.protocol,
    hostname: bareHost(url.hostname),
    host: url.host,
    port,
    label: `${url.hostname}:${port}`,
  };
  if (url.username !== '' || url.password !== '') {
    const user = decodeURIComponent(url.username);
    const pass = decodeURIComponent(url.password);
    endpoint.authorization = `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
  }
  return endpoint;
}

interface NoProxyEntry {
  /** A name (matching itself and its subdomains), or an address/CIDR when `range` is set. */
  host: string;
  port?: string;
  range?: [NonNullable<ReturnType<typeof parseAddress>>, number];
}

function parseNoProxy(text: string | undefined): { all: boolean; entries: NoProxyEntry[] } {
  const entries: NoProxyEntry[] = [];
  let all = false;
  for (const token of (text ?? '').split(/[\s,]+/)) {
    let t = token.trim().toLowerCase();
    if (t === '') continue;
    if (t === '*') {
      all = true;
      continue;
    }
    if (t.startsWith('*')) t = t.slice(1);
    if (t.startsWith('.')) t = t.slice(1);
    if (t.includes('/')) {
      const [ip, bits] = t.split('/');
      const addr = parseAddress(bareHost(ip ?? ''));
      const n = Number(bits);
      if (addr !== undefined && Number.isInteger(n) && n >= 0) {
        const v4mapped = ip?.includes(':') === true && addr.kind() === 'ipv4';
        entries.push({ host: t, range: [addr, v4mapped ? Math.max(0, n - 96) : n] });
      }
      continue;
    }
    let port: string | undefined;
    const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(t);
    if (bracketed) {
      t = bracketed[1] as string;
      port = bracketed[2];
    } else if (/^[^:]+:\d+$/.test(t)) {
      const at = t.lastIndexOf(':');
      port = t.slice(at + 1);
      t = t.slice(0, at);
    }
    const addr = parseAddress(t);
    if (addr !== undefined) {
      entries.push({
        host: addr.toString(),
        ...(port ? { port } : {}),
        range: [addr, addr.kind() === 'ipv4' ? 32 : 128],
      });
    } else if (t !== '') {
      entries.push({ host: bareHost(t), ...(port ? { port } : {}) });
    }
  }
  return { all, entries };
}

export interface ProxyRouter {
  /** The proxy a request to this URL goes through, or undefined for a direct connection. */
  forTarget(url: URL): ProxyEndpoint | undefined;
}

/** Compiles proxy settings; throws OUTBOUND_INVALID_URL for a malformed proxy URL. */
export function createProxyRouter(settings: ProxySettings): ProxyRouter {
  const http = settings.httpProxy?.trim()
    ? parseProxyUrl(settings.httpProxy, 'proxy.http_proxy')
    : undefined;
  const https = settings.httpsProxy?.trim()
    ? parseProxyUrl(settings.httpsProxy, 'proxy.https_proxy')
    : http;
  const noProxy = parseNoProxy(settings.noProxy);

  function bypass(url: URL): boolean {
    if (noProxy.all) return true;
    const host = bareHost(url.hostname);
    const port = url.port || defaultPort(url.protocol);
    const addr = parseAddress(host);
    return noProxy.entries.some((e) => {
      if (e.port !== undefined && e.port !== port) return false;
      if (e.range !== undefined) {
        const [net, bits] = e.range;
        return addr !== undefined && addr.kind() === net.kind() && addr.match(net, bits);
      }
      return host === e.host || host.endsWith(`.${e.host}`);
    });
  }

  return {
    forTarget(url) {
      const proxy = url.protocol === 'https:' ? https : http;
      if (proxy === undefined || bypass(url)) return undefined;
      return proxy;
    },
  };
}

/** `host:port` for a CONNECT request line: IPv6 addresses in brackets. */
function authority(hostname: string, port: string): string {
  const host = bareHost(hostname);
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * A connector that reaches the target through a CONNECT tunnel. It asks the proxy for
 * `options.hostname` — the address the outbound guard checked when the guard wraps this
 * connector — and then runs TLS inside the tunnel for https targets, with `options.servername`
 * (the original name) for SNI and the certificate. `base` opens the socket to the proxy.
 */
export function tunnelConnector(
  proxy: ProxyEndpoint,
  base: Connector,
  timeoutMs: number,
): Connector {
  return (options, callback) => {
    const port = options.port || defaultPort(options.protocol);
    const target = authority(options.hostname, port);
    // The name the caller asked for (not the dialled address), for messages.
    const shown = options.host ?? target;
    const fail = (err: Error) => callback(err, null);

    base(
      { hostname: proxy.hostname, host: proxy.host, protocol: proxy.protocol, port: proxy.port },
      (err, socket) => {
        if (err !== null || socket === null) {
          fail(
            NetErrors.OUTBOUND_UNAVAILABLE(
              `the proxy ${proxy.label} could not be reached for ${shown} (${(err as { code?: string } | null)?.code ?? 'network error'})`,
              { cause: err },
            ),
          );
          return;
        }
        let received = Buffer.alloc(0);
        let settled = false;
        const done = (error: Error | undefined) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          socket.off('data', onData);
          socket.off('error', onError);
          socket.off('close', onClose);
          if (error) {
            socket.on('error', () => {});
            socket.destroy();
            fail(error);
          }
        };
        const timer = setTimeout(
          () =>
            done(
              NetErrors.OUTBOUND_TIMEOUT(
                `the proxy ${proxy.label} did not open a tunnel to ${shown} in time`,
              ),
            ),
          timeoutMs,
        );
        const onError = (e: Error) =>
          done(
            NetErrors.OUTBOUND_UNAVAILABLE(
              `the proxy ${proxy.label} failed while opening a tunnel to ${shown}`,
              { cause: e },
            ),
          );
        const onClose = () =>
          done(
            NetErrors.OUTBOUND_UNAVAILABLE(
              `the proxy ${proxy.label} closed the connection before opening a tunnel to ${shown}`,
            ),
          );
        const onData = (chunk: Buffer) => {
          received = Buffer.concat([received, chunk]);
          const end = received.indexOf('\r\n\r\n');
          if (end < 0) {
            if (received.length > MAX_CONNECT_RESPONSE_BYTES) {
              done(
                NetErrors.OUTBOUND_UNAVAILABLE(
                  `the proxy ${proxy.label} sent an oversized answer to CONNECT`,
                ),
              );
            }
            return;
          }
          const statusLine = received.subarray(0, received.indexOf('\r\n')).toString('latin1');
          const status = Number(/^HTTP\/1\.[01] (\d{3})\b/.exec(statusLine)?.[1] ?? Number.NaN);
          if (!(status >= 200 && status < 300)) {
            const why = Number.isNaN(status) ? 'a malformed answer' : `status ${status}`;
            const message = `the proxy ${proxy.label} refused a tunnel to ${shown} (${why})`;
            done(
              status >= 400 && status < 500
                ? NetErrors.OUTBOUND_TARGET_REFUSED(
                    status === 407
                      ? `${message}; put the proxy credentials in the proxy URL`
                      : message,
                  )
                : NetErrors.OUTBOUND_UNAVAILABLE(message),
            );
            return;
          }
          done(undefined);
          socket.pause();
          const rest = received.subarray(end + 4);
          if (rest.length > 0) socket.unshift(rest);
          if (options.protocol !== 'https:') {
            callback(null, socket);
            return;
          }
          base({ ...options, httpSocket: socket as Socket }, callback);
        };
        socket.on('data', onData);
        socket.on('error', onError);
        socket.on('close', onClose);
        const auth = proxy.authorization ? `Proxy-Authorization: ${proxy.authorization}\r\n` : '';
        socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth}\r\n`);
      },
    );
  };
}
