/**
 * Secrets found by their key: `key=value`, `key: value` and `"key": "value"` pairs in text whose
 * key names a password, an Authorization header, an AWS secret or a credential query parameter,
 * and URLs (`scheme://user:password@host`, Slack webhook paths). One rule anchored on `=` and `:`
 * finds the key before the separator (at most KEY_MAX characters back) and hands the pair to the
 * enabled detectors. docs/redaction.md lists the exact names and forms.
 */
import {
  BARE_VALUE,
  BASE64,
  type CharClass,
  charClass,
  closingQuote,
  endsWithWord,
  isAlnum,
  isBareValueEnd,
  isBlank,
  isLetter,
  isLower,
  isSpace,
  isUpper,
  isWord,
  isWordChar,
  lineEnd,
  lower,
  runOf,
  skipBlanks,
  trimEnd,
  wordAt,
} from './chars.js';
import type { Rule, Scan, SecretDetector } from './secret-scan.js';

/** Keys longer than this are not read back to their start (suffix checks still see their end). */
const KEY_MAX = 64;
/** Most blanks read between a key and its separator, and of indentation before a key. */
const BLANKS_MAX = 4;
const INDENT_MAX = 32;
/** Longest `{…}` value read (ODBC braces a value holding `;`). */
const BRACED_MAX = 256;
/** Most backslashes read before a key's closing quote (JSON nested in JSON this deep). */
const ESCAPES_MAX = 8;

const DQ = 0x22;
const SQ = 0x27;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const EQUALS = 0x3d;

/** A pair's key, `s[start, end)`, and how it is written. */
interface Key {
  readonly start: number;
  readonly end: number;
  /** Quoted on both sides: `"password": …`. */
  readonly quoted: boolean;
  /** Blanks (or a closing quote) between the key and the separator. */
  readonly spaced: boolean;
  /** The separator is `=`. */
  readonly equals: boolean;
}

function isKeyChar(c: number): boolean {
  return isWordChar(c) || c === 0x2d || c === 0x2e;
}

/**
 * Whether a key ending at `end` can be one some detector reads, by its last two letters: `rd`
 * (password), `wd` (passwd, pwd), `se` (passphrase), `on` (authorization), `ey` (…key), `en`
 * (…token), `et` (…secret), `ig` (sig), `re` (signature), `al` (…credential). A cheap first test
 * for the many `:` and `=` that follow other keys.
 */
function keyEndingMatters(s: string, end: number): boolean {
  const a = lower(s.charCodeAt(end - 2));
  switch (lower(s.charCodeAt(end - 1))) {
    case 0x64: // d
      return a === 0x72 || a === 0x77;
    case 0x65: // e
      return a === 0x73 || a === 0x72;
    case 0x6e: // n
      return a === 0x6f || a === 0x65;
    case 0x79: // y
    case 0x74: // t
      return a === 0x65;
    case 0x67: // g
      return a === 0x69;
    case 0x6c: // l
      return a === 0x61;
    default:
      return false;
  }
}

/** The key before the separator at `at`, or undefined when there is none worth reading. */
function keyBefore(s: string, at: number): Key | undefined {
  let j = at;
  while (j > 0 && at - j < BLANKS_MAX && isBlank(s.charCodeAt(j - 1))) j--;
  const quote = s.charCodeAt(j - 1);
  const quoted = quote === DQ || quote === SQ;
  if (quoted) {
    // `\"password\":` in JSON inside a JSON string (one backslash per level of nesting)
    const floor = Math.max(0, j - 1 - ESCAPES_MAX);
    for (j--; j > floor && s.charCodeAt(j - 1) === BACKSLASH; ) j--;
  }
  const end = j;
  let start = end;
  while (start > 0 && end - start < KEY_MAX && isKeyChar(s.charCodeAt(start - 1))) start--;
  if (end - start < 2 || !keyEndingMatters(s, end)) return undefined;
  if (quoted && s.charCodeAt(start - 1) !== quote) return undefined;
  return {
    start,
    end,
    quoted,
    spaced: end !== at,
    equals: s.charCodeAt(at) === EQUALS,
  };
}

