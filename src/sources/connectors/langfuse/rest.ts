import type { TouchstoneError } from '../../../core/index.js';
import { type HttpClient, isRetryableStatus } from '../../../net/index.js';
import { isRecord, mediaTypeOf, type RestCall, restEndpoint } from '../json-rest.js';
import { LangfuseErrors } from './error-codes.js';

/**
 * The Langfuse public API transport: one place that builds requests (base URL with any path
 * prefix, HTTP Basic auth from the `<public key>:<secret key>` credential, JSON bodies), reads
 * answers and turns statuses into the connector's errors. Callers that give a status its own
 * meaning (404 on the v2 observations route) read the `LangfuseAnswer` instead of `expectOk`.
 */

export interface LangfuseCall extends RestCall {
  /** Health is the one route without auth. */
  anonymous?: boolean;
}

export interface LangfuseAnswer {
  status: number;
  /** Lower-case media type without parameters, '' when absent. */
  mediaType: string;
  /** The parsed body when it is JSON, else undefined. */
  json: unknown;
  /** Langfuse's machine-readable `code` or error class name, when the body has one. */
  errorCode?: string;
  retryAfterSeconds?: number;
  /** Set when the body should be JSON but does not parse. */
  parseError?: boolean;
}

export interface LangfuseRestOptions {
  endpoint: string;
  http: HttpClient;
  /** `<public key>:<secret key>`, read for every request (a rotated credential applies at once). */
  credential?: () => string | undefined;
}

export interface LangfuseRest {
  /** The host the messages name. */
  readonly host: string;
  send(call: LangfuseCall): Promise<LangfuseAnswer>;
  /** `send`, then throws unless the answer is a 2xx JSON object; returns that object. */
  expectOk(call: LangfuseCall): Promise<Record<string, unknown>>;
  /** The error for an answer that is not a usable 2xx JSON object. */
  failure(answer: LangfuseAnswer, what: string): TouchstoneError;
}

function mayBeJson(mediaType: string): boolean {
  return mediaType === '' || mediaType.endsWith('/json') || mediaType.endsWith('+json');
}

/** An identifier-like error code from an error body (`rate_limited`, `LangfuseNotFoundError`). */
const CODE = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

function errorCodeOf(json: unknown): string | undefined {
  if (!isRecord(json)) return undefined;
  for (const key of ['code', 'error']) {
    const v = json[key];
    if (typeof v === 'string' && CODE.test(v)) return v;
  }
  return undefined;
}

/**
 * The Basic authorization header of a `<public key>:<secret key>` credential. Throws (without
 * the value) when it is missing or not written that way.
 */
export function basicAuthorization(credential: string | undefined): string {
  const text = credential?.trim() ?? '';
  if (text === '') {
    throw LangfuseErrors.LANGFUSE_ACCESS_DENIED(
      'the Langfuse source has no credential; set spec.credentials to a value `<public key>:<secret key>`',
    );
  }
  const colon = text.indexOf(':');
  if (colon <= 0 || colon === text.length - 1) {
    throw LangfuseErrors.LANGFUSE_ACCESS_DENIED(
      'the Langfuse credential is not written `<public key>:<secret key>` (one value, the two keys joined by a colon)',
    );
  }
  return `Basic ${Buffer.from(text, 'utf8').toString('base64')}`;
}

export function createLangfuseRest(options: LangfuseRestOptions): LangfuseRest {
  const endpoint = restEndpoint('Langfuse', options.endpoint, options.http, (m) =>
    LangfuseErrors.LANGFUSE_REQUEST_REFUSED(m),
  );
  const host = endpoint.host;

  async function send(call: LangfuseCall): Promise<LangfuseAnswer> {
    const res = await endpoint.request(
      call,
      call.anonymous === true ? {} : { authorization: basicAuthorization(options.credential?.()) },
    );
    const mediaType = mediaTypeOf(res);
    const answer: LangfuseAnswer = { status: res.status, mediaType, json: undefined };
    if (res.retryAfterSeconds !== undefined) answer.retryAfterSeconds = res.retryAfterSeconds;
    if (mayBeJson(mediaType) && res.body.length > 0) {
      try {
        answer.json = JSON.parse(res.body.toString('utf8'));
      } catch {
        answer.parseError = true;
      }
    }
    if (res.status >= 400) {
      const code = errorCodeOf(answer.json);
      if (code !== undefined) answer.errorCode = code;
    }
    return answer;
  }

  function failure(answer: LangfuseAnswer, what: string): TouchstoneError {
    const where = `Langfuse at ${host} (${what})`;
    const code = answer.errorCode === undefined ? '' : ` ${answer.errorCode}`;
    const retry =
      answer.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: answer.retryAfterSeconds };
    const s = answer.status;
    if (s === 429) {
      return LangfuseErrors.LANGFUSE_RATE_LIMITED(`${where} answered 429${code}`, retry);
    }
    // 422 is Langfuse's answer when a ClickHouse query hits its resource limits ("Request timed out").
    if (isRetryableStatus(s) || s === 422) {
      return LangfuseErrors.LANGFUSE_UNAVAILABLE(`${where} answered ${s}${code}`, retry);
    }
    if (s === 401 || s === 403) {
      return LangfuseErrors.LANGFUSE_ACCESS_DENIED(
        `${where} answered ${s}${code}: the API keys were refused (use the project's public and secret key)`,
      );
    }
    if (s >= 300 && s < 400) {
      return LangfuseErrors.LANGFUSE_BAD_RESPONSE(
        `${where} answered a ${s} redirect; configure the final URL as the endpoint`,
      );
    }
    if (s >= 400) {
      const page =
        answer.errorCode === undefined && answer.mediaType !== '' ? ` (${answer.mediaType})` : '';
      return LangfuseErrors.LANGFUSE_REQUEST_REFUSED(`${where} answered ${s}${code}${page}`);
    }
    if (!mayBeJson(answer.mediaType)) {
      return LangfuseErrors.LANGFUSE_BAD_RESPONSE(
        `${where} answered ${answer.mediaType} instead of JSON; is the endpoint the Langfuse base URL?`,
      );
    }
    if (answer.parseError === true) {
      return LangfuseErrors.LANGFUSE_BAD_RESPONSE(`${where} answered invalid JSON`);
    }
    return LangfuseErrors.LANGFUSE_BAD_RESPONSE(`${where} answered JSON of an unexpected shape`);
  }

  async function expectOk(call: LangfuseCall): Promise<Record<string, unknown>> {
    const answer = await send(call);
    if (answer.status >= 200 && answer.status < 300 && isRecord(answer.json)) return answer.json;
    throw failure(answer, call.what);
  }

  return { host, send, expectOk, failure };
}
