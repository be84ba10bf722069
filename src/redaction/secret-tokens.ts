/**
 * Secrets found by their own shape: `Bearer` and `Basic` credentials, `curl -u user:password`,
 * `--password value`, PEM private keys, JWTs, and vendor tokens with a fixed prefix (AWS, GitHub,
 * GitLab, Slack, Stripe, `sk-` API keys, Google API keys). A vendor token keeps its prefix
 * readable (`ghp_[REDACTED]`), so a reader still sees what kind of credential it was.
 *
 * A token glued to the word before it (`risk-free`, `task-1234…`) is part of that word: each rule
 * refuses an anchor preceded by a character of its own token alphabet, which also means no rule
 * starts again inside a token it already read.
 */
import {
  ALNUM,
  BASE64,
  BASE64URL,
  type CharClass,
  charClass,
  closingQuote,
  isAlnum,
  isBase64UrlChar,
  isBlank,
  isDigit,
  isLetter,
  isLower,
  isSpace,
  isUpper,
  isWord,
  isWordChar,
  LETTER,
  lineEnd,
  runOf,
  SPACE,
  skipBlanks,
  WORD,
  wordAt,
} from './chars.js';
import type { Rule, RuleCheck, Scan, SecretDetector } from './secret-scan.js';

const DQ = 0x22;
const SQ = 0x27;

/** What glues an anchor to the word before it (each rule's `notAfter`). */
const NOT_SPACE = charClass((c) => !isSpace(c), true);
const FLAG_WORD = charClass((c) => isWordChar(c) || c === 0x2d);
const BASE64URL_OR_DOT = charClass((c) => isBase64UrlChar(c) || c === 0x2e);

// ---- http-auth -------------------------------------------------------------------------------

/** RFC 6750 b64token characters: `[A-Za-z0-9._~+/-]`, then `=` padding. */
const TOKEN68 = charClass(
  (c) => isBase64UrlChar(c) || c === 0x2e || c === 0x7e || c === 0x2b || c === 0x2f || c === 0x3d,
);
const PADDING = charClass((c) => c === 0x3d);
/** An unquoted command-line argument. */
const ARGUMENT = charClass((c) => !isSpace(c) && c !== DQ && c !== SQ, true);
/** Backslashes and quotes: what JSON escaping puts before an argument. */
const ESCAPED_QUOTE = charClass((c) => c === 0x5c || c === DQ || c === SQ);

/** One word of prose (`token`, `Token`, `TOKEN`), not a credential. */
function isPlainWord(s: string, start: number, end: number): boolean {
  let upper = 0;
  for (let i = start; i < end; i++) {
    const c = s.charCodeAt(i);
    if (!isLetter(c)) return false;
    if (isUpper(c)) upper++;
  }
  return upper <= 1 ? upper === 0 || isUpper(s.charCodeAt(start)) : upper === end - start;
}

/**
 * Where the credential after the scheme word at `at` starts (after blanks), or -1 when no blank
 * follows the word.
 */
function afterScheme(scan: Scan, at: number, length: number): number {
  const from = skipBlanks(scan.s, at + length);
  return from === at + length ? -1 : from;
}

/** `Bearer <token>` (also `BEARER`): the token, unless it is a plain word (`Bearer token`). */
const bearer: RuleCheck = (scan, at, length) => {
  const s = scan.s;
  const from = afterScheme(scan, at, length);
  if (from < 0) return at + 1;
  let end = runOf(s, from, TOKEN68);
  if (scan.loose) {
    if (end > from) scan.candidate();
    return end;
  }
  while (end > from && s.charCodeAt(end - 1) === 0x2e) end--; // a sentence's full stop
  if (!isPlainWord(s, from, end)) scan.hit(from, end);
  return Math.max(end, at + 1);
};

/** Whether the token ending at `end` runs on into a longer one (a full stop ends a sentence). */
function gluedAfter(s: string, end: number): boolean {
  const c = s.charCodeAt(end);
  return isBase64UrlChar(c) || (c === 0x2e && isAlnum(s.charCodeAt(end + 1)));
}

/** Most base64 characters decoded to check a Basic credential (its `user:` comes first). */
const BASIC_PEEK = 256;

/** Each base64 character's 6 bits (-1: not base64). */
const BASE64_VALUE = new Int8Array(128).fill(-1);
for (let i = 0; i < 64; i++) {
  BASE64_VALUE['ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'.charCodeAt(i)] =
    i;
}