/** Whether the key starts its line (YAML, INI, env files), after indentation and a YAML `- `. */
function startsLine(s: string, key: Key): boolean {
  let k = key.quoted ? key.start - 1 : key.start;
  const floor = Math.max(0, k - INDENT_MAX);
  while (k > floor && isBlank(s.charCodeAt(k - 1))) k--;
  if (k >= 2 && s.charCodeAt(k - 1) === 0x20 && s.charCodeAt(k - 2) === 0x2d) {
    k -= 2;
    while (k > floor && isBlank(s.charCodeAt(k - 1))) k--;
  }
  return k === 0 || s.charCodeAt(k - 1) === 0x0a || s.charCodeAt(k - 1) === 0x0d;
}

/** The words of a value on its own line: a bare value's characters and blanks. */
const BARE_WORDS = charClass((c) => isBlank(c) || !isBareValueEnd(c), true);

/**
 * A bare value's end: `{…}` (ODBC, closed within BRACED_MAX characters on its line) runs to its
 * brace, anything else to a separator.
 */
function bareEnd(s: string, i: number): number {
  if (s.charCodeAt(i) === 0x7b) {
    const limit = Math.min(s.length, i + BRACED_MAX);
    let close = i + 1;
    while (close < limit && s.charCodeAt(close) !== 0x7d && s.charCodeAt(close) !== 0x0a) close++;
    if (s.charCodeAt(close) === 0x7d) return close + 1;
  }
  return runOf(s, i, BARE_VALUE);
}

const NULLISH = ['null', 'none', 'nil', 'true', 'false', 'undefined'];

function isNullish(s: string, start: number, end: number): boolean {
  for (const word of NULLISH) if (isWord(s, start, end, word)) return true;
  return false;
}

// ---- password ---------------------------------------------------------------------------------

const PASSWORD_WORDS = ['password', 'passwd', 'passphrase', 'pwd'];

function isPasswordKey(s: string, key: Key): boolean {
  const last = lower(s.charCodeAt(key.end - 1));
  if (last !== 0x64 && last !== 0x65) return false; // password, passwd, pwd; passphrase
  for (const word of PASSWORD_WORDS) if (endsWithWord(s, key.start, key.end, word)) return true;
  return false;
}

/**
 * A password's value: quoted anywhere; bare right after the separator (`password=…`,
 * `password:…`), after a quoted key (`"password": 42`), or when the key starts its line (YAML,
 * INI: words and blanks up to a separator such as `;` or the end of the line). `password: see
 * below` in prose and `password = get()` in code stay, and so does a `pwd` that is a directory
 * (`PWD=/home/ann`).
 */
function passwordValue(scan: Scan, at: number, key: Key): number {
  const s = scan.s;
  const i = skipBlanks(s, at + 1);
  const c = s.charCodeAt(i);
  let start = i;
  let end: number;
  if (c === DQ || c === SQ) {
    start = i + 1;
    const close = closingQuote(s, start, c);
    end = close < 0 ? lineEnd(s, start) : close;
  } else if ((!key.spaced && i === at + 1) || key.quoted) {
    end = bareEnd(s, i);
  } else if (startsLine(s, key)) {
    end = trimEnd(s, i, runOf(s, i, BARE_WORDS));
  } else {
    return at + 1;
  }
  const directory =
    endsWithWord(s, key.start, key.end, 'pwd') &&
    (s.charCodeAt(start) === 0x2f || s.charCodeAt(start) === 0x7e);
  if (!directory && !isNullish(s, start, end)) scan.hit(start, end);
  return Math.max(end, at + 1);
}

// ---- http-auth: Authorization header values ----------------------------------------------------

/** Schemes whose credentials are one token, and schemes followed by a parameter list. */
const TOKEN_SCHEMES = [
  'bearer',
  'basic',
  'token',
  'apikey',
  'api-key',
  'key',
  'dpop',
  'negotiate',
  'ntlm',
  'ssws',
  'sharedkey',
  'sharedaccesssignature',
  'splunk',
  'jwt',
];

function isTokenScheme(s: string, start: number, end: number): boolean {
  for (const word of TOKEN_SCHEMES) if (isWord(s, start, end, word)) return true;
  return false;
}

function isAuthorizationKey(s: string, key: Key): boolean {
  const word = 'authorization';
  if (!endsWithWord(s, key.start, key.end, word)) return false;
  const before = key.end - word.length;
  return before === key.start || !isAlnum(s.charCodeAt(before - 1));
}

const SCHEME = charClass((c) => isAlnum(c) || c === 0x2d);
const SCHEME_NAME = charClass((c) => isLetter(c) || c === 0x2d);

function isLineBreak(c: number): boolean {
  return c === 0x0a || c === 0x0d;
}

