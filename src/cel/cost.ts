/**
 * What one CEL evaluation may spend. @bufbuild/cel has no cost accounting, so it is added here
 * around the library: every function call is charged before it runs, by the sizes it works on
 * (output sizes computed first, so `replace` cannot build a gigabyte before it is stopped); every
 * macro is charged its list's size times the size of its loop body when it starts; an override's
 * value is charged before it is converted. Past the budget, the charge throws through the
 * interpreter (the library catches only inside a function's own body, and the charge runs around
 * it), so evaluation stops at once. The same prices, applied to sizes instead of values, give the
 * estimate an apply refuses with (estimate.ts). docs/policies.md, "Evaluation cost".
 */
import { type CelValue, isCelList, isCelMap } from '@bufbuild/cel';
import { programSize } from './regex-size.js';

/**
 * Units one evaluation may spend. A unit is about one step of the interpreter (one node of the
 * expression evaluated, roughly 0.05 to 0.1 µs): the budget holds one evaluation to about 10 to
 * 20 ms of CPU.
 */
export const MAX_EVALUATION_COST = 200_000;
/** Characters a unit pays for where native code reads, compares or copies text. */
export const CHARS_PER_UNIT = 8;
/** Characters a unit pays for where text is walked one character at a time in JavaScript. */
export const LOOP_CHARS_PER_UNIT = 2;
/**
 * Units a match of `replace` or `split` costs (found, then cut out); a list element copied,
 * joined or made costs one.
 */
export const MATCH_COST = 2;
/**
 * Units a number or date formatter costs: `%f` in `format` and a time zone name in `getHours`
 * and the other accessors build one per call (about 0.2 ms).
 */
export const FORMATTER_COST = 5000;
/**
 * Characters times pattern size a unit pays for in `matches`: RE2 is linear in the text, but by
 * a factor of the pattern's compiled size when its fast automaton gives up (a 23-character
 * pattern such as `(a.{0,10}){5}z` takes seconds on a megabyte).
 */
export const REGEX_STEPS_PER_UNIT = 8;

export function textCost(chars: number): number {
  return Math.ceil(chars / CHARS_PER_UNIT);
}

export function loopCost(chars: number): number {
  return Math.ceil(chars / LOOP_CHARS_PER_UNIT);
}

/** The `%f` and `%.Nf` placeholders of a format string (`%%` is a plain `%`). */
export function fixedPlaceholders(format: string): number {
  let n = 0;
  for (let at = format.indexOf('%'); at >= 0; at = format.indexOf('%', at + 1)) {
    if (format[at + 1] === '%') {
      at++;
      continue;
    }
    let end = at + 1;
    if (format[end] === '.') {
      end++;
      while (format[end] !== undefined && format[end]! >= '0' && format[end]! <= '9') end++;
    }
    if (format[end] === 'f') n++;
  }
  return n;
}

export function regexCost(textChars: number, programSize: number): number {
  return Math.ceil(((textChars + 1) * programSize) / REGEX_STEPS_PER_UNIT);
}

// The meter

class CostExceeded extends Error {}

/** One instance: hostile expressions throw it often, and a stack trace would cost each time. */
const EXCEEDED = new CostExceeded('evaluation cost exceeded the budget');
let left = 0;
let over = false;

export function charge(units: number): void {
  left -= units;
  if (left < 0) {
    over = true;
    throw EXCEEDED;
  }
}

/** What `metered` gives when the budget ran out. */
export const OVER_BUDGET: unique symbol = Symbol('over budget');

/**
 * Runs `fn(arg)` (one evaluation, synchronous) with a fresh budget; OVER_BUDGET when it ran out,
 * also when the library turned the thrown charge into an error value.
 */
export function metered<A, T>(fn: (arg: A) => T, arg: A): T | typeof OVER_BUDGET {
  const savedLeft = left;
  const savedOver = over;
  left = MAX_EVALUATION_COST;
  over = false;
  try {
    const value = fn(arg);
    return over ? OVER_BUDGET : value;
  } catch (err) {
    if (err === EXCEEDED) return OVER_BUDGET;
    throw err;
  } finally {
    left = savedLeft;
    over = savedOver;
  }
}

// Sizes of values

export function chars(v: CelValue | undefined): number {
  return typeof v === 'string' || v instanceof Uint8Array ? v.length : 0;
}

function text(v: CelValue | undefined): string {
  return typeof v === 'string' ? v : '';
}

export function items(v: CelValue | undefined): number {
  return isCelList(v) || isCelMap(v) ? v.size : 0;
}

const deepCache = new WeakMap<object, number>();

/**
 * What walking the whole value costs (equality, `in`, `format`, JSON): text by its length, lists
 * and maps by their elements, a shared part each time it appears. The sum is kept per list or
 * map, so working it out walks each of them once.
 */
export function deepCost(v: CelValue | undefined): number {
  if (typeof v === 'string' || v instanceof Uint8Array) return textCost(v.length);
  if (!isCelList(v) && !isCelMap(v)) return 0;
  let d = deepCache.get(v);
  if (d !== undefined) return d;
  d = v.size;
  if (isCelList(v)) for (const e of v) d += deepCost(e);
  else for (const [k, e] of v) d += deepCost(k as CelValue) + deepCost(e);
  deepCache.set(v, d);
  return d;
}