/**
 * Whether the base64 in `s[start, end)` decodes to printable `user:password` (its first
 * BASIC_PEEK characters are decoded, by hand: no buffer per candidate).
 */
function isUserPassword(s: string, start: number, end: number): boolean {
  const stop = start + (Math.min(end - start, BASIC_PEEK) & ~3);
  if (stop - start < 4) return false;
  let colon = false;
  let bits = 0;
  let count = 0;
  for (let i = start; i < stop; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x3d) break; // padding
    bits = (bits << 6) | BASE64_VALUE[c]!;
    count += 6;
    if (count >= 8) {
      count -= 8;
      const byte = (bits >> count) & 0xff;
      if (byte < 0x20 || byte === 0x7f) return false;
      if (byte === 0x3a) colon = true;
    }
  }
  return colon;
}

/** `Basic <base64>` (also `BASIC`): the base64, when it decodes to `user:password`. */
const basic: RuleCheck = (scan, at, length) => {
  const s = scan.s;
  const from = afterScheme(scan, at, length);
  if (from < 0) return at + 1;
  const end = runOf(s, from, BASE64);
  const padded = runOf(s, end, PADDING);
  if (scan.loose) {
    if (end - from >= 4) scan.candidate();
    return padded;
  }
  if (!gluedAfter(s, padded) && isUserPassword(s, from, padded)) {
    scan.hit(from, padded);
  }
  return Math.max(padded, at + 1);
};

/** Whether `curl` appears earlier on the line of `at` (positions found once, left to right). */
function curlOnLine(scan: Scan, at: number): boolean {
  const s = scan.s;
  if (scan.curlNext === -2) {
    scan.curlNext = s.indexOf('curl');
    scan.lineNext = s.indexOf('\n');
  }
  while (scan.curlNext >= 0 && scan.curlNext < at) {
    scan.curlBefore = scan.curlNext;
    scan.curlNext = s.indexOf('curl', scan.curlNext + 1);
  }
  while (scan.lineNext >= 0 && scan.lineNext < at) {
    scan.lineBefore = scan.lineNext;
    scan.lineNext = s.indexOf('\n', scan.lineNext + 1);
  }
  return scan.curlBefore >= 0 && scan.curlBefore > scan.lineBefore;
}

/** The end of an argument starting at `i`: quoted (to its quote) or bare (to a blank). */
function argumentEnd(s: string, i: number): { start: number; end: number } {
  const q = s.charCodeAt(i);
  if (q === DQ || q === SQ) {
    const close = closingQuote(s, i + 1, q);
    return { start: i + 1, end: close < 0 ? lineEnd(s, i + 1) : close };
  }
  return { start: i, end: runOf(s, i, ARGUMENT) };
}

/** `curl … -u user:password` / `--user user:password`: the password, on a line running curl. */
const curlUser: RuleCheck = (scan, at, length) => {
  const s = scan.s;
  let i = at + length;
  if (length > 3) {
    // `--user` needs `=` or a blank after it (`--username` is another flag)
    if (s.charCodeAt(i) === 0x3d) i++;
    else if (!isBlank(s.charCodeAt(i))) return at + 1;
  }
  i = skipBlanks(s, i);
  // JSON text escapes the quote (`--user \"a:b\"`): a loose scan reads past it.
  if (scan.loose) i = runOf(s, i, ESCAPED_QUOTE);
  const { start, end } = argumentEnd(s, i);
  let colon = start;
  while (colon < end && s.charCodeAt(colon) !== 0x3a) colon++;
  if (colon + 1 < end && (scan.loose || curlOnLine(scan, at))) scan.hit(colon + 1, end);
  return Math.max(end, at + 1);
};

// ---- password: `--password value` ---------------------------------------------------------------

/** `--password value` (`--passwd`, `--passphrase`); `--password=value` is a pair (secret-pairs). */
const passwordFlag: RuleCheck = (scan, at) => {
  const s = scan.s;
  const word = runOf(s, at + 2, LETTER);
  if (
    !(
      isWord(s, at + 2, word, 'password') ||
      isWord(s, at + 2, word, 'passwd') ||
      isWord(s, at + 2, word, 'passphrase')
    ) ||
    !isBlank(s.charCodeAt(word))
  ) {
    return Math.max(word, at + 1);
  }
  const from = skipBlanks(s, word);
  if (s.charCodeAt(from) === 0x2d || from >= s.length) return from; // another flag follows
  const { start, end } = argumentEnd(s, from);
  scan.hit(start, end);
  return Math.max(end, at + 1);
};

