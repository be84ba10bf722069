import { backoffMs, type Clock, isError, isTouchstoneError } from '../../core/index.js';
import {
  createHttpClient,
  createOutboundGuard,
  type HttpClient,
  type HttpRequest,
  type HttpResponse,
  isRetryableStatus,
  NetErrors,
  type OutboundGuard,
} from '../../net/index.js';
import type { TargetDeps } from './contract.js';
import { sleep } from './deadline.js';
import { TargetErrors } from './error-codes.js';

/** The setting named when the outbound rules refuse a target's host. */
export const ALLOW_HOSTS_SETTING = 'runs.allow_hosts';

/**
 * The outbound rules of a target's URL: public https/http names always; private, loopback and
 * internal addresses only for `allowHosts`, or for the target's own host when the caller runs the
 * spec on its own machine (`allowOwnHost`). The guard still checks every redirect hop and dials
 * the address it checked, so the target's own name cannot be rebound elsewhere.
 */
export function targetGuard(url: URL, deps: TargetDeps): OutboundGuard {
  const allow = [...(deps.outbound?.allowHosts ?? [])];
  if (deps.outbound?.allowOwnHost === true) allow.push(url.hostname);
  return createOutboundGuard({
    allowHosts: allow,
    requireHttps: false,
    setting: ALLOW_HOSTS_SETTING,
  });
}

export function targetHttpClient(url: URL, deps: TargetDeps, maxBytes: number): HttpClient {
  const guard = targetGuard(url, deps);
  return createHttpClient({
    userAgent: 'touchstone-runs',
    checkTarget: guard.checkTarget,
    wrapConnector: guard.wrapConnector,
    maxResponseBytes: maxBytes,
    ...(deps.outbound?.proxy === undefined ? {} : { proxy: deps.outbound.proxy }),
    ...(deps.clock === undefined ? {} : { clock: deps.clock as Clock }),
  });
}

const MAX_BACKOFF_MS = 30_000;

/**
 * Sends with retries on 408/429/5xx and dropped connections, honouring `Retry-After` (capped at
 * 30 s), all inside `signal` (the call's deadline). Answers a 2xx response; anything else becomes
 * TARGET_REQUEST_FAILED naming the method, host and status, or TARGET_OUTPUT_TOO_LARGE.
 */
export async function sendWithRetries(
  http: HttpClient,
  request: HttpRequest,
  retries: number,
  baseDelayMs: number,
  label: string,
  signal: AbortSignal,
): Promise<HttpResponse> {
  const host = new URL(request.url).host;
  const where = `${label} (${request.method} ${host})`;
  for (let attempt = 0; ; attempt++) {
    let res: HttpResponse;
    try {
      res = await http.request({ ...request, signal });
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      if (isError(err, NetErrors.OUTBOUND_RESPONSE_TOO_LARGE)) {
        throw TargetErrors.TARGET_OUTPUT_TOO_LARGE(`${where}: ${err.message}`, { cause: err });
      }
      if (isTouchstoneError(err) && err.retryable && attempt < retries) {
        await sleep(backoff(attempt, baseDelayMs), signal);
        continue;
      }
      if (isError(err, NetErrors.OUTBOUND_TARGET_REFUSED)) throw err;
      throw TargetErrors.TARGET_REQUEST_FAILED(
        `${where} failed after ${attempt + 1} attempt${attempt === 0 ? '' : 's'}: ${err instanceof Error ? err.message : 'network error'}`,
        { cause: err },
      );
    }
    if (res.status >= 200 && res.status < 300) return res;
    if (isRetryableStatus(res.status) && attempt < retries) {
      const wait =
        res.retryAfterSeconds === undefined
          ? backoff(attempt, baseDelayMs)
          : Math.min(MAX_BACKOFF_MS, res.retryAfterSeconds * 1000);
      await sleep(wait, signal);
      continue;
    }
    throw TargetErrors.TARGET_REQUEST_FAILED(
      `${where} answered HTTP ${res.status} after ${attempt + 1} attempt${attempt === 0 ? '' : 's'}`,
      res.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: res.retryAfterSeconds },
    );
  }
}

/** Retry `attempt + 1`'s wait: equal jitter, never less than half the step. */
function backoff(attempt: number, baseDelayMs: number): number {
  return backoffMs(attempt + 1, { baseMs: baseDelayMs, maxMs: MAX_BACKOFF_MS, jitter: 'equal' });
}
