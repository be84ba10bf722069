import type { Readable } from 'node:stream';
import type { Agent } from 'undici';
import {
  type Clock,
  isError,
  isTouchstoneError,
  onDemand,
  systemClock,
  type TouchstoneError,
} from '../core/index.js';
import type { Connector } from './connector.js';
import { NetErrors } from './error-codes.js';
import {
  createProxyRouter,
  type ProxyEndpoint,
  type ProxySettings,
  tunnelConnector,
} from './proxy.js';
import { parseRetryAfter } from './retry-after.js';

export type { Connector } from './connector.js';

export type HttpMethod = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS';

export interface HttpRequest {
  method: HttpMethod;
  /** Absolute http(s) URL. Userinfo (`user:pass@`) is refused: secrets belong in headers. */
  url: string | URL;
  headers?: Readonly<Record<string, string>>;
  body?: string | Uint8Array;
  /** Deadline for the whole exchange: connect, headers and body. Defaults to the client's. */
  timeoutMs?: number;
  /** Largest body accepted; a longer answer is aborted. Defaults to the client's. */
  maxResponseBytes?: number;
  /** Caller cancellation: the request stops and `signal.reason` is thrown as is. */
  signal?: AbortSignal;
  /** Redirects to follow for this request; defaults to the client's `maxRedirects`. */
  maxRedirects?: number;
}

export interface HttpResponse {
  status: number;
  /** Lower-case names; repeated headers joined with `, `. */
  headers: Record<string, string>;
  body: Buffer;
  /** From `Retry-After` (seconds or HTTP-date), when present and well formed. */
  retryAfterSeconds?: number;
  /** The URL that answered: the request's, or the last hop's when redirects were followed. */
  url?: string;
}

export interface HttpClient {
  /**
   * Sends one request. Redirects are not followed unless `maxRedirects` (client or request) is
   * above 0: by default a 3xx is returned as is. Non-2xx statuses are answers, not errors; errors
   * are `OUTBOUND_*` TouchstoneErrors, or the caller's abort reason.
   */
  request(request: HttpRequest): Promise<HttpResponse>;
  /** Closes pooled connections. Safe to call twice. */
  close(): Promise<void>;
}

export interface HttpClientOptions {
  /** Time allowed to open a connection (TCP + TLS). Default 10 s. */
  connectTimeoutMs?: number;
  /** Default deadline for a whole request. Default 30 s. */
  timeoutMs?: number;
  /** Default response size cap. Default 10 MiB. */
  maxResponseBytes?: number;
  /** Sent unless the request sets its own. */
  userAgent?: string;
  /**
   * Seam for the outbound rules (scheme, allow-list, SSRF). Called before every request with
   * the parsed URL, inside the request's deadline (`signal` aborts on timeout or cancellation);
   * throwing refuses it. A TouchstoneError passes through unchanged; any other error becomes
   * OUTBOUND_TARGET_REFUSED.
   */
  checkTarget?: (url: URL, signal: AbortSignal) => Promise<void>;
  /**
   * Seam for the dial: receives the default connector (connect timeout and TLS set up) and
   * returns the one the pool uses. The SSRF guard resolves the host here, checks every address
   * and calls `base` with the checked IP as `hostname` and the original name as `servername`,
   * so the address checked is the address dialled.
   */
  wrapConnector?: (base: Connector) => Connector;
  /**
   * Redirects followed per request (default 0: a 3xx is returned as is). Each hop's `Location` is
   * resolved against the URL that answered, must be http(s) without userinfo, runs `checkTarget`
   * and is dialled through the same wrapped connector, all inside the request's one deadline; a
   * refused hop throws OUTBOUND_TARGET_REFUSED naming both hosts, and running out of hops throws
   * OUTBOUND_TOO_MANY_REDIRECTS. 303 (and 301/302 after a POST) continue as GET without the body;
   * 307/308 keep method and body. A hop to another origin (scheme, host or port) carries only
   * `accept`, `accept-language`, `content-language`, `content-type` and `user-agent`: the
   * Authorization header, API-key headers, cookies and signatures stay with the origin they were
   * meant for.
   */
  maxRedirects?: number;
  /**
   * Environment proxy (HTTPS_PROXY / HTTP_PROXY / NO_PROXY, handed in by the composition root).
   * A proxied request is still checked by `checkTarget` and the wrapped connector, which resolves
   * the name and checks every address first; the proxy is then asked for a CONNECT tunnel to the
   * checked address, so the proxy never resolves the name itself. The proxy's own address is not
   * subject to the outbound rules: it is operator configuration. See `ProxySettings`.
   */
  proxy?: ProxySettings;
  clock?: Clock;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024;

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** Headers that may follow a redirect to another origin; every other header is dropped. */
const CROSS_ORIGIN_HEADERS = new Set([
  'accept',
  'accept-language',
  'content-language',
  'content-type',
  'user-agent',
]);
/** Headers describing a request body, dropped when a redirect turns the request into a GET. */
const BODY_HEADERS = new Set([
  'content-type',
  'content-length',
  'content-encoding',
  'content-language',
  'content-location',
]);

const TIMEOUT_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
]);

