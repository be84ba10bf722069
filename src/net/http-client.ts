import type { Readable } from 'node:stream';
import { Agent, buildConnector } from 'undici';
import { type Clock, isTouchstoneError, systemClock, type TouchstoneError } from '../core/index.js';
import { NetErrors } from './error-codes.js';
import { parseRetryAfter } from './retry-after.js';

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
}

export interface HttpResponse {
  status: number;
  /** Lower-case names; repeated headers joined with `, `. */
  headers: Record<string, string>;
  body: Buffer;
  /** From `Retry-After` (seconds or HTTP-date), when present and well formed. */
  retryAfterSeconds?: number;
}

export interface HttpClient {
  /**
   * Sends one request. Redirects are never followed (a 3xx is returned as is, so the caller
   * decides and the target checks run again). Non-2xx statuses are answers, not errors; errors
   * are `OUTBOUND_*` TouchstoneErrors, or the caller's abort reason.
   */
  request(request: HttpRequest): Promise<HttpResponse>;
  /** Closes pooled connections. Safe to call twice. */
  close(): Promise<void>;
}

/** Opens the socket for an origin; undici's connector shape. */
export type Connector = buildConnector.connector;

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
  clock?: Clock;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024;

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

/** Builds the product's one outbound HTTP client, on an undici Agent it owns. */
export function createHttpClient(options: HttpClientOptions = {}): HttpClient {
  const clock = options.clock ?? systemClock;
  const defaultTimeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const defaultMaxBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const userAgent = options.userAgent ?? 'touchstone';
  const base = buildConnector({ timeout: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS });
  const agent = new Agent({ connect: options.wrapConnector ? options.wrapConnector(base) : base });
  let closing: Promise<void> | undefined;

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
    const target = parseTarget(req.url);
    const method = req.method;
    const timeoutMs = req.timeoutMs ?? defaultTimeoutMs;
    const maxBytes = req.maxResponseBytes ?? defaultMaxBytes;
    const callerSignal = req.signal;
    callerSignal?.throwIfAborted();

    // One deadline for the whole exchange; undici's per-phase timeouts are only a backstop.
    const deadline = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      deadline.abort(NetErrors.OUTBOUND_TIMEOUT(`${method} ${target.host} timed out`));
    }, timeoutMs);
    const onCallerAbort = () => deadline.abort(callerSignal?.reason);
    callerSignal?.addEventListener('abort', onCallerAbort, { once: true });

    try {
      if (options.checkTarget) {
        try {
          await options.checkTarget(target, deadline.signal);
        } catch (err) {
          if (isTouchstoneError(err) || deadline.signal.aborted) throw err;
          throw NetErrors.OUTBOUND_TARGET_REFUSED(
            `${method} ${target.host} refused by outbound rules`,
            {
              cause: err,
            },
          );
        }
      }
      const headers: Record<string, string> = { 'user-agent': userAgent };
      for (const [name, value] of Object.entries(req.headers ?? {})) {
        headers[name.toLowerCase()] = value;
      }
      const res = await agent.request({
        origin: target.origin,
        path: `${target.pathname}${target.search}`,
        method,
        headers,
        body: req.body ?? null,
        signal: deadline.signal,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      const responseHeaders = flattenHeaders(res.headers);
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
      };
      const retryAfter = parseRetryAfter(responseHeaders['retry-after'], clock.now());
      if (retryAfter !== undefined) response.retryAfterSeconds = retryAfter;
      return response;
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
      closing ??= agent.close();
      return closing;
    },
  };
}
