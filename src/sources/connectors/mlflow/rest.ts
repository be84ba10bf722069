import type { TouchstoneError } from '../../../core/index.js';
import type { HttpClient, HttpMethod, HttpResponse } from '../../../net/index.js';
import { MlflowErrors } from './error-codes.js';
import { JsonSyntaxError, parseLosslessJson } from './lossless-json.js';

/**
 * The MLflow REST transport: one place that builds requests (base URL with any path prefix,
 * bearer token, JSON bodies), reads answers with the big-int-safe parser, and turns statuses into
 * the connector's errors. Callers that give a status its own meaning (404 on a lookup, a 500 that
 * names one bad trace) read the `MlflowAnswer` instead of letting `expectOk` throw.
 */

export interface MlflowCall {
  method: HttpMethod;
  /** Path from the server root, e.g. `/api/3.0/mlflow/traces/search`. */
  path: string;
  /** Repeated keys for arrays (`trace_ids=a&trace_ids=b`), as MLflow's GET handlers read them. */
  query?: Record<string, string | readonly string[]>;
  body?: unknown;
  /** What the call does, for messages (`traces/search`). */
  what: string;
  maxResponseBytes?: number;
  signal?: AbortSignal;
}

export interface MlflowAnswer {
  status: number;
  /** Lower-case media type without parameters (`application/json`), '' when absent. */
  mediaType: string;
  /** The parsed body when it is JSON (big ints exact), else undefined. */
  json: unknown;
  /** MLflow's `error_code` from an error body (`RESOURCE_DOES_NOT_EXIST`), when present. */
  errorCode?: string;
  retryAfterSeconds?: number;
  /** Set when the body could not be parsed although it should be JSON. */
  parseError?: JsonSyntaxError;
}

export interface MlflowRestOptions {
  endpoint: string;
  http: HttpClient;
  token?: () => string | undefined;
}

export interface MlflowRest {
  /** The host the messages name. */
  readonly host: string;
  send(call: MlflowCall): Promise<MlflowAnswer>;
  /** `send`, then throws unless the answer is a 2xx JSON object; returns that object. */
  expectOk(call: MlflowCall): Promise<Record<string, unknown>>;
  /** The error for an answer that is not a usable 2xx JSON object. */
  failure(answer: MlflowAnswer, what: string): TouchstoneError;
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function mediaTypeOf(res: HttpResponse): string {
  const raw = res.headers['content-type'] ?? '';
  return raw.split(';')[0]?.trim().toLowerCase() ?? '';
}

/** JSON bodies, and the trace artifact (served as text/plain or octet-stream, JSON inside). */
function mayBeJson(mediaType: string): boolean {
  return (
    mediaType === '' ||
    mediaType.endsWith('/json') ||
    mediaType.endsWith('+json') ||
    mediaType === 'text/plain' ||
    mediaType === 'application/octet-stream'
  );
}

export function createMlflowRest(options: MlflowRestOptions): MlflowRest {
  let base: URL;
  try {
    base = new URL(options.endpoint);
  } catch {
    throw MlflowErrors.MLFLOW_REQUEST_REFUSED('the MLflow endpoint is not an absolute URL');
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') {
    throw MlflowErrors.MLFLOW_REQUEST_REFUSED('the MLflow endpoint must be an http or https URL');
  }
  // A path prefix (a server behind /mlflow) is kept; query and fragment are not.
  const prefix = base.pathname.replace(/\/+$/, '');
  const origin = base.origin;
  const host = base.host;

  function url(call: MlflowCall): string {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(call.query ?? {})) {
      if (typeof value === 'string') params.append(key, value);
      else for (const v of value) params.append(key, v);
    }
    const search = params.toString();
    return `${origin}${prefix}${call.path}${search === '' ? '' : `?${search}`}`;
  }

  async function send(call: MlflowCall): Promise<MlflowAnswer> {
    const headers: Record<string, string> = { accept: 'application/json' };
    const token = options.token?.();
    if (token !== undefined && token !== '') headers.authorization = `Bearer ${token}`;
    let body: string | undefined;
    if (call.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(call.body);
    }
    const res = await options.http.request({
      method: call.method,
      url: url(call),
      headers,
      ...(body === undefined ? {} : { body }),
      ...(call.maxResponseBytes === undefined ? {} : { maxResponseBytes: call.maxResponseBytes }),
      ...(call.signal === undefined ? {} : { signal: call.signal }),
    });
    const mediaType = mediaTypeOf(res);
    const answer: MlflowAnswer = { status: res.status, mediaType, json: undefined };
    if (res.retryAfterSeconds !== undefined) answer.retryAfterSeconds = res.retryAfterSeconds;
    if (mayBeJson(mediaType) && res.body.length > 0) {
      try {
        answer.json = parseLosslessJson(res.body.toString('utf8'));
      } catch (err) {
        if (!(err instanceof JsonSyntaxError)) throw err;
        answer.parseError = err;
      }
    }
    if (res.status >= 400 && isRecord(answer.json) && typeof answer.json.error_code === 'string') {
      answer.errorCode = answer.json.error_code;
    }
    return answer;
  }

  function failure(answer: MlflowAnswer, what: string): TouchstoneError {
    const where = `MLflow at ${host} (${what})`;
    const code = answer.errorCode === undefined ? '' : ` ${answer.errorCode}`;
    const retry =
      answer.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: answer.retryAfterSeconds };
    const s = answer.status;
    if (s === 429) {
      return MlflowErrors.MLFLOW_RATE_LIMITED(`${where} answered 429 Too Many Requests`, retry);
    }
    if (s >= 500 || s === 408) {
      return MlflowErrors.MLFLOW_UNAVAILABLE(`${where} answered ${s}${code}`, retry);
    }
    if (s === 401 || s === 403) {
      return MlflowErrors.MLFLOW_ACCESS_DENIED(`${where} answered ${s}${code}: access denied`);
    }
    if (s >= 300 && s < 400) {
      return MlflowErrors.MLFLOW_BAD_RESPONSE(
        `${where} answered a ${s} redirect; configure the final URL as the endpoint`,
      );
    }
    if (s >= 400) {
      // A 4xx that is not MLflow JSON (an HTML 404) usually means a wrong base URL or path prefix.
      const page =
        answer.errorCode === undefined && answer.mediaType !== '' ? ` (${answer.mediaType})` : '';
      return MlflowErrors.MLFLOW_REQUEST_REFUSED(`${where} answered ${s}${code}${page}`);
    }
    if (!mayBeJson(answer.mediaType)) {
      return MlflowErrors.MLFLOW_BAD_RESPONSE(
        `${where} answered ${answer.mediaType} instead of JSON; is the endpoint the MLflow server's base URL?`,
      );
    }
    if (answer.parseError !== undefined) {
      return MlflowErrors.MLFLOW_BAD_RESPONSE(`${where} answered ${answer.parseError.message}`);
    }
    return MlflowErrors.MLFLOW_BAD_RESPONSE(`${where} answered JSON of an unexpected shape`);
  }

  async function expectOk(call: MlflowCall): Promise<Record<string, unknown>> {
    const answer = await send(call);
    if (answer.status >= 200 && answer.status < 300 && isRecord(answer.json)) return answer.json;
    throw failure(answer, call.what);
  }

  return { host, send, expectOk, failure };
}
