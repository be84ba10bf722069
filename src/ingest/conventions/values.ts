import type { Attributes, AttributeValue, Message, Span } from '../../core/index.js';

/**
 * Value decoding shared by every convention reader (conventions reference §0.2): typed attribute
 * access, JSON sniffing, indexed flattened keys, Python literals, JSON-safe copies and nanosecond
 * arithmetic. Every function here is total: garbage in gives `undefined` out, never an exception.
 */

export type JsonObject = { [key: string]: unknown };

export function isObject(value: unknown): value is JsonObject {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    !(value instanceof Uint8Array)
  );
}

/** Base64 of bytes, so raw attributes stay JSON. */
export function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

/** A JSON-safe copy of an attribute value: bytes become base64, non-finite numbers strings. */
export function jsonSafe(value: unknown, depth = 0): unknown {
  if (depth > 64) return null;
  if (value instanceof Uint8Array) return base64(value);
  if (typeof value === 'number') return Number.isFinite(value) ? value : String(value);
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) return value.map((v) => jsonSafe(v, depth + 1));
  if (isObject(value)) {
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(value)) out[k] = jsonSafe(v, depth + 1);
    return out;
  }
  if (value === undefined) return null;
  return value;
}

/**
 * All attributes of a span as JSON-safe values (for `Step.attributes`): the span's own object
 * when every value is a string, a boolean or a finite number (most spans; a copy per step was a
 * good part of what normalization allocated), else a copy. Nothing writes to either afterwards.
 */
