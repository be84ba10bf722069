import { isError } from '../../../core/index.js';
import { type HttpClient, isRetryableStatus, NetErrors } from '../../../net/index.js';
import type { FetchedTrace } from '../../connector.js';
import { isRecord } from '../json-rest.js';
import type { ArtifactReader } from './connector.js';
import { MlflowErrors } from './error-codes.js';
import { JsonSyntaxError, parseLosslessJson } from './lossless-json.js';
import { spansFromArtifact } from './spans.js';

/**
 * Spans of a trace in a Databricks experiment: the workspace hands out a signed URI of the
 * trace's `traces.json` in cloud storage (`credentials-for-data-download`), which is read with
 * only the headers the workspace returned — never the bearer token —, no redirect followed, the
 * storage host checked by the outbound rules like any other target, and the body capped.
 */

/** The largest trace artifact read (the HTTP client's own cap, stated here for the docs). */
export const MAX_ARTIFACT_BYTES = 10 * 1024 * 1024;

function downloadPath(storeId: string): string {
  return `/api/2.0/mlflow/traces/${encodeURIComponent(storeId)}/credentials-for-data-download`;
}

/** The `{name, value}` headers of a credential, as a header map; undefined when malformed. */
function headersOf(list: unknown): Record<string, string> | undefined {
  if (list === undefined) return {};
  if (!Array.isArray(list)) return undefined;
  const out: Record<string, string> = {};
  for (const h of list) {
    if (!isRecord(h) || typeof h.name !== 'string' || typeof h.value !== 'string') return undefined;
    out[h.name.toLowerCase()] = h.value;
  }
  return out;
}

export function databricksArtifacts(
  http: HttpClient,
  maxBytes = MAX_ARTIFACT_BYTES,
): ArtifactReader {
  return async (rest, header, convert, signal): Promise<FetchedTrace> => {
    const s = signal === undefined ? {} : { signal };
    const answer = await rest.send({
      method: 'GET',
      path: downloadPath(header.storeId),
      what: 'credentials-for-data-download',
      ...s,
    });
    if (answer.status === 404) {
      return {
        missing: `Databricks has no span data for this trace (${answer.errorCode ?? '404'})`,
      };
    }
    const info =
      answer.status >= 200 && answer.status < 300 && isRecord(answer.json)
        ? answer.json.credential_info
        : undefined;
    const uri = isRecord(info) ? info.signed_uri : undefined;
    const headers = isRecord(info) ? headersOf(info.headers) : undefined;
    if (typeof uri !== 'string' || headers === undefined) {
      throw rest.failure(answer, 'credentials-for-data-download');
    }
    let target: URL;
    try {
      target = new URL(uri);
    } catch {
      return { missing: 'the signed download URI Databricks gave is not a URL' };
    }
    let res: Awaited<ReturnType<HttpClient['request']>>;
    try {
      res = await http.request({
        method: 'GET',
        url: target,
        headers,
        maxRedirects: 0,
        maxResponseBytes: maxBytes,
        ...s,
      });
    } catch (err) {
      if (isError(err, NetErrors.OUTBOUND_RESPONSE_TOO_LARGE)) {
        return { missing: `the trace artifact is larger than ${maxBytes} bytes` };
      }
      if (
        isError(err, NetErrors.OUTBOUND_TARGET_REFUSED) ||
        isError(err, NetErrors.OUTBOUND_INVALID_URL)
      ) {
        return {
          missing: `the signed download URI (host ${target.host}) was refused by the outbound rules`,
        };
      }
      throw err;
    }
    const where = `cloud storage at ${target.host} (trace artifact)`;
    if (res.status === 429) {
      throw MlflowErrors.MLFLOW_RATE_LIMITED(`${where} answered 429`, {
        ...(res.retryAfterSeconds === undefined
          ? {}
          : { retryAfterSeconds: res.retryAfterSeconds }),
      });
    }
    if (isRetryableStatus(res.status)) {
      throw MlflowErrors.MLFLOW_UNAVAILABLE(`${where} answered ${res.status}`);
    }
    if (res.status >= 300 && res.status < 400) {
      return { missing: `${where} answered a ${res.status} redirect, which is not followed` };
    }
    if (res.status >= 400) return { missing: `${where} answered ${res.status}` };
    try {
      return spansFromArtifact(parseLosslessJson(res.body.toString('utf8')), header, convert);
    } catch (err) {
      if (!(err instanceof JsonSyntaxError)) throw err;
      return { missing: 'the trace artifact is not valid JSON' };
    }
  };
}