/** Where an Authorization value goes on (`rest`), and where one token of it does (`token`). */
interface ValueClasses {
  readonly rest: CharClass;
  readonly token: CharClass;
}

function valueClasses(ends: (c: number) => boolean): ValueClasses {
  return {
    rest: charClass((c) => !ends(c), true),
    token: charClass((c) => !ends(c) && !isSpace(c) && c !== 0x2c && c !== 0x3b, true),
  };
}

const IN_DOUBLE_QUOTES = valueClasses((c) => c === DQ || isLineBreak(c));
const IN_SINGLE_QUOTES = valueClasses((c) => c === SQ || isLineBreak(c));
const IN_DOUBLE_QUOTED_HEADER = valueClasses((c) => c === DQ || c === BACKSLASH || isLineBreak(c));
const IN_SINGLE_QUOTED_HEADER = valueClasses((c) => c === SQ || c === BACKSLASH || isLineBreak(c));
const IN_PARAMETER = valueClasses((c) => c === 0x26 || isLineBreak(c));
const IN_HEADER_LINE = valueClasses(isLineBreak);

/**
 * An Authorization (or Proxy-Authorization) value: the scheme stays readable. A token scheme
 * (`Bearer`, `Basic`, `Token` …) loses its one token; any other scheme word (`Digest`,
 * `AWS4-HMAC-SHA256`, `OAuth` …) the rest of the value (its parameter list); a value with no
 * scheme its first word. The value ends at its closing quote, at the quote around the whole
 * header (`curl -H "Authorization: …"`), at `&` after `=`, or at the end of the line.
 */
function authorizationValue(scan: Scan, at: number, key: Key): number {
  const s = scan.s;
  let i = skipBlanks(s, at + 1);
  const q = s.charCodeAt(i);
  const enclosing = key.quoted ? 0 : s.charCodeAt(key.start - 1);
  let value: ValueClasses;
  if (q === DQ || q === SQ) {
    i++;
    value = q === DQ ? IN_DOUBLE_QUOTES : IN_SINGLE_QUOTES;
  } else if (enclosing === DQ || enclosing === SQ) {
    value = enclosing === DQ ? IN_DOUBLE_QUOTED_HEADER : IN_SINGLE_QUOTED_HEADER;
  } else {
    value = key.equals ? IN_PARAMETER : IN_HEADER_LINE;
  }
  const word = runOf(s, i, SCHEME);
  let from = i;
  let last: number;
  if (isBlank(s.charCodeAt(word)) && looksLikeScheme(s, i, word)) {
    from = skipBlanks(s, word);
    last = isTokenScheme(s, i, word)
      ? runOf(s, from, value.token)
      : trimEnd(s, from, runOf(s, from, value.rest));
  } else {
    last = runOf(s, i, value.token);
  }
  scan.hit(from, last);
  return Math.max(last, word, at + 1);
}

/** A scheme name: letters and dashes (`Bearer`, `Digest`), or one of the named-with-digits ones. */
function looksLikeScheme(s: string, start: number, end: number): boolean {
  if (end === start || !isLetter(s.charCodeAt(start))) return false;
  if (wordAt(s, start, 'aws4-hmac-') || wordAt(s, start, 'scram-sha-')) return true;
  return runOf(s, start, SCHEME_NAME) >= end;
}

// ---- aws: secret access keys and session tokens after an AWS-named key ------------------------

function keyHolds(s: string, key: Key, word: string): boolean {
  for (let i = key.start; i + word.length <= key.end; i++) if (wordAt(s, i, word)) return true;
  return false;
}

/**
 * AWS secret access keys (40 base64 characters, both cases) and session tokens (40 or more) are
 * plain base64, so only their key tells them apart from a hash: it must mention `aws` or `secret`
 * and end with `key`, `token` or `secret` (`aws_secret_access_key`, `AWS_SESSION_TOKEN`,
 * `"SecretAccessKey"`, `secret_key`). Lowercase hex (a git SHA) is never a secret key.
 */
function isAwsSecretKey(s: string, key: Key): boolean {
  const last = lower(s.charCodeAt(key.end - 1));
  if (last !== 0x6e && last !== 0x79 && last !== 0x74) return false; // …token, …key, …secret
  return (
    (endsWithWord(s, key.start, key.end, 'token') ||
      endsWithWord(s, key.start, key.end, 'key') ||
      endsWithWord(s, key.start, key.end, 'secret')) &&
    (keyHolds(s, key, 'aws') || keyHolds(s, key, 'secret'))
  );
}

