/**
 * Whether an HTTP answer is worth sending again: 408 (request timeout), 429 (rate limited) and
 * 5xx except 501 and 505, which say the server will never do it. For callers that retry a
 * request themselves (judges, run targets); connectors classify into their store's error codes.
 */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || (status >= 500 && status !== 501 && status !== 505);
}
