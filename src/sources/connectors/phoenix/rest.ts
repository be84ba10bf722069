import type { TouchstoneError } from '../../../core/index.js';
import { type HttpClient, isRetryableStatus } from '../../../net/index.js';
import { isRecord, mediaTypeOf, type RestCall, restEndpoint } from '../json-rest.js';
import { PhoenixErrors } from './error-codes.js';

/**
 * The Phoenix REST transport (`/v1/...`): one place that builds requests (base URL with any path
 * prefix, bearer API key, JSON bodies), reads answers, and turns statuses into the connector's
 * errors. Phoenix answers its own errors as `text/plain` (the detail message) and request
 * validation as FastAPI's JSON 422 (`{"detail": [{"loc": [...], ...}]}`); an unknown path under
 * the server answers the UI's HTML page with 200. Callers that give a status its own meaning (404
 * on a project lookup or an annotation batch) read the `PhoenixAnswer` instead of `expectOk`.
 */

export type PhoenixCall = RestCall;

export interface PhoenixAnswer {
  status: number;
  /** Lower-case media type without parameters (`application/json`), '' when absent. */
  mediaType: string;
  /** The parsed body when it is JSON, else undefined. */
  json: unknown;
  /** Body size in bytes. */
  bytes: number;
  retryAfterSeconds?: number;
  /** `x-phoenix-server-version`, when the server sent it. */
  serverVersion?: string;
  /** Set when a JSON body could not be parsed. */
  parseError?: string;
}

export interface PhoenixRestOptions {
  endpoint: string;
  http: HttpClient;
  apiKey?: () => string | undefined;
}

export interface PhoenixRest {
  /** The host the messages name. */
  readonly host: string;
  send(call: PhoenixCall): Promise<PhoenixAnswer>;
  /** `send`, then throws unless the answer is a 2xx JSON object; returns that object. */
  expectOk(call: PhoenixCall): Promise<Record<string, unknown>>;
  /** The error for an answer that is not a usable 2xx JSON object. */
  failure(answer: PhoenixAnswer, what: string): TouchstoneError;
}

function isJson(mediaType: string): boolean {
  return mediaType === '' || mediaType.endsWith('/json') || mediaType.endsWith('+json');
}

/**
 * The request fields a FastAPI 422 names (`query.limit`, `body.data.0.annotator_kind`): schema
 * names and indexes only, never the input value or Phoenix's message.
 */
function validationFields(json: unknown): string {
  if (!isRecord(json) || !Array.isArray(json.detail)) return '';
  const fields = new Set<string>();
  for (const d of json.detail) {
    if (!isRecord(d) || !Array.isArray(d.loc)) continue;
    const parts = d.loc
      .map((p) => (typeof p === 'number' ? String(p) : typeof p === 'string' ? p : ''))
      .filter((p) => /^[A-Za-z0-9_]{1,64}$/.test(p));
    if (parts.length > 0) fields.add(parts.join('.'));
    if (fields.size >= 5) break;
  }
  return fields.size === 0 ? '' : ` (request validation: ${[...fields].join(', ')})`;
}

export function createPhoenixRest(options: PhoenixRestOptions): PhoenixRest {
  const endpoint = restEndpoint('Phoenix', options.endpoint, options.http, (m) =>
    PhoenixErrors.PHOENIX_REQUEST_REFUSED(m),
  );
  const host = endpoint.host;

  async function send(call: PhoenixCall): Promise<PhoenixAnswer> {
    const key = options.apiKey?.();
    const res = await endpoint.request(
      call,
      key !== undefined && key !== '' ? { authorization: `Bearer ${key}` } : {},
    );
    const mediaType = mediaTypeOf(res);
    const answer: PhoenixAnswer = {
      status: res.status,
      mediaType,
      json: undefined,
      bytes: res.body.length,
    };
    if (res.retryAfterSeconds !== undefined) answer.retryAfterSeconds = res.retryAfterSeconds;
    const version = res.headers['x-phoenix-server-version'];
    if (version !== undefined && /^[0-9A-Za-z.+-]{1,40}$/.test(version)) {
      answer.serverVersion = version;
    }
    if (isJson(mediaType) && res.body.length > 0) {
      try {
        answer.json = JSON.parse(res.body.toString('utf8'));
      } catch (err) {
        // V8's message may quote the body: keep only the position.
        const at = /position (\d+)/.exec(err instanceof Error ? err.message : '')?.[1];
        answer.parseError = at === undefined ? 'invalid JSON' : `invalid JSON (at position ${at})`;
      }
    }
    return answer;
  }

  function failure(answer: PhoenixAnswer, what: string): TouchstoneError {
    const where = `Phoenix at ${host} (${what})`;
    const retry =
      answer.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: answer.retryAfterSeconds };
    const s = answer.status;
    if (s === 429) {
      return PhoenixErrors.PHOENIX_RATE_LIMITED(`${where} answered 429 Too Many Requests`, retry);
    }
    if (isRetryableStatus(s)) {
      return PhoenixErrors.PHOENIX_UNAVAILABLE(`${where} answered ${s}`, retry);
    }
    if (s === 401 || s === 403) {
      return PhoenixErrors.PHOENIX_ACCESS_DENIED(
        `${where} answered ${s}: the API key was refused${s === 401 ? ' (missing, unknown, expired or revoked)' : ' (not allowed to do this)'}`,
      );
    }
    if (s >= 300 && s < 400) {
      return PhoenixErrors.PHOENIX_BAD_RESPONSE(
        `${where} answered a ${s} redirect; configure the final URL as the endpoint`,
      );
    }
    if (s >= 400) {
      const page =
        isJson(answer.mediaType) || answer.mediaType === 'text/plain' ? '' : answer.mediaType;
      return PhoenixErrors.PHOENIX_REQUEST_REFUSED(
        `${where} answered ${s}${validationFields(answer.json)}${page === '' ? '' : ` (${page})`}`,
      );
    }
    if (!isJson(answer.mediaType)) {
      return PhoenixErrors.PHOENIX_BAD_RESPONSE(
        `${where} answered ${answer.mediaType} instead of JSON; is the endpoint the Phoenix server's base URL?`,
      );
    }
    if (answer.parseError !== undefined) {
      return PhoenixErrors.PHOENIX_BAD_RESPONSE(`${where} answered ${answer.parseError}`);
    }
    return PhoenixErrors.PHOENIX_BAD_RESPONSE(`${where} answered JSON of an unexpected shape`);
  }

  async function expectOk(call: PhoenixCall): Promise<Record<string, unknown>> {
    const answer = await send(call);
    if (answer.status >= 200 && answer.status < 300 && isRecord(answer.json)) return answer.json;
    throw failure(answer, call.what);
  }

  return { host, send, expectOk, failure };
}
