/**
 * JSON parsing that keeps 64-bit integers exact. MLflow writes int64 fields (span times in
 * nanoseconds, OTLP `int_value`) as bare JSON numbers, and `JSON.parse` rounds anything above
 * 2^53. Integer literals outside the safe range become decimal strings (the span model's form for
 * int64 values that do not fit a number); everything else is what `JSON.parse` gives.
 *
 * One pass over the text skips string literals whole (so digits inside them are never touched)
 * and finds the number tokens; only unsafe integer tokens are quoted, then the native parser
 * runs. A body without such a token is parsed as is. The pass is a hand-written scanner: a regex
 * for string literals retries from every quote of an unterminated one, quadratic on a hostile body.
 */
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
  const rewritten = quoteUnsafeIntegers(body);
  try {
    return JSON.parse(rewritten ?? body);
  } catch (err) {
    const message = err instanceof Error ? err.message : '';
    const at = /at position (\d+)/.exec(message)?.[1];
    // Positions in the rewritten text are near enough: only quoting shifts them.
    throw new JsonSyntaxError(at === undefined ? undefined : Number(at));
  }
}

const isDigit = (c: number) => c >= 48 && c <= 57;

/** End of the number token starting at `i` (a digit or `-`): digits, fraction and exponent. */
function numberEnd(text: string, i: number): number {
  let j = i + 1;
  while (j < text.length) {
    const c = text.charCodeAt(j);
    if (isDigit(c) || c === 46 || c === 101 || c === 69) j++;
    else if ((c === 43 || c === 45) && (text.charCodeAt(j - 1) | 32) === 101) j++;
    else break;
  }
  return j;
}

/** `text` with every unsafe integer token quoted, or undefined when it has none. */
function quoteUnsafeIntegers(text: string): string | undefined {
  let out: string[] | undefined;
  let copied = 0;
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      // A string literal: to its closing quote, escapes skipped (an unterminated one runs to the
      // end, which JSON.parse then refuses).
      i++;
      while (i < text.length) {
        const d = text.charCodeAt(i);
        if (d === 92) i += 2;
        else if (d === 34) break;
        else i++;
      }
      i++;
    } else if (isDigit(c) || c === 45) {
      const end = numberEnd(text, i);
      const token = text.slice(i, end);
      if (isUnsafeInteger(token)) {
        out ??= [];
        out.push(text.slice(copied, i), `"${token}"`);
        copied = end;
      }
      i = end;
    } else i++;
  }
  if (out === undefined) return undefined;
  out.push(text.slice(copied));
  return out.join('');
}