function awsSecretValue(scan: Scan, at: number, key: Key): number {
  const s = scan.s;
  const token = endsWithWord(s, key.start, key.end, 'token');
  let i = skipBlanks(s, at + 1);
  if (s.charCodeAt(i) === DQ || s.charCodeAt(i) === SQ) i++;
  const end = runOf(s, i, BASE64);
  const padded = runOf(s, end, PADDING);
  const next = s.charCodeAt(padded);
  if (next === 0x5f || next === 0x2d) return padded; // part of a longer identifier
  const length = end - i;
  if ((length === 40 && hasBothCases(s, i, end)) || (token && length >= 40)) {
    scan.hit(i, padded);
  }
  return Math.max(padded, at + 1);
}

function hasBothCases(s: string, start: number, end: number): boolean {
  let upper = false;
  let lowerCase = false;
  for (let i = start; i < end && !(upper && lowerCase); i++) {
    const c = s.charCodeAt(i);
    upper ||= isUpper(c);
    lowerCase ||= isLower(c);
  }
  return upper && lowerCase;
}

// ---- url-query: credential query parameters -----------------------------------------------------

/** Whole parameter names, and endings (after `_` or `-`), of credential query parameters. */
const QUERY_NAMES = ['token', 'secret', 'api_key', 'apikey', 'api-key', 'sig', 'signature'];
const QUERY_ENDINGS = [
  '_token',
  '-token',
  '_secret',
  '-secret',
  '_api_key',
  '_apikey',
  '-api-key',
  '_signature',
  '-signature',
  '_credential',
  '-credential',
];

function isQueryName(s: string, start: number, end: number): boolean {
  // …token, …secret, …key, sig, …signature, …credential
  const last = lower(s.charCodeAt(end - 1));
  if (last !== 0x6e && last !== 0x74 && last !== 0x79 && last !== 0x67 && last !== 0x65) {
    if (last !== 0x6c) return false;
  }
  for (const name of QUERY_NAMES) if (isWord(s, start, end, name)) return true;
  for (const ending of QUERY_ENDINGS) if (endsWithWord(s, start, end, ending)) return true;
  return false;
}

/**
 * Where the query parameter named by the key starts: right after `?`, `&`, `#` or `;` (`&amp;`),
 * or after a JSON-escaped `\u0026`; -1 when the key does not start a parameter.
 */
function parameterStart(s: string, key: Key): number {
  const c = s.charCodeAt(key.start - 1);
  if (c === 0x3f || c === 0x26 || c === 0x23 || c === 0x3b) return key.start;
  return c === BACKSLASH && wordAt(s, key.start, 'u0026') ? key.start + 5 : -1;
}

const PADDING = charClass((c) => c === EQUALS);

const QUERY_VALUE = charClass(
  (c) =>
    !(
      isSpace(c) ||
      c === 0x26 ||
      c === 0x23 ||
      c === DQ ||
      c === SQ ||
      c === 0x3c ||
      c === 0x3e ||
      c === BACKSLASH ||
      c === 0x29 ||
      c === 0x5d ||
      c === 0x7d ||
      c === 0x3b
    ),
  true,
);

function isQueryKey(s: string, key: Key): boolean {
  if (!key.equals || key.spaced || key.quoted) return false;
  const name = parameterStart(s, key);
  return name >= 0 && isQueryName(s, name, key.end);
}

function queryValue(scan: Scan, at: number): number {
  const s = scan.s;
  const end = runOf(s, at + 1, QUERY_VALUE);
  scan.hit(at + 1, end);
  return Math.max(end, at + 1);
}

// ---- URLs: userinfo passwords and Slack webhook paths -------------------------------------------

/**
 * The length of `//` after the `:` at `at` (each slash may be JSON-escaped, `\/`, once per level
 * of nesting); 0 when absent.
 */
function slashesAfter(s: string, at: number): number {
  let i = at + 1;
  for (let slash = 0; slash < 2; slash++) {
    const floor = i + ESCAPES_MAX;
    while (i < floor && s.charCodeAt(i) === BACKSLASH) i++;
    if (s.charCodeAt(i) !== 0x2f) return 0;
    i++;
  }
  return i - at - 1;
}

