import type { TouchstoneError } from '../../../core/index.js';
import { type HttpClient, isRetryableStatus } from '../../../net/index.js';
import { isRecord, mediaTypeOf, type RestCall, restEndpoint } from '../json-rest.js';
import { bearerAuth, type MlflowAuth } from './auth.js';
import { MlflowErrors } from './error-codes.js';
import { JsonSyntaxError, parseLosslessJson } from './lossless-json.js';

/**
 * The MLflow REST transport: one place that builds requests (base URL with any path prefix,
 * bearer token, JSON bodies), reads answers with the big-int-safe parser, and turns statuses into
 * the connector's errors. Callers that give a status its own meaning (404 on a lookup, a 500 that
 * names one bad trace) read the `MlflowAnswer` instead of letting `expectOk` throw.
 */

export type MlflowCall = RestCall;

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
  /** How requests are authorized; none when absent. */
  auth?: MlflowAuth;
  /** Names the store in messages (`MLflow`, `Databricks`, `SageMaker MLflow`). */
  product?: string;
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
  const endpoint = restEndpoint('MLflow', options.endpoint, options.http, (m) =>
    MlflowErrors.MLFLOW_REQUEST_REFUSED(m),
  );
  const host = endpoint.host;
  const auth = options.auth ?? bearerAuth(() => undefined);
  const product = options.product ?? 'MLflow';

  async function request(call: MlflowCall) {
    let sent: Record<string, string> = {};
    const sign: MlflowAuth['sign'] = async (prepared) => {
      const signed = await auth.sign(prepared);
      sent = signed.headers;
      return signed;
    };
    const res = await endpoint.request(call, sign);
    if (res.status !== 401 || auth.renew === undefined) return res;
    // An exchanged token the workspace no longer takes: one fresh token, one more try.
    return (await auth.renew(sent, call.signal)) ? endpoint.request(call, auth.sign) : res;
  }

  async function send(call: MlflowCall): Promise<MlflowAnswer> {
    const res = await request(call);
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
    const where = `${product} at ${host} (${what})`;
    const code = answer.errorCode === undefined ? '' : ` ${answer.errorCode}`;
    const retry =
      answer.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: answer.retryAfterSeconds };
    const s = answer.status;
    if (s === 429) {
      return MlflowErrors.MLFLOW_RATE_LIMITED(`${where} answered 429 Too Many Requests`, retry);
    }
    if (isRetryableStatus(s)) {
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