export function jsonSafeAttributes(attributes: Attributes): Record<string, unknown> {
  let plain = true;
  for (const k in attributes) {
    const v = attributes[k];
    const t = typeof v;
    if (t === 'string' || t === 'boolean' || (t === 'number' && Number.isFinite(v))) continue;
    plain = false;
    break;
  }
  if (plain) return attributes;
  const out: Record<string, unknown> = {};
  for (const k in attributes) out[k] = jsonSafe(attributes[k]);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Typed access

/** A non-empty string (numbers are stringified: ids sometimes arrive as ints). */
export function asString(value: unknown): string | undefined {
  if (typeof value === 'string') return value.length > 0 ? value : undefined;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

/** A finite number; decimal strings (OTLP int64 beyond 2^53, MLflow's JSON) are accepted. */
export function asNumber(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (typeof value === 'string' && /^\s*-?\d+(\.\d+)?([eE][+-]?\d+)?\s*$/.test(value)) {
    const n = Number(value);
    return Number.isFinite(n) ? n : undefined;
  }
  return undefined;
}

/** A token count or cost: finite and non-negative. */
export function asCount(value: unknown): number | undefined {
  const n = asNumber(value);
  return n !== undefined && n >= 0 ? n : undefined;
}

export function attrString(span: Span, key: string): string | undefined {
  return asString(span.attributes[key]);
}

export function attrNumber(span: Span, key: string): number | undefined {
  return asCount(span.attributes[key]);
}

/** The first present string among several keys. */
export function firstString(span: Span, keys: readonly string[]): string | undefined {
  for (const key of keys) {
    const v = attrString(span, key);
    if (v !== undefined) return v;
  }
  return undefined;
}

export function hasPrefix(span: Span, prefix: string): boolean {
  for (const key in span.attributes) if (key.startsWith(prefix)) return true;
  return false;
}

// ---------------------------------------------------------------------------------------------
// JSON

/**
 * A parse, and the messages read from it once asked (null: not messages): a message list resent
 * by every model call of a trace is then read into messages once, like it is parsed once.
 */
export type JsonParse = { ok: true; value: unknown; messages: Message[] | null | undefined };
type Parsed = JsonParse | { ok: false };

/**
 * Parses made during one normalization, by text: frameworks repeat the whole message history on
 * many spans, and several readers look at one value. Parsed values are shared, so nothing here
 * or downstream mutates them. Texts under 64 characters (ids, numbers, short strings) parse about
 * as fast as they hash; a 200-character message list parses 3–4 times slower than a lookup, and
 * the ingest bench's model calls repeat theirs (512 kept those out).
 */
let parseCache: Map<string, Parsed> | undefined;
const CACHE_MIN_LENGTH = 64;

export function withParseCache<T>(fn: () => T): T {
  const outer = parseCache;
  parseCache = new Map();
  try {
    return fn();
  } finally {
    parseCache = outer;
  }
}

/** `JSON.parse` that reports failure instead of throwing. */
export function tryParse(text: string): Parsed {
  const cacheable = parseCache !== undefined && text.length >= CACHE_MIN_LENGTH;
  if (cacheable) {
    const hit = parseCache?.get(text);
    if (hit) return hit;
  }
  let out: Parsed;
  try {
    out = { ok: true, value: JSON.parse(text), messages: undefined };
  } catch {
    out = { ok: false };
  }
  if (cacheable) parseCache?.set(text, out);
  return out;
}

/**
 * JSON sniffing (rule 0.2.3): text that starts with `{` or `[` is parsed when it parses; anything
 * else, and unparsable text (often truncated by an SDK length limit), stays as it is.
 */
export function sniffJson(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const parsed = sniffParse(value);
  return parsed === undefined ? value : parsed.value;
}

/** The parse `sniffJson` makes of a text; undefined when the text stays as it is. */
export function sniffParse(value: string): JsonParse | undefined {
  const text = value.trim();
  const first = text[0];
  if (first !== '{' && first !== '[') return undefined;
  const parsed = tryParse(text);
  return parsed.ok ? parsed : undefined;
}

/**
 * An attribute documented as JSON: a JSON string (sniffed) or a structured value (rule 0.2.2).
 * Structured values are made JSON-safe.
 */
export function jsonAttr(span: Span, key: string): unknown {
  const v = span.attributes[key];
  if (v === undefined) return undefined;
  if (typeof v === 'string') return sniffJson(v);
  return jsonSafe(v);
}

/**
 * A value that is JSON-encoded whatever its type (MLflow writes `"LLM"` with the quotes): parsed
 * once, and once more when the result is itself JSON text of an object or list (rule 0.2.4).
 */
export function decodeJsonEncoded(value: unknown): unknown {
  if (typeof value !== 'string') return value === undefined ? undefined : jsonSafe(value);
  const parsed = tryParse(value);
  if (!parsed.ok) return value;
  return typeof parsed.value === 'string' ? sniffJson(parsed.value) : parsed.value;
}

/** A value parsed from text when it is any JSON (used only where a value is documented JSON). */
export function parseAnyJson(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const parsed = tryParse(value.trim());
  return parsed.ok ? parsed.value : value;
}

/**
 * A raw argument string: strings stay exactly as they are (malformed JSON is evaluable), except a
 * JSON string literal that wraps the arguments once more; structured values are serialized.
 */
export function rawArguments(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') {
    const text = value.trim();
    if (text.startsWith('"')) {
      const parsed = tryParse(text);
      if (parsed.ok && typeof parsed.value === 'string') return parsed.value;
    }
    return value;
  }
  return JSON.stringify(isPlainJson(value, 0) ? value : jsonSafe(value));
}

/**
 * Whether `jsonSafe` would give back an equal copy (plain JSON data, as parsed, not too deep):
 * such a value is serialized as it is instead of copied first.
 */
function isPlainJson(value: unknown, depth: number): boolean {
  if (depth > 64) return false;
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (typeof value !== 'object') return false;
  if (Array.isArray(value)) {
    for (const v of value) if (!isPlainJson(v, depth + 1)) return false;
    return true;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  const object = value as JsonObject;
  // A copy loses an own `__proto__` key (assigning it sets the prototype): copy those.
  for (const k in object) if (k === '__proto__' || !isPlainJson(object[k], depth + 1)) return false;
  return true;
}

/** JSON with object keys sorted at every level, so equal values serialize equally. */
export function canonicalJson(value: unknown): string {
  const sort = (v: unknown, depth: number): unknown => {
    if (depth > 64) return null;
    if (Array.isArray(v)) return v.map((x) => sort(x, depth + 1));
    if (!isObject(v)) return v;
    const out: JsonObject = {};
    for (const k of Object.keys(v).sort()) out[k] = sort(v[k], depth + 1);
    return out;
  };
  return JSON.stringify(sort(value, 0)) ?? 'undefined';
}

// ---------------------------------------------------------------------------------------------
// Indexed flattened keys (rule 0.2.6)

/**
 * Groups keys `<prefix>.<N>.<rest>` by N, sorted numerically, gaps tolerated. Each entry holds the
 * remaining key paths (`message.role`, `message.tool_calls.0.tool_call.id`, …) and their values.
 */
export function indexed(
  attributes: Attributes,
  prefix: string,
): Array<{ index: number; fields: Map<string, AttributeValue> }> {
  const groups = new Map<number, Map<string, AttributeValue>>();
  const head = `${prefix}.`;
  for (const key in attributes) {
    if (!key.startsWith(head)) continue;
    let end = head.length;
    while (end < key.length && end - head.length < 7) {
      const c = key.charCodeAt(end);
      if (c < 48 || c > 57) break;
      end++;
    }
    if (end === head.length || (end < key.length && key[end] !== '.')) continue;
    const index = Number(key.slice(head.length, end));
    let fields = groups.get(index);
    if (!fields) {
      fields = new Map();
      groups.set(index, fields);
    }
    fields.set(end < key.length ? key.slice(end + 1) : '', attributes[key] as AttributeValue);
  }
  return [...groups.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([index, fields]) => ({ index, fields }));
}

/** The same grouping over an already selected field map (nested lists inside one entry). */
export function indexedFields(
  fields: Map<string, AttributeValue>,
  prefix: string,
): Array<{ index: number; fields: Map<string, AttributeValue> }> {
  const obj: Attributes = {};
  for (const [k, v] of fields) obj[k] = v;
  return indexed(obj, prefix);
}

export function hasIndexed(attributes: Attributes, prefix: string): boolean {
  const head = `${prefix}.`;
  for (const key in attributes) {
    if (key.startsWith(head) && /^\d/.test(key.slice(head.length))) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Python literals (rule 0.2.5): `{'city': 'Paris'}` from LangChain's str(dict). Parsed by a
// small safe reader of dict/list/tuple/str/number/True/False/None literals; nothing is evaluated.

export function parsePythonLiteral(text: string): { ok: true; value: unknown } | { ok: false } {
  let i = 0;
  const s = text.trim();
  const ws = () => {
    while (i < s.length && /\s/.test(s[i] ?? '')) i++;
  };
  const fail = (): never => {
    throw new SyntaxError('not a python literal');
  };
  const value = (depth: number): unknown => {
    if (depth > 64) fail();
    ws();
    const c = s[i];
    if (c === '{') return container('}', depth, true);
    if (c === '[') return container(']', depth, false);
    if (c === '(') return container(')', depth, false);
    if (c === "'" || c === '"') return str(c);
    const m = /^(-?\d+(\.\d+)?([eE][+-]?\d+)?|True|False|None)/.exec(s.slice(i));
    if (!m) return fail();
    i += m[0].length;
    if (m[0] === 'True') return true;
    if (m[0] === 'False') return false;
    if (m[0] === 'None') return null;
    return Number(m[0]);
  };
  const str = (quote: string): string => {
    i++;
    let out = '';
    while (i < s.length) {
      const c = s[i++];
      if (c === quote) return out;
      if (c === '\\') {
        const e = s[i++];
        const map: Record<string, string> = {
          n: '\n',
          t: '\t',
          r: '\r',
          '\\': '\\',
          "'": "'",
          '"': '"',
        };
        if (e === 'u' || e === 'x') {
          const len = e === 'u' ? 4 : 2;
          const hex = s.slice(i, i + len);
          if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== len) fail();
          out += String.fromCharCode(Number.parseInt(hex, 16));
          i += len;
        } else if (e !== undefined && map[e] !== undefined) out += map[e];
        else fail();
      } else out += c;
    }
    return fail();
  };
  const container = (close: string, depth: number, dict: boolean): unknown => {
    i++;
    const list: unknown[] = [];
    const obj: JsonObject = {};
    ws();
    if (s[i] === close) {
      i++;
      return dict ? obj : list;
    }
    for (;;) {
      const key = value(depth + 1);
      if (dict) {
        ws();
        if (s[i] !== ':') fail();
        i++;
        if (typeof key !== 'string' && typeof key !== 'number') fail();
        obj[String(key)] = value(depth + 1);
      } else list.push(key);
      ws();
      if (s[i] === ',') {
        i++;
        ws();
        if (s[i] === close) {
          i++;
          return dict ? obj : list;
        }
        continue;
      }
      if (s[i] === close) {
        i++;
        return dict ? obj : list;
      }
      fail();
    }
  };
  try {
    const v = value(0);
    ws();
    if (i !== s.length) return { ok: false };
    return { ok: true, value: v };
  } catch {
    return { ok: false };
  }
}

// ---------------------------------------------------------------------------------------------
// Envelopes

/**
 * Unwraps the argument envelopes that decorators put around a function's input: `{args, kwargs}`
 * (Langfuse, Traceloop) → kwargs when there are no args, the single arg when there are no kwargs;
 * LangChain's `{inputs | input_str | outputs | output, tags, metadata, kwargs}` → the payload.
 */
export function unwrapEnvelope(value: unknown): unknown {
  if (!isObject(value)) return value;
  const keys = Object.keys(value);
  if (keys.includes('args') && keys.includes('kwargs') && keys.length === 2) {
    const args = value.args;
    const kwargs = value.kwargs;
    const kwargsEmpty = !isObject(kwargs) || Object.keys(kwargs).length === 0;
    const argsEmpty = !Array.isArray(args) || args.length === 0;
    if (argsEmpty && !kwargsEmpty) return kwargs;
    if (!argsEmpty && kwargsEmpty && Array.isArray(args) && args.length === 1) return args[0];
    if (argsEmpty && kwargsEmpty) return undefined;
    return value;
  }
  const meta = new Set(['tags', 'metadata', 'kwargs', 'run_id', 'parent_run_id']);
  for (const payload of ['input_str', 'inputs', 'outputs', 'output']) {
    if (payload in value && keys.every((k) => k === payload || meta.has(k)) && keys.length > 1) {
      return value[payload];
    }
  }
  return value;
}

/**
 * Raw arguments of a decorated function's input attribute: the attribute text itself when it is
 * not an envelope, else the unwrapped payload serialized (an empty envelope is `{}`).
 */
export function envelopeArguments(raw: unknown): string | undefined {
  if (raw === undefined) return undefined;
  const parsed = typeof raw === 'string' ? parseAnyJson(raw) : jsonSafe(raw);
  const unwrapped = unwrapEnvelope(parsed);
  if (unwrapped === parsed) return rawArguments(raw);
  return rawArguments(unwrapped === undefined ? {} : unwrapped);
}

/** A dict with exactly one key unwrapped to its value (`{"question": …}` → …). */
export function unwrapSingleKey(value: unknown): unknown {
  if (isObject(value)) {
    const keys = Object.keys(value);
    if (keys.length === 1) return value[keys[0] as string];
  }
  return value;
}

// ---------------------------------------------------------------------------------------------
// Time (rule 0.2.8): nanoseconds stay exact, as BigInt or as their decimal text.

/**
 * Unix nanoseconds as decimal text without leading zeros, or undefined when not digits: exact
 * like a BigInt, compared by `compareNanos`, and no allocation for the times spans carry (a
 * BigInt per span time was a share of normalization's CPU and bytes).
 */
export function nanosText(text: string): string | undefined {
  if (typeof text !== 'string' || text.length === 0 || text.length > 30) return undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 48 || c > 57) return undefined;
  }
  if (text.length === 1 || text.charCodeAt(0) !== 48) return text;
  let at = 0;
  while (at < text.length - 1 && text.charCodeAt(at) === 48) at++;
  return text.slice(at);
}

/** The order of two `nanosText` values: negative, zero or positive like `a - b`. */
export function compareNanos(a: string, b: string): number {
  if (a.length !== b.length) return a.length - b.length;
  return a < b ? -1 : a > b ? 1 : 0;
}

export function nanos(text: string): bigint | undefined {
  if (typeof text !== 'string' || text.length === 0 || text.length > 30) return undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 48 || c > 57) return undefined;
  }
  return BigInt(text);
}

