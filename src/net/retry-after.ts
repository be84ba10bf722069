/** Longest wait a server may ask for that we still report; longer values are treated as this. */
const MAX_RETRY_AFTER_SECONDS = 24 * 60 * 60;

/**
 * Parses a `Retry-After` header value (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.
 * Returns whole-or-fractional seconds from `now` (never negative), or undefined when the value is
 * absent or malformed, so a garbled header never turns into "retry immediately forever".
 */
export function parseRetryAfter(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (text === '') return undefined;
  if (/^\d+$/.test(text)) return Math.min(Number(text), MAX_RETRY_AFTER_SECONDS);
  // Only date forms: a bare number with a sign or fraction is malformed, not a date.
  if (!/[a-z]/i.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.min(Math.max(0, (at - now) / 1000), MAX_RETRY_AFTER_SECONDS);
}