// ---- private-key ---------------------------------------------------------------------------------

const BEGIN = '-----BEGIN';
const END = '-----END';
const DASHES = '-----';
/** Longest PEM label read (`ENCRYPTED PRIVATE KEY`, `OPENSSH PRIVATE KEY`, `PGP PRIVATE KEY BLOCK`). */
const LABEL_MAX = 64;

function labelEnd(s: string, i: number): number {
  const limit = Math.min(s.length, i + LABEL_MAX);
  while (
    i < limit &&
    (isUpper(s.charCodeAt(i)) || isDigit(s.charCodeAt(i)) || s.charCodeAt(i) === 0x20)
  )
    i++;
  return i;
}

/**
 * `-----BEGIN … PRIVATE KEY-----` … `-----END …-----`: the body between the two lines. Without an
 * END line (a cut value) everything after the BEGIN line goes.
 */
const privateKey: RuleCheck = (scan, at) => {
  const s = scan.s;
  const label = at + BEGIN.length + 1;
  if (s.charCodeAt(label - 1) !== 0x20) return at + 1;
  const labelStop = labelEnd(s, label);
  if (!wordAt(s, labelStop, DASHES)) return Math.max(labelStop, at + 1);
  const body = labelStop + DASHES.length;
  if (!s.slice(label, labelStop).includes('PRIVATE KEY')) return body;
  if (scan.loose) {
    scan.candidate();
    return body;
  }
  const start = runOf(s, body, SPACE);
  const endLine = s.indexOf(END, body);
  if (endLine < 0) {
    scan.hit(start, s.length);
    return s.length;
  }
  let stop = endLine;
  while (stop > start && isSpace(s.charCodeAt(stop - 1))) stop--;
  scan.hit(start, stop);
  const close = labelEnd(s, endLine + END.length + 1);
  return wordAt(s, close, DASHES) ? close + DASHES.length : endLine + END.length;
};

// ---- jwt ---------------------------------------------------------------------------------------

/** Longest JWT header decoded (real headers are under 200 characters). */
const JWT_HEADER_MAX = 2048;

/** `"alg"` in base64url at each of the three alignments it can have in a header. */
const ALG = ['ImFsZy', 'JhbGci', 'iYWxnI'];

function isJwtHeader(s: string, start: number, end: number): boolean {
  if (end - start > JWT_HEADER_MAX) return false;
  const header = s.slice(start, end);
  if (!ALG.some((alg) => header.includes(alg))) return false;
  try {
    const parsed: unknown = JSON.parse(Buffer.from(header, 'base64url').toString());
    return (
      typeof parsed === 'object' &&
      parsed !== null &&
      typeof (parsed as { alg?: unknown }).alg === 'string'
    );
  } catch {
    return false;
  }
}

/**
 * A JWT: `eyJ…` header, payload and (possibly empty) signature in base64url, joined by dots (five
 * segments for an encrypted one), whose header decodes to a JSON object with `alg`. The whole
 * token is redacted.
 */
const jwt: RuleCheck = (scan, at) => {
  const s = scan.s;
  const header = runOf(s, at, BASE64URL);
  if (s.charCodeAt(header) !== 0x2e) return header;
  const payload = runOf(s, header + 1, BASE64URL);
  if (payload === header + 1 || s.charCodeAt(payload) !== 0x2e) return payload;
  let end = runOf(s, payload + 1, BASE64URL);
  for (let segments = 3; segments < 5; segments++) {
    if (s.charCodeAt(end) !== 0x2e || !isBase64UrlChar(s.charCodeAt(end + 1))) break;
    end = runOf(s, end + 1, BASE64URL);
  }
  if (isJwtHeader(s, at, header)) scan.hit(at, end);
  return end;
};

// ---- vendor tokens with a fixed prefix -----------------------------------------------------------

/**
 * A token made of its anchor (kept readable) and a run of `body` characters, redacted unless
 * `accept` refuses the run `s[start, end)`.
 */
function prefixed(
  body: CharClass,
  accept: (s: string, start: number, end: number) => boolean,
): RuleCheck {
  return (scan, at, length) => {
    const start = at + length;
    const end = runOf(scan.s, start, body);
    if (accept(scan.s, start, end)) scan.hit(start, end);
    return Math.max(end, at + 1);
  };
}

const atLeast = (n: number) => (_: string, start: number, end: number) => end - start >= n;