const MAX_RFC3339_MS = 253_402_300_799_999;
const MS_PER_DAY = 86_400_000;

/**
 * RFC 3339 of a nanosecond string, or undefined for zero, garbage or out-of-range values. The
 * milliseconds are read from the digits but the last six and the text is written by hand:
 * `BigInt` division and `Date#toISOString` (about 2 µs a call in Node 22) were 6% of
 * normalization, two calls per step.
 */
export function isoOf(text: string): string | undefined {
  if (typeof text !== 'string' || text.length === 0 || text.length > 30) return undefined;
  const msDigits = text.length - 6;
  let ms = 0;
  let zero = true;
  for (let i = 0; i < text.length; i++) {
    const digit = text.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return undefined;
    if (digit !== 0) zero = false;
    // Inexact beyond 2^53, but by then far beyond the range, which only grows.
    if (i < msDigits) ms = ms * 10 + digit;
  }
  // RFC 3339 has four-digit years; later instants would print as `+010000-…`.
  if (zero || ms > MAX_RFC3339_MS) return undefined;
  return rfc3339(ms);
}

/** The date part of the last day written: a trace's times mostly fall on one day. */
let lastDay = -1;
let lastDate = '';
/** The text up to the milliseconds of the last second written: steps often share one. */
let lastSecond = -1;
let lastPrefix = '';