export function codePoints(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xdc00 && c <= 0xdfff && i > 0) {
      const p = s.charCodeAt(i - 1);
      if (p >= 0xd800 && p <= 0xdbff) n--;
    }
  }
  return n;
}

/** Matches found per charge while counting them. */
const COUNT_BATCH = 64;

/**
 * Matches of `old` that `replace` or `split` act on, up to `limit` (an empty `old` matches around
 * every code point), charged MATCH_COST each as they are found, so counting stops with the budget.
 */
function occurrences(s: string, old: string, limit: number): number {
  if (old === '') {
    charge(loopCost(s.length));
    const n = Math.min(codePoints(s) + 1, limit);
    charge(n * MATCH_COST);
    return n;
  }
  let n = 0;
  for (let at = s.indexOf(old); at >= 0 && n < limit; at = s.indexOf(old, at + old.length)) {
    if (++n % COUNT_BATCH === 0) charge(COUNT_BATCH * MATCH_COST);
  }
  charge((n % COUNT_BATCH) * MATCH_COST);
  return n;
}

/** `replace`'s and `split`'s count argument: absent or negative is every match. */
export function countLimit(n: CelValue | undefined): number {
  return typeof n === 'bigint' && n >= 0n ? Number(n) : Number.POSITIVE_INFINITY;
}

// Prices of function calls

export type Pricing = (target: CelValue | undefined, args: readonly CelValue[]) => number;

export const one: Pricing = () => 1;

/** Reads its target and arguments in native code: `contains`, conversions. */
const scan: Pricing = (target, args) => {
  let n = chars(target);
  for (const a of args) n += chars(a);
  return 1 + textCost(n);
};

/** Builds a string a character at a time: `lowerAscii`, `upperAscii`. */
const walk: Pricing = (target) => 1 + loopCost(chars(target));

/** `size` counts a string's code points; of anything else it is read off. */
const size: Pricing = (target, [arg]) => 1 + textCost(text(target ?? arg).length);

/** Reads only its arguments: `startsWith` and `endsWith` look at the start or end of the target. */
const argsScan: Pricing = (_target, args) => scan(undefined, args);

/** A timestamp accessor given a time zone name builds a date formatter for it. */
const zoned: Pricing = (_target, [tz]) =>
  tz === undefined ? 1 : 1 + textCost(chars(tz)) + FORMATTER_COST;

/** Equality and ordering stop at the smaller side; numbers and bools cost nothing more. */
const compare: Pricing = (_target, [l, r]) =>
  sized(l) && sized(r) ? 1 + Math.min(deepCost(l), deepCost(r)) : 1;

function sized(v: CelValue | undefined): boolean {
  return typeof v === 'string' || (typeof v === 'object' && v !== null);
}

export const PRICES: Readonly<Record<string, Pricing>> = {
  '_+_': (_target, [l, r]) =>
    isCelList(l) ? 1 + items(l) + items(r) : 1 + textCost(chars(l) + chars(r)),
  '_==_': compare,
  '_!=_': compare,
  '_<_': compare,
  '_<=_': compare,
  '_>_': compare,
  '_>=_': compare,
  '@in': (_target, [x, c]) => {
    if (!isCelList(c)) return 1 + textCost(chars(x));
    // Each element is compared with `x`: no compare costs more than `x` or than the element.
    const bound = c.size * (1 + deepCost(x));
    return 1 + (bound <= 2 * c.size ? bound : Math.min(bound, deepCost(c)));
  },
  size,
  lowerAscii: walk,
  upperAscii: walk,
  contains: scan,
  indexOf: scan,
  lastIndexOf: scan,
  trim: scan,
  string: scan,
  bytes: scan,
  int: scan,
  uint: scan,
  double: scan,
  bool: scan,
  timestamp: scan,
  duration: scan,
  startsWith: argsScan,
  endsWith: argsScan,
  substring: (target, [start, end]) => {
    const from = typeof start === 'bigint' ? Number(start) : 0;
    const to = typeof end === 'bigint' ? Number(end) : chars(target);
    return 1 + textCost(Math.max(0, Math.min(to, chars(target)) - from));
  },
  matches: (target, [pattern]) => {
    const p = text(pattern);
    charge(1 + textCost(p.length));
    return regexCost(chars(target), programSize(p));
  },
  replace: (target, [old, rep, n]) => {
    const s = text(target);
    const o = text(old);
    charge(1 + textCost(s.length + o.length));
    const count = occurrences(s, o, countLimit(n));
    return textCost(s.length + count * Math.max(0, chars(rep) - o.length));
  },
  split: (target, [sep, n]) => {
    const s = text(target);
    const by = text(sep);
    charge(1 + textCost(s.length + by.length));
    if (by === '') return s.length;
    occurrences(s, by, countLimit(n));
    return 1;
  },
  join: (target, [sep]) => {
    charge(1 + items(target));
    let n = 0;
    if (isCelList(target)) for (const e of target) n += chars(e) + chars(sep);
    return textCost(n);
  },
  format: (target, [list]) =>
    1 + textCost(chars(target)) + fixedPlaceholders(text(target)) * FORMATTER_COST + deepCost(list),
  getSeconds: zoned,
  getMinutes: zoned,
  getHours: zoned,
  getMilliseconds: zoned,
  getFullYear: zoned,
  getMonth: zoned,
  getDate: zoned,
  getDayOfMonth: zoned,
  getDayOfWeek: zoned,
  getDayOfYear: zoned,
};
