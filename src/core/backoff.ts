/**
 * Retry delays with "full jitter" (AWS Architecture Blog, "Exponential Backoff and Jitter"): a
 * uniform draw below an exponentially growing ceiling, so retries of many rows that failed
 * together spread over the whole window instead of arriving in waves. A server's Retry-After is a
 * floor: never earlier than it asked, and a `Retry-After: 0` cannot make a hot loop.
 */

export interface BackoffPolicy {
  /** Ceiling of the first retry; it doubles per attempt. */
  baseMs: number;
  /** Ceiling no attempt exceeds. */
  maxMs: number;
}

/**
 * Milliseconds to wait before retry number `attempt` (1 = the first retry), at least
 * `retryAfterSeconds` when the server sent one. `random` is in [0, 1) (injectable for tests).
 */
export function backoffMs(
  attempt: number,
  policy: BackoffPolicy,
  retryAfterSeconds?: number,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, attempt - 1));
  const jittered = Math.floor(random() * ceiling);
  return retryAfterSeconds === undefined
    ? jittered
    : Math.max(Math.ceil(retryAfterSeconds * 1000), jittered);
}
