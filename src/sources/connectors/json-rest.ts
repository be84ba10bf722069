import { type TouchstoneError, withoutTrailingSlashes } from '../../core/index.js';
import type { HttpClient, HttpMethod, HttpResponse } from '../../net/index.js';

/**
 * What the connectors' REST transports share: the store's base URL (any path prefix kept, query
 * and fragment dropped), query strings with repeated keys for arrays, and the JSON request itself.
 * Each connector keeps its own answer parsing (MLflow's big ints, Phoenix's FastAPI errors) and
 * its own errors.
 */

export interface RestCall {
  method: HttpMethod;
  /** Path from the server root, e.g. `/api/3.0/mlflow/traces/search`. */
  path: string;
  /** Repeated keys for arrays (`trace_ids=a&trace_ids=b`); undefined values are left out. */
  query?: Record<string, string | readonly string[] | undefined>;
  body?: unknown;
  /** What the call does, for messages (`traces/search`). */
  what: string;
  maxResponseBytes?: number;
  signal?: AbortSignal;
}

/** A request as it will be sent, for a signer that needs the exact URL and body. */
export interface PreparedRequest {
  method: HttpMethod;
  url: string;
  headers: Record<string, string>;
  body?: string;
  /** The call's cancellation, for a signer that makes requests of its own (a token exchange). */
  signal?: AbortSignal;
}

/** Gives the headers to send (and the URL, when signing re-encodes it). */
export type RequestSigner = (
  request: PreparedRequest,
) => Promise<{ headers: Record<string, string>; url?: string }>;

export interface RestEndpoint {
  /** The host the messages name. */
  readonly host: string;
  /**
   * Sends `call` as JSON with `headers` (besides accept and content-type), or with what `sign`
   * makes of the prepared request.
   */
  request(call: RestCall, headers: Record<string, string> | RequestSigner): Promise<HttpResponse>;
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Lower-case media type without parameters (`application/json`), '' when absent. */
export function mediaTypeOf(res: HttpResponse): string {
  const raw = res.headers['content-type'] ?? '';
  return raw.split(';')[0]?.trim().toLowerCase() ?? '';
}

/**
 * The endpoint of `product` (`MLflow`) at `endpoint`; a URL that is not absolute http(s) is
 * refused with the connector's own error.
 */
export function restEndpoint(
  product: string,
  endpoint: string,
  http: HttpClient,
  refused: (message: string) => TouchstoneError,
): RestEndpoint {
  let base: URL;
  try {
    base = new URL(endpoint);
  } catch {
    throw refused(`the ${product} endpoint is not an absolute URL`);
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') {
    throw refused(`the ${product} endpoint must be an http or https URL`);
  }
  const prefix = withoutTrailingSlashes(base.pathname);
  const origin = base.origin;

  function url(call: RestCall): string {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(call.query ?? {})) {
      if (value === undefined) continue;
      if (typeof value === 'string') params.append(key, value);
      else for (const v of value) params.append(key, v);
    }
    const search = params.toString();
    return `${origin}${prefix}${call.path}${search === '' ? '' : `?${search}`}`;
  }

  return {
    host: base.host,
    async request(call, extra) {
      let headers: Record<string, string> = {
        accept: 'application/json',
        ...(typeof extra === 'function' ? {} : extra),
      };
      let body: string | undefined;
      if (call.body !== undefined) {
        headers['content-type'] = 'application/json';
        body = JSON.stringify(call.body);
      }
      let target = url(call);
      if (typeof extra === 'function') {
        const signed = await extra({
          method: call.method,
          url: target,
          headers,
          ...(body === undefined ? {} : { body }),
          ...(call.signal === undefined ? {} : { signal: call.signal }),
        });
        headers = signed.headers;
        target = signed.url ?? target;
      }
      return http.request({
        method: call.method,
        url: target,
        headers,
        ...(body === undefined ? {} : { body }),
        ...(call.maxResponseBytes === undefined ? {} : { maxResponseBytes: call.maxResponseBytes }),
        ...(call.signal === undefined ? {} : { signal: call.signal }),
      });
    },
  };
}