function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

function isTlsFailure(code: string): boolean {
  return (
    code.startsWith('ERR_TLS_') ||
    code.startsWith('ERR_SSL_') ||
    code.startsWith('CERT_') ||
    code.startsWith('UNABLE_TO_') ||
    code === 'DEPTH_ZERO_SELF_SIGNED_CERT' ||
    code === 'SELF_SIGNED_CERT_IN_CHAIN'
  );
}

function parseTarget(url: string | URL): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (cause) {
    throw NetErrors.OUTBOUND_INVALID_URL('outbound URL is not a valid absolute URL', { cause });
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw NetErrors.OUTBOUND_INVALID_URL(
      `outbound URL scheme ${JSON.stringify(parsed.protocol)} is not http or https`,
    );
  }
  if (parsed.username !== '' || parsed.password !== '') {
    throw NetErrors.OUTBOUND_INVALID_URL(
      'outbound URL carries credentials; configure a credential reference instead',
    );
  }
  return parsed;
}

/**
 * The next hop of a redirect, or a refusal naming both hosts (never a path or query: a
 * `Location` may carry tokens). Only http(s) without userinfo may follow.
 */
function redirectTarget(location: string, from: URL, method: HttpMethod): URL {
  let next: URL;
  try {
    next = new URL(location, from);
  } catch (cause) {
    throw NetErrors.OUTBOUND_TARGET_REFUSED(
      `${method} ${from.host} redirected to a malformed location`,
      { cause },
    );
  }
  if (next.protocol !== 'http:' && next.protocol !== 'https:') {
    throw NetErrors.OUTBOUND_TARGET_REFUSED(
      `${method} ${from.host} redirected to a ${JSON.stringify(next.protocol)} URL; only http and https are followed`,
    );
  }
  if (next.username !== '' || next.password !== '') {
    throw NetErrors.OUTBOUND_TARGET_REFUSED(
      `${method} ${from.host} redirected to ${next.host} with credentials in the URL`,
    );
  }
  next.hash = '';
  return next;
}

/** A refusal of a redirect hop, said as such (the inner message names the rule and setting). */
function hopRefused(err: TouchstoneError, from: URL, to: URL): TouchstoneError {
  return NetErrors.OUTBOUND_TARGET_REFUSED(
    `redirect from ${from.host} to ${to.host} refused: ${err.message}`,
    { cause: err, details: err.details },
  );
}

