/**
 * JSON parsing that keeps 64-bit integers exact. MLflow writes int64 fields (span times in
 * nanoseconds, OTLP `int_value`) as bare JSON numbers, and `JSON.parse` rounds anything above
 * 2^53. Integer literals outside the safe range become decimal strings (the span model's form for
 * int64 values that do not fit a number); everything else is what `JSON.parse` gives.
 *
 * One regex pass finds the string literals (skipped whole, so digits inside them are never
 * touched) and the number tokens; only unsafe integer tokens are quoted, then the native parser
 * runs. A body without such a token is parsed as is.
 */

/** A string literal, or a whole number token (fraction and exponent included). */
const TOKENS = /"[^"\\]*(?:\\.[^"\\]*)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;
/** 2^53 - 1 has 16 digits: shorter integers are always safe. */
const MIN_UNSAFE_DIGITS = 16;

function isUnsafeInteger(token: string): boolean {
  const digits = token.charCodeAt(0) === 45 ? token.length - 1 : token.length;
  if (digits < MIN_UNSAFE_DIGITS) return false;
  for (let i = 0; i < token.length; i++) {
    const c = token.charCodeAt(i);
    if (c === 46 || c === 101 || c === 69) return false; // . e E: a double, kept as a number
  }
  return !Number.isSafeInteger(Number(token));
}

/** Where a syntax error is, without quoting the text (it may hold user content). */
export class JsonSyntaxError extends Error {
  constructor(readonly position: number | undefined) {
    super(
      position === undefined ? 'invalid JSON' : `invalid JSON (near position ${String(position)})`,
    );
  }
}

/**
 * Parses JSON text with integers beyond ±(2^53 - 1) kept exact as decimal strings. Throws
 * JsonSyntaxError (with a position, never the text) on malformed input.
 */
export function parseLosslessJson(text: string): unknown {
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  let quoted = false;
  const rewritten = body.replace(TOKENS, (token) => {
    if (token.charCodeAt(0) === 34 || !isUnsafeInteger(token)) return token;
    quoted = true;
    return `"${token}"`;
  });
  try {
    return JSON.parse(quoted ? rewritten : body);
  } catch (err) {
    const message = err instanceof Error ? err.message : '';
    const at = /at position (\d+)/.exec(message)?.[1];
    // Positions in the rewritten text are near enough: only quoting shifts them.
    throw new JsonSyntaxError(at === undefined ? undefined : Number(at));
  }
}