/** `Date#toISOString` of a time in 0 … MAX_RFC3339_MS. */
function rfc3339(ms: number): string {
  const second = Math.floor(ms / 1000);
  const millis = ms - second * 1000;
  if (second !== lastSecond) {
    lastPrefix = secondPrefix(ms);
    lastSecond = second;
  }
  return `${lastPrefix}${millis < 10 ? '00' : millis < 100 ? '0' : ''}${millis}Z`;
}

/** `YYYY-MM-DDTHH:MM:SS.` of a time. */
function secondPrefix(ms: number): string {
  const days = Math.floor(ms / MS_PER_DAY);
  if (days !== lastDay) {
    lastDate = civilDate(days);
    lastDay = days;
  }
  let rest = ms - days * MS_PER_DAY;
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const seconds = Math.floor(rest / 1000);
  return `${lastDate}T${pad(hours, 2)}:${pad(minutes, 2)}:${pad(seconds, 2)}.`;
}

/** `YYYY-MM-DD` of days since 1970-01-01 (H. Hinnant's days-to-civil). */
function civilDate(days: number): string {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor(
    (doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365,
  );
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  return `${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}`;
}

function pad(n: number, width: number): string {
  const s = String(n);
  return s.length >= width ? s : '0'.repeat(width - s.length) + s;
}

/** Milliseconds between two nanosecond values, never negative. */
export function durationMs(start: string, end: string): number {
  if (compareNanos(end, start) <= 0) return 0;
  return Number(BigInt(end) - BigInt(start)) / 1e6;
}