function flattenHeaders(
  raw: Record<string, string | string[] | undefined>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    out[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/** Drops a response body we will not read; its abort error has no one to report to. */
function discard(body: Readable): void {
  body.on('error', () => {});
  body.destroy();
}

/**
 * undici (5–6 MB of heap once loaded), loaded at the first request: a process or worker thread
 * that never calls out (the completion thread, a replica without sources or judges) never loads it.
 */
const loadUndici = onDemand(() => import('undici'));

/** Builds the product's one outbound HTTP client, on undici Agents it owns, made at first use. */
export function createHttpClient(options: HttpClientOptions = {}): HttpClient {
  const clock = options.clock ?? systemClock;
  const defaultTimeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const defaultMaxBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const defaultMaxRedirects = options.maxRedirects ?? 0;
  const userAgent = options.userAgent ?? 'touchstone';
  const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const wrap = (c: Connector) => (options.wrapConnector ? options.wrapConnector(c) : c);
  const router = options.proxy ? createProxyRouter(options.proxy) : undefined;
  /**
   * The direct Agent, and one per proxy in use (the guard wraps the tunnel, so it checks before
   * the proxy is asked).
   */
  const agents = new Map<ProxyEndpoint | undefined, Promise<Agent>>();
  let closing: Promise<void> | undefined;

  function dispatcherFor(url: URL): Promise<Agent> {
    if (closing !== undefined) throw NetErrors.OUTBOUND_UNAVAILABLE('the HTTP client is closed');
    const proxy = router?.forTarget(url);
    let agent = agents.get(proxy);
    if (agent === undefined) {
      agent = loadUndici().then(({ Agent, buildConnector }) => {
        const base = buildConnector({ timeout: connectTimeoutMs });
        return new Agent({
          connect: wrap(
            proxy === undefined ? base : tunnelConnector(proxy, base, connectTimeoutMs),
          ),
        });
      });
      agents.set(proxy, agent);
    }
    return agent;
  }

  function mapFailure(err: unknown, target: URL, method: HttpMethod): TouchstoneError {
    if (isTouchstoneError(err)) return err;
    const where = `${method} ${target.host}`;
    const code = errorCode(err);
    if (code !== undefined && TIMEOUT_CODES.has(code)) {
      return NetErrors.OUTBOUND_TIMEOUT(`${where} timed out (${code})`, { cause: err });
    }
    if (code === 'UND_ERR_INVALID_ARG') {
      return NetErrors.OUTBOUND_INVALID_REQUEST(`${where} could not be sent: invalid request`, {
        cause: err,
      });
    }
    if (code !== undefined && isTlsFailure(code)) {
      return NetErrors.OUTBOUND_TLS_FAILED(`${where} failed TLS verification (${code})`, {
        cause: err,
      });
    }
    return NetErrors.OUTBOUND_UNAVAILABLE(`${where} failed (${code ?? 'network error'})`, {
      cause: err,
    });
  }

  async function request(req: HttpRequest): Promise<HttpResponse> {
    if (closing !== undefined) throw NetErrors.OUTBOUND_UNAVAILABLE('the HTTP client is closed');
    let target = parseTarget(req.url);
    let method = req.method;
    let body = req.body ?? null;
    /** The URL that redirected to `target`, while following a redirect. */
    let from: URL | undefined;
    const timeoutMs = req.timeoutMs ?? defaultTimeoutMs;
    const maxBytes = req.maxResponseBytes ?? defaultMaxBytes;
    const maxRedirects = req.maxRedirects ?? defaultMaxRedirects;
    const callerSignal = req.signal;
    callerSignal?.throwIfAborted();

    // One deadline for the whole exchange (every hop); undici's per-phase timeouts are a backstop.
    const deadline = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      deadline.abort(NetErrors.OUTBOUND_TIMEOUT(`${method} ${target.host} timed out`));
    }, timeoutMs);
    const onCallerAbort = () => deadline.abort(callerSignal?.reason);
    callerSignal?.addEventListener('abort', onCallerAbort, { once: true });

    const headers: Record<string, string> = { 'user-agent': userAgent };
    for (const [name, value] of Object.entries(req.headers ?? {})) {
      headers[name.toLowerCase()] = value;
    }

    try {
      for (let hop = 0; ; hop++) {
        if (options.checkTarget) {
          try {
            await options.checkTarget(target, deadline.signal);
          } catch (err) {
            if (deadline.signal.aborted) throw err;
            const refusal = isTouchstoneError(err)
              ? err
              : NetErrors.OUTBOUND_TARGET_REFUSED(
                  `${method} ${target.host} refused by outbound rules`,
                  { cause: err },
                );
            throw from !== undefined && refusal.code === NetErrors.OUTBOUND_TARGET_REFUSED.code
              ? hopRefused(refusal, from, target)
              : refusal;
          }
        }
        let res: Awaited<ReturnType<Agent['request']>>;
        try {
          res = await (await dispatcherFor(target)).request({
            origin: target.origin,
            path: `${target.pathname}${target.search}`,
            method,
            headers,
            body,
            signal: deadline.signal,
            headersTimeout: timeoutMs,
            bodyTimeout: timeoutMs,
          });
        } catch (err) {
          // The connector refuses a name that resolves to an internal address; say it was a hop.
          if (
            from !== undefined &&
            isError(err, NetErrors.OUTBOUND_TARGET_REFUSED) &&
            !deadline.signal.aborted
          ) {
            throw hopRefused(err, from, target);
          }
          throw err;
        }
        const responseHeaders = flattenHeaders(res.headers);
        const location = responseHeaders.location;
        if (maxRedirects > 0 && REDIRECT_STATUSES.has(res.statusCode) && location) {
          discard(res.body);
          if (hop >= maxRedirects) {
            throw NetErrors.OUTBOUND_TOO_MANY_REDIRECTS(
              `${req.method} ${parseTarget(req.url).host} redirected more than ${maxRedirects} times`,
            );
          }
          const next = redirectTarget(location, target, method);
          const toGet =
            res.statusCode === 303
              ? method !== 'GET' && method !== 'HEAD'
              : (res.statusCode === 301 || res.statusCode === 302) && method === 'POST';
          if (toGet) {
            method = 'GET';
            body = null;
            for (const name of Object.keys(headers)) {
              if (BODY_HEADERS.has(name)) delete headers[name];
            }
          }
          if (next.origin !== target.origin) {
            for (const name of Object.keys(headers)) {
              if (!CROSS_ORIGIN_HEADERS.has(name)) delete headers[name];
            }
          }
          from = target;
          target = next;
          continue;
        }
        const declared = Number(responseHeaders['content-length']);
        if (Number.isFinite(declared) && declared > maxBytes) {
          discard(res.body);
          throw NetErrors.OUTBOUND_RESPONSE_TOO_LARGE(
            `${method} ${target.host} answered ${declared} bytes, over the ${maxBytes}-byte cap`,
          );
        }
        const chunks: Buffer[] = [];
        let received = 0;
        for await (const chunk of res.body) {
          const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
          received += buf.length;
          if (received > maxBytes) {
            discard(res.body);
            throw NetErrors.OUTBOUND_RESPONSE_TOO_LARGE(
              `${method} ${target.host} answered more than the ${maxBytes}-byte cap`,
            );
          }
          chunks.push(buf);
        }
        const response: HttpResponse = {
          status: res.statusCode,
          headers: responseHeaders,
          body: Buffer.concat(chunks, received),
          url: target.href,
        };
        const retryAfter = parseRetryAfter(responseHeaders['retry-after'], clock.now());
        if (retryAfter !== undefined) response.retryAfterSeconds = retryAfter;
        return response;
      }
    } catch (err) {
      if (callerSignal?.aborted) throw callerSignal.reason;
      if (timedOut) {
        throw NetErrors.OUTBOUND_TIMEOUT(
          `${method} ${target.host} timed out after ${timeoutMs} ms`,
          {
            cause: err,
          },
        );
      }
      throw mapFailure(err, target, method);
    } finally {
      clearTimeout(timer);
      callerSignal?.removeEventListener('abort', onCallerAbort);
    }
  }

  return {
    request,
    close() {
      closing ??= Promise.all([...agents.values()].map(async (a) => (await a).close())).then(
        () => undefined,
      );
      return closing;
    },
  };
}