function isAuthorityEnd(c: number): boolean {
  return (
    isSpace(c) ||
    c === 0x2f ||
    c === 0x3f ||
    c === 0x23 ||
    c === BACKSLASH ||
    c === DQ ||
    c === SQ ||
    c === 0x3c ||
    c === 0x3e ||
    c === 0x60 ||
    c === 0x28 ||
    c === 0x29 ||
    c === 0x7b ||
    c === 0x7d ||
    c === 0x7c
  );
}

const SLACK_HOST = 'hooks.slack.com';
const SLACK_PATHS = ['/services/', '/workflows/', '/triggers/', '\\/services\\/'];

/**
 * `scheme://user:password@host…`: the password (between the first `:` of the authority and its
 * last `@`, so an unencoded `@` in the password is covered) is redacted; and with `slack`, the
 * path of `https://hooks.slack.com/services/…` (the webhook's secret).
 */
function urlAt(
  scan: Scan,
  at: number,
  authority: number,
  userinfo: boolean,
  slack: boolean,
): number {
  const s = scan.s;
  if (!isAlnum(s.charCodeAt(at - 1))) return at + 1;
  let colon = -1;
  let atSign = -1;
  let end = authority;
  for (; end < s.length; end++) {
    const c = s.charCodeAt(end);
    if (isAuthorityEnd(c)) break;
    if (c === 0x40) atSign = end;
    else if (c === COLON && colon < 0) colon = end;
  }
  if (userinfo && atSign > colon && colon >= 0) scan.hit(colon + 1, atSign);
  const host = atSign >= 0 ? atSign + 1 : authority;
  if (slack && isWord(s, host, end, SLACK_HOST)) {
    for (const path of SLACK_PATHS) {
      if (!wordAt(s, end, path)) continue;
      const from = end + path.length;
      const last = runOf(s, from, QUERY_VALUE);
      scan.hit(from, last);
      return Math.max(last, at + 1);
    }
  }
  // Pairs may follow inside what looked like an authority (`jdbc:sqlserver://db;password=…`). No
  // need to skip it: it ends at a `/`, so the next `://` starts after it.
  return at + 1;
}

// ---- the rule ---------------------------------------------------------------------------------

/** What cannot end a key (or the quote after it), nor a URL scheme before `://`. */
const NOT_BEFORE_SEPARATOR = charClass(
  (c) =>
    !(isAlnum(c) || isBlank(c) || c === DQ || c === SQ || c === 0x5f || c === 0x2d || c === 0x2e),
  true,
);

/** A detector that reads pairs: which keys it reads, and how it reads their value. */
interface PairReader {
  readonly reads: (s: string, key: Key) => boolean;
  /** Redacts the value of the pair whose separator is at `at`; returns where the value ends. */
  readonly read: (scan: Scan, at: number, key: Key) => number;
}

const PAIR_READERS: readonly [SecretDetector, PairReader][] = [
  ['password', { reads: isPasswordKey, read: passwordValue }],
  ['http-auth', { reads: isAuthorizationKey, read: authorizationValue }],
  ['aws', { reads: isAwsSecretKey, read: awsSecretValue }],
  ['url-query', { reads: isQueryKey, read: queryValue }],
];

/** The `=` / `:` rule for the enabled detectors that read pairs, or undefined when none is on. */
export function pairRule(enabled: ReadonlySet<SecretDetector>): Rule | undefined {
  const readers = PAIR_READERS.filter(([d]) => enabled.has(d)).map(([, reader]) => reader);
  const userinfo = enabled.has('url-userinfo');
  const slack = enabled.has('slack');
  const urls = userinfo || slack;
  if (readers.length === 0 && !urls) return undefined;
  return {
    anchors: ['=', ':'],
    // Most separators follow no key at all (`==`, `07:15`, `a, b: c`) and are dropped at once;
    // `://` is read whatever comes before it.
    notAfter: NOT_BEFORE_SEPARATOR,
    check(scan, at) {
      const s = scan.s;
      if (s.charCodeAt(at) === COLON) {
        const slashes = slashesAfter(s, at);
        if (slashes > 0) return urls ? urlAt(scan, at, at + 1 + slashes, userinfo, slack) : at + 1;
      }
      const key = keyBefore(s, at);
      if (key === undefined) return at + 1;
      let next = at + 1;
      for (const reader of readers) {
        if (!reader.reads(s, key)) continue;
        // A loose scan takes the key's word for it: escapes can hide the value's shape.
        if (scan.loose) {
          scan.candidate();
          return next;
        }
        next = Math.max(next, reader.read(scan, at, key));
      }
      return next;
    },
  };
}
