/**
 * Key rules: which attribute, label and JSON keys have their whole value replaced.
 *
 * A key is tested case-insensitively twice, as a whole (`http.request.header.authorization`) and
 * by its final dot-separated segment (`authorization`). Besides the spec's spelling, the final
 * segment is also tested in "word" form, where camelCase and dashes become underscores
 * (`accessToken`, `x-api-key` → `access_token`, `x_api_key`), because JSON metadata and HTTP
 * header attributes spell the same secrets that way. Token counts never match: every default
 * suffix ends in a singular word (`_token`), and `input_tokens`, `max_tokens`, `token_count`,
 * `tokenizer` end otherwise.
 */
import { globMatch } from '../core/index.js';

/** Names whose value is always replaced (matched against the whole key and its final segment). */
export const DEFAULT_KEY_NAMES: readonly string[] = [
  'password',
  'passwd',
  'authorization',
  'cookie',
  'set-cookie',
  'token',
  'secret',
  'api_key',
  'api-key',
  'apikey',
  'private_key',
  // Beyond the spec's list (docs/redaction.md): names that hold credentials in cloud SDK configs,
  // HTTP proxies and key files.
  'proxy-authorization',
  'aws_secret_access_key',
  'secret_access_key',
  'secret_key',
  'access_key',
  'passphrase',
  'credentials',
];

/** Endings whose value is always replaced. */
export const DEFAULT_KEY_SUFFIXES: readonly string[] = [
  '_token',
  '_secret',
  '_password',
  '_api_key',
  // Beyond the spec's list, as the names above: `ssh_private_key`, `django_secret_key`,
  // `key_passphrase`.
  '_private_key',
  '_secret_key',
  '_passphrase',
];

/** A key's class: an ordinary key, a secret (value replaced) or a trace/span id (value kept). */
export const KEY_PLAIN = 0;
export const KEY_SECRET = 1;
export const KEY_ID = 2;
export type KeyClass = typeof KEY_PLAIN | typeof KEY_SECRET | typeof KEY_ID;

/** Word forms of the id keys a Record and span-shaped JSON carry (`traceId`, `parent_span_id`). */
const ID_KEYS = new Set(['trace_id', 'span_id', 'parent_span_id']);

/** Most distinct keys kept in the decision cache; it is cleared when full (keys are untrusted). */
const CACHE_MAX = 4096;
/** Longer keys are classified without caching. */
const CACHE_KEY_MAX = 256;

/** Why a glob is refused: said without quoting the glob. */
export function globProblem(glob: string): string | undefined {
  if (glob.trim() === '') return 'is empty';
  for (let i = 0; i < glob.length; i++) {
    const c = glob.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return 'contains a control character';
    // Character classes, braces and escapes are not supported: refuse them rather than silently
    // treating them as literal characters the user did not mean.
    if (c === 0x5b || c === 0x5d || c === 0x7b || c === 0x7d || c === 0x5c) {
      return 'uses a character other than `*` and `?` as a wildcard ([ ] { } \\ are not supported)';
    }
  }
  return undefined;
}

function isUpper(c: number): boolean {
  return c >= 0x41 && c <= 0x5a;
}

function isLower(c: number): boolean {
  return c >= 0x61 && c <= 0x7a;
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/** What `\s` matches in a JavaScript regular expression. */
function isJsSpace(c: number): boolean {
  return (
    (c >= 0x09 && c <= 0x0d) ||
    c === 0x20 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

/**
 * `accessToken` → `access_token`, `X-Api-Key` → `x_api_key`, `APIKey` → `api_key`.
 *
 * One pass, linear in the key's length (keys are untrusted and may be huge): an underscore goes
 * before a capital that follows a lowercase letter or digit, and before the last capital of a run
 * of capitals that a lowercase letter follows (`APIKey`); dashes and whitespace become
 * underscores. The regex chain this replaces backtracked quadratically on runs of capitals.
 */
export function wordForm(segment: string): string {
  let out = '';
  let from = 0;
  const n = segment.length;
  for (let i = 0; i < n; i++) {
    const c = segment.charCodeAt(i);
    if (isUpper(c) && i > 0) {
      const prev = segment.charCodeAt(i - 1);
      if (
        isLower(prev) ||
        isDigit(prev) ||
        (isUpper(prev) && i + 1 < n && isLower(segment.charCodeAt(i + 1)))
      ) {
        out += `${segment.slice(from, i)}_`;
        from = i;
      }
    } else if (c === 0x2d || isJsSpace(c)) {
      out += `${segment.slice(from, i)}_`;
      from = i + 1;
    }
  }
  return (from === 0 ? segment : out + segment.slice(from)).toLowerCase();
}

function endsWithAny(s: string, suffixes: readonly string[]): boolean {
  for (const suffix of suffixes) if (s.endsWith(suffix)) return true;
  return false;
}

export interface KeyMatcher {
  classify(key: string): KeyClass;
  /**
   * Literal fragments every redacted key contains (lowercase), for cheap "could this JSON text
   * hold a redacted key" checks; undefined when a glob has no literal part (anything may match).
   */
  readonly literals: readonly string[] | undefined;
}

/** Builds the matcher from the defaults plus validated, lowercased globs. */
export function compileKeyMatcher(globs: readonly string[]): KeyMatcher {
  const names = new Set(DEFAULT_KEY_NAMES);
  const words = new Set(DEFAULT_KEY_NAMES.map((n) => n.replace(/-/g, '_')));
  const lowered = globs.map((g) => g.toLowerCase());
  const exactGlobs = new Set(lowered.filter((g) => !g.includes('*') && !g.includes('?')));
  const wildGlobs = lowered.filter((g) => !exactGlobs.has(g));

  const decide = (key: string): KeyClass => {
    const lower = key.toLowerCase();
    const dot = lower.lastIndexOf('.');
    const segment = dot < 0 ? lower : lower.slice(dot + 1);
    if (names.has(lower) || names.has(segment) || endsWithAny(lower, DEFAULT_KEY_SUFFIXES)) {
      return KEY_SECRET;
    }
    if (exactGlobs.has(lower) || exactGlobs.has(segment)) return KEY_SECRET;
    for (const glob of wildGlobs) {
      if (globMatch(glob, lower) || (dot >= 0 && globMatch(glob, segment))) return KEY_SECRET;
    }
    const word = wordForm(dot < 0 ? key : key.slice(dot + 1));
    if (words.has(word) || endsWithAny(word, DEFAULT_KEY_SUFFIXES)) return KEY_SECRET;
    return ID_KEYS.has(word) ? KEY_ID : KEY_PLAIN;
  };

  const cache = new Map<string, KeyClass>();
  const classify = (key: string): KeyClass => {
    const hit = cache.get(key);
    if (hit !== undefined) return hit;
    const decision = decide(key);
    if (key.length <= CACHE_KEY_MAX) {
      if (cache.size >= CACHE_MAX) cache.clear();
      cache.set(key, decision);
    }
    return decision;
  };

  let literals: string[] | undefined = [
    'passw',
    'authorization',
    'cookie',
    'token',
    'secret',
    'api_key',
    'api-key',
    'apikey',
    'private_key',
    'private-key',
    'privatekey',
    'access_key',
    'access-key',
    'accesskey',
    'passphrase',
    'credentials',
  ];
  for (const glob of lowered) {
    const longest = glob.split(/[*?]/).reduce((a, b) => (b.length > a.length ? b : a), '');
    if (longest === '') {
      literals = undefined;
      break;
    }
    literals.push(longest);
  }
  return { classify, literals };
}
