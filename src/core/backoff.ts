/**
 * Retry delays: a ceiling that doubles per attempt up to a cap, and a draw below it. The default
 * is "full jitter" (AWS Architecture Blog, "Exponential Backoff and Jitter"): a uniform draw below
 * the ceiling, so retries of many rows that failed together spread over the whole window instead
 * of arriving in waves. A server's Retry-After is a floor: never earlier than it asked, and a
 * `Retry-After: 0` cannot make a hot loop.
 */

export interface BackoffPolicy {
  /** Ceiling of the first retry; it doubles per attempt. */
  baseMs: number;
  /** Ceiling no attempt exceeds. */
  maxMs: number;
  /**
   * How the wait is drawn: `full` (the default) uniformly below the ceiling; `equal` uniformly in
   * its upper half (a caller retrying alone still waits at least half a step); `none` the ceiling
   * itself (a schedule the docs state, "5 s, doubling to 5 min").
   */
  jitter?: 'full' | 'equal' | 'none';
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
  const drawn = draw(ceiling, policy.jitter ?? 'full', random);
  return retryAfterSeconds === undefined
    ? drawn
    : Math.max(Math.ceil(retryAfterSeconds * 1000), drawn);
}

function draw(ceiling: number, jitter: 'full' | 'equal' | 'none', random: () => number): number {
  switch (jitter) {
    case 'full':
      return Math.floor(random() * ceiling);
    case 'equal':
      return ceiling / 2 + random() * (ceiling / 2);
    case 'none':
      return ceiling;
  }
}