function hasDigit(s: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (isDigit(s.charCodeAt(i))) return true;
  return false;
}

const UPPER_OR_DIGIT = charClass((c) => isUpper(c) || isDigit(c));
const GITLAB = charClass((c) => isBase64UrlChar(c) || c === 0x2e);
const SLACK = charClass((c) => isAlnum(c) || c === 0x2d);

/** Longest run without `-` or `_` that this many characters long must mix character classes. */
const SK_SEGMENT_MIN = 12;

/**
 * An `sk-` key body: 20 or more characters, with a run of at least SK_SEGMENT_MIN characters
 * between dashes and underscores that mixes two of lowercase, uppercase and digits (random key
 * material does; kebab-case words such as `sk-learn-internationalization` do not).
 */
function isKeyMaterial(s: string, start: number, end: number): boolean {
  if (end - start < 20) return false;
  let run = 0;
  let kinds = 0;
  for (let i = start; i <= end; i++) {
    const c = i < end ? s.charCodeAt(i) : 0x2d;
    if (c === 0x2d || c === 0x5f) {
      if (run >= SK_SEGMENT_MIN && (kinds === 3 || kinds === 5 || kinds === 6 || kinds === 7)) {
        return true;
      }
      run = 0;
      kinds = 0;
    } else {
      run++;
      kinds |= isLower(c) ? 1 : isUpper(c) ? 2 : 4;
    }
  }
  return false;
}

/**
 * AWS access key ids: `AKIA` (long-term) or `ASIA` (temporary) and 16 uppercase letters or digits,
 * standing alone.
 */
const awsKeyId = prefixed(
  UPPER_OR_DIGIT,
  (s, start, end) => end - start === 16 && !isAlnum(s.charCodeAt(end)),
);

/**
 * The rules anchored on a literal, by detector (the `=` / `:` rule is in secret-pairs.ts). A
 * token standing alone is not glued to the word before it: `notAfter` holds the characters that
 * glue it (its own alphabet, mostly), so `risk-free`, `task-…` and `myghp_…` are no candidates.
 */
export const TOKEN_RULES: Partial<Record<SecretDetector, readonly Rule[]>> = {
  'http-auth': [
    { anchors: ['Bearer', 'BEARER'], notAfter: LETTER, check: bearer },
    { anchors: ['Basic', 'BASIC'], notAfter: LETTER, check: basic },
    // `-u` is an argument of its own
    { anchors: ['-u ', '--user'], notAfter: NOT_SPACE, check: curlUser },
  ],
  password: [{ anchors: ['--pass'], notAfter: FLAG_WORD, check: passwordFlag }],
  'private-key': [{ anchors: [BEGIN], check: privateKey }],
  jwt: [{ anchors: ['eyJ'], notAfter: BASE64URL_OR_DOT, check: jwt }],
  aws: [{ anchors: ['AKIA', 'ASIA'], notAfter: ALNUM, check: awsKeyId }],
  github: [
    {
      anchors: ['ghp_', 'gho_', 'ghu_', 'ghs_', 'ghr_'],
      notAfter: WORD,
      check: prefixed(ALNUM, atLeast(30)),
    },
    { anchors: ['github_pat_'], notAfter: WORD, check: prefixed(WORD, atLeast(22)) },
  ],
  gitlab: [
    {
      anchors: ['glpat-', 'gldt-', 'glrt-', 'glptt-'],
      notAfter: BASE64URL,
      check: prefixed(GITLAB, atLeast(20)),
    },
  ],
  slack: [
    {
      anchors: ['xoxb-', 'xoxp-', 'xoxa-', 'xoxr-', 'xoxs-', 'xoxe-', 'xapp-'],
      notAfter: WORD,
      check: prefixed(SLACK, (s, start, end) => end - start >= 10 && hasDigit(s, start, end)),
    },
  ],
  stripe: [
    {
      anchors: ['sk_live_', 'rk_live_', 'sk_test_', 'rk_test_', 'whsec_'],
      notAfter: WORD,
      check: prefixed(ALNUM, atLeast(16)),
    },
  ],
  'llm-api-key': [
    { anchors: ['sk-'], notAfter: BASE64URL, check: prefixed(BASE64URL, isKeyMaterial) },
  ],
  'google-api-key': [
    {
      anchors: ['AIza'],
      notAfter: BASE64URL,
      check: prefixed(BASE64URL, (_, start, end) => end - start === 35),
    },
  ],
};
