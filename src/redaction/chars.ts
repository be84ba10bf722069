/** Character classes and small scanning steps of the hand-written detectors (ASCII only). */

export function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

export function isLetter(c: number): boolean {
  const lower = c | 0x20;
  return lower >= 97 && lower <= 122;
}

export function isUpper(c: number): boolean {
  return c >= 65 && c <= 90;
}

export function isLower(c: number): boolean {
  return c >= 97 && c <= 122;
}

export function isAlnum(c: number): boolean {
  return isDigit(c) || isLetter(c);
}

/** `[A-Za-z0-9_]`. */
export function isWordChar(c: number): boolean {
  return isAlnum(c) || c === 0x5f;
}

/** `[A-Za-z0-9_-]`: base64url, and the body of most vendor tokens. */
export function isBase64UrlChar(c: number): boolean {
  return isWordChar(c) || c === 0x2d;
}

/** `[A-Za-z0-9+/]`: base64 without padding. */
export function isBase64Char(c: number): boolean {
  return isAlnum(c) || c === 0x2b || c === 0x2f;
}

/** Space or tab. */
export function isBlank(c: number): boolean {
  return c === 0x20 || c === 0x09;
}

/** Space, tab, CR or LF. */
export function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** The lowercase of an ASCII letter; other codes unchanged. */
export function lower(c: number): number {
  return isUpper(c) ? c | 0x20 : c;
}

/** Whether `s` holds `word` (lowercase ASCII) at `at`, in any case. */
export function wordAt(s: string, at: number, word: string): boolean {
  if (at < 0 || at + word.length > s.length) return false;
  for (let i = 0; i < word.length; i++) {
    if (lower(s.charCodeAt(at + i)) !== word.charCodeAt(i)) return false;
  }
  return true;
}

/** Whether `s[start, end)` ends with `word` (lowercase ASCII), in any case. */
export function endsWithWord(s: string, start: number, end: number, word: string): boolean {
  return end - start >= word.length && wordAt(s, end - word.length, word);
}

/** Whether `s[start, end)` is `word` (lowercase ASCII), in any case. */
export function isWord(s: string, start: number, end: number, word: string): boolean {
  return end - start === word.length && wordAt(s, start, word);
}

/**
 * A set of characters: ASCII ones by table, all others in or out together. Runs are measured with
 * these rather than with predicate functions so that the one loop in `runOf` stays monomorphic
 * (a function argument that differs per call site makes every character a real call).
 */
export interface CharClass {
  readonly ascii: Uint8Array;
  readonly others: boolean;
}

export function charClass(test: (c: number) => boolean, others = false): CharClass {
  const ascii = new Uint8Array(128);
  for (let c = 0; c < 128; c++) ascii[c] = test(c) ? 1 : 0;
  return { ascii, others };
}

/** The end of the run of characters of `cls` that starts at `i`. */
export function runOf(s: string, i: number, cls: CharClass): number {
  const { ascii, others } = cls;
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 128 ? ascii[c] === 0 : !others) break;
  }
  return i;
}

/**
 * Where a bare (unquoted) value in a `key=value` pair ends: whitespace, a quote, or the
 * punctuation that separates pairs and closes brackets (` \t\r\n"',;&)}]`).
 */
export function isBareValueEnd(c: number): boolean {
  return (
    isSpace(c) ||
    c === 0x22 ||
    c === 0x27 ||
    c === 0x2c ||
    c === 0x3b ||
    c === 0x26 ||
    c === 0x29 ||
    c === 0x7d ||
    c === 0x5d
  );
}

export const BLANK = charClass(isBlank);
export const SPACE = charClass(isSpace);
export const LETTER = charClass(isLetter);
export const ALNUM = charClass(isAlnum);
export const WORD = charClass(isWordChar);
export const BASE64 = charClass(isBase64Char);
export const BASE64URL = charClass(isBase64UrlChar);
/** Everything but CR and LF. */
export const IN_LINE = charClass((c) => c !== 0x0a && c !== 0x0d, true);
/** Everything that continues a bare value (see isBareValueEnd). */
export const BARE_VALUE = charClass((c) => !isBareValueEnd(c), true);

export function skipBlanks(s: string, i: number): number {
  return runOf(s, i, BLANK);
}

/** The end of the line holding `i` (before its CR or LF). */
export function lineEnd(s: string, i: number): number {
  return runOf(s, i, IN_LINE);
}

/** `end` moved back over trailing blanks (not before `start`). */
export function trimEnd(s: string, start: number, end: number): number {
  while (end > start && isBlank(s.charCodeAt(end - 1))) end--;
  return end;
}

/**
 * The closing `quote` of a value whose opening quote is just before `i` (backslash escapes
 * skipped), or -1 when the line or the text ends first.
 */
export function closingQuote(s: string, i: number, quote: number): number {
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === quote) return i;
    if (c === 0x0a || c === 0x0d) return -1;
    if (c === 0x5c) i++;
  }
  return -1;
}
