/**
 * What one CEL evaluation may spend. @bufbuild/cel has no cost accounting, so it is added here
 * around the library: every function call is charged before it runs, by the sizes it works on
 * (output sizes computed first, so `replace` cannot build a gigabyte before it is stopped); every
 * macro is charged its list's size times the size of its loop body when it starts; an override's
 * value is charged before it is converted. Past the budget, the charge throws through the
 * interpreter (the library catches only inside a function's own body, and the charge runs around
 * it), so evaluation stops at once. The same prices, applied to sizes instead of values, give the
 * estimate an apply refuses with (cel-estimate.ts). docs/policies.md, "Evaluation cost".
 */
import {
  type CelEnv,
  CelScalar,
  type CelValue,
  celFunc,
  celList,
  celMethod,
  celUint,
  isCelList,
  isCelMap,
  listType,
  type parse,
} from '@bufbuild/cel';

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

// ---------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------
// Sizes of values

function chars(v: CelValue | undefined): number {
  return typeof v === 'string' || v instanceof Uint8Array ? v.length : 0;
}

function text(v: CelValue | undefined): string {
  return typeof v === 'string' ? v : '';
}

function items(v: CelValue | undefined): number {
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

function codePoints(s: string): number {
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
function countLimit(n: CelValue | undefined): number {
  return typeof n === 'bigint' && n >= 0n ? Number(n) : Number.POSITIVE_INFINITY;
}

// ---------------------------------------------------------------------------------------------
// RE2 program size

/** What a character class or `.` costs: a range test over UTF-8 bytes is several instructions. */
const CLASS_SIZE = 8;
/** `\pL` and friends compile to hundreds of byte ranges. */
const UNICODE_CLASS_SIZE = 128;
/** RE2 refuses programs beyond its memory limit (8 MiB by default) near this size. */
export const MAX_PROGRAM_SIZE = 500_000;
/** RE2 refuses patterns nested deeper than this; the scan stops there too (it recurses). */
const MAX_PATTERN_DEPTH = 1000;

const programSizes = new Map<string, number>();

/**
 * An upper estimate of the size of the program RE2 compiles a pattern to: atoms, with counted
 * repetitions multiplying what they repeat (`x{2,50}` is 50 copies). An invalid pattern gets an
 * estimate too; RE2 refuses it when it runs.
 */
export function programSize(pattern: string): number {
  let size = programSizes.get(pattern);
  if (size === undefined) {
    size = Math.min(new PatternScan(pattern).alternation(), MAX_PROGRAM_SIZE);
    if (programSizes.size >= 256) programSizes.clear();
    programSizes.set(pattern, size);
  }
  return size;
}

class PatternScan {
  private i = 0;
  private depth = 0;
  constructor(private readonly p: string) {}

  alternation(): number {
    if (++this.depth > MAX_PATTERN_DEPTH) return MAX_PROGRAM_SIZE;
    let size = this.sequence();
    while (this.p[this.i] === '|') {
      this.i++;
      size += this.sequence() + 1;
    }
    this.depth--;
    return size;
  }

  private sequence(): number {
    let size = 0;
    while (this.i < this.p.length && this.p[this.i] !== '|' && this.p[this.i] !== ')') {
      size += this.repeated(this.atom());
      if (size > MAX_PROGRAM_SIZE) return size;
    }
    return size;
  }

  private atom(): number {
    const p = this.p;
    const c = p[this.i++];
    if (c === '(') {
      if (p[this.i] === '?') {
        while (this.i < p.length && !':)>'.includes(p[this.i] as string)) this.i++;
        // `(?i)` sets flags and matches nothing; `(?P<name>…)` and `(?:…)` group.
        if (p[this.i] === ')') {
          this.i++;
          return 0;
        }
        this.i++;
      }
      const inner = this.alternation();
      if (p[this.i] === ')') this.i++;
      return inner + 1;
    }
    if (c === '[') {
      if (p[this.i] === '^') this.i++;
      if (p[this.i] === ']') this.i++;
      while (this.i < p.length && p[this.i] !== ']') {
        if (p[this.i] === '\\') this.i++;
        else if (p.startsWith('[:', this.i)) this.i = Math.max(p.indexOf(':]', this.i + 2), this.i);
        this.i++;
      }
      this.i++;
      return CLASS_SIZE;
    }
    if (c === '\\') return this.escape();
    return c === '.' ? CLASS_SIZE : 1;
  }

  private escape(): number {
    const p = this.p;
    const c = p[this.i++];
    if (c === 'p' || c === 'P') {
      if (p[this.i] === '{')
        this.i = p.indexOf('}', this.i) < 0 ? p.length : p.indexOf('}', this.i) + 1;
      else this.i++;
      return UNICODE_CLASS_SIZE;
    }
    if (c === 'Q') {
      const end = p.indexOf('\\E', this.i);
      const literal = (end < 0 ? p.length : end) - this.i;
      this.i = end < 0 ? p.length : end + 2;
      return literal;
    }
    return c !== undefined && 'dDwWsS'.includes(c) ? CLASS_SIZE : 1;
  }

  /** Applies the quantifiers after an atom of this size. */
  private repeated(size: number): number {
    const p = this.p;
    for (;;) {
      const c = p[this.i];
      if (c === '*' || c === '+' || c === '?') {
        this.i++;
        size += 1;
      } else if (c === '{') {
        const m = /^\{(\d+)(,(\d*))?\}/.exec(p.slice(this.i, this.i + 16));
        if (m === null) return size;
        this.i += m[0].length;
        const min = Number(m[1]);
        const max = m[2] === undefined ? min : m[3] === '' ? min + 1 : Number(m[3]);
        size = Math.max(min, max, 1) * (size + 1);
      } else return size;
      if (p[this.i] === '?') this.i++;
      if (size > MAX_PROGRAM_SIZE) return size;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Prices of function calls

type Pricing = (target: CelValue | undefined, args: readonly CelValue[]) => number;

const one: Pricing = () => 1;

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

const PRICES: Readonly<Record<string, Pricing>> = {
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

// ---------------------------------------------------------------------------------------------
// Implementations replacing the library's where it is slow or unbounded

/**
 * The library's `replace` rebuilt the string per match (quadratic); this one is linear, with
 * cel-go's semantics.
 */
function replace(this: string, old: string, rep: string, n?: bigint): string {
  let limit = countLimit(n);
  if (limit === 0) return this;
  if (old === '') {
    const parts: string[] = [];
    // As in cel-go (Go's strings.Replace): an empty `old` matches before every code point and
    // at the end.
    let i = 0;
    while (limit-- > 0) {
      parts.push(rep);
      if (i >= this.length) return parts.join('') + this.slice(i);
      const step = this.codePointAt(i)! > 0xffff ? 2 : 1;
      parts.push(this.slice(i, i + step));
      i += step;
    }
    return parts.join('') + this.slice(i);
  }
  let end = this.length;
  if (limit !== Number.POSITIVE_INFINITY) {
    end = 0;
    for (let at = this.indexOf(old); at >= 0 && limit-- > 0; at = this.indexOf(old, end)) {
      end = at + old.length;
    }
  }
  // `$` in a replacement string is a pattern (`$&`) to replaceAll; `$$` is a plain `$`.
  return this.slice(0, end).replaceAll(old, rep.replaceAll('$', '$$$$')) + this.slice(end);
}

const CHUNK = 4096;

/** Shifts the code units in [lo, hi] by `delta`; the library appended one character at a time. */
function shiftAscii(s: string, lo: number, hi: number, delta: number): string {
  let first = 0;
  while (first < s.length) {
    const c = s.charCodeAt(first);
    if (c >= lo && c <= hi) break;
    first++;
  }
  if (first === s.length) return s;
  const parts = [s.slice(0, first)];
  const codes: number[] = [];
  for (let start = first; start < s.length; start += CHUNK) {
    codes.length = 0;
    const end = Math.min(start + CHUNK, s.length);
    for (let i = start; i < end; i++) {
      const c = s.charCodeAt(i);
      codes.push(c >= lo && c <= hi ? c + delta : c);
    }
    parts.push(String.fromCharCode(...codes));
  }
  return parts.join('');
}

function stringSize(s: string): bigint {
  return BigInt(codePoints(s));
}

/** Longer integer text, past its sign, base prefix and leading zeros, is out of range. */
const LONGEST_INTEGER_TEXT = 100;

/**
 * Integer text as BigInt reads it (whitespace, sign, `0x`, leading zeros), without BigInt's
 * quadratic reading of long text (a million digits took a quarter of a second): text too long to
 * be in range fails at once.
 */
function integer(s: string, kind: 'int' | 'uint'): bigint {
  let text = s;
  if (s.length > LONGEST_INTEGER_TEXT) {
    const head = /^(\s*[+-]?(?:0[xob])?)0*/i.exec(s)?.[1] ?? '';
    const digits = s.slice(head.length).replace(/^0+/, '');
    if (digits.trimEnd().length > LONGEST_INTEGER_TEXT) {
      throw new Error(`${kind} overflow during type conversion`);
    }
    text = head + (digits === '' ? '0' : digits);
  }
  const n = BigInt(text);
  const [min, max] = kind === 'int' ? [INT64_MIN, INT64_MAX] : [0n, UINT64_MAX];
  if (n < min || n > max) throw new Error(`${kind} overflow during type conversion`);
  return n;
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;

const { STRING, INT, UINT } = CelScalar;
const LIST = listType(CelScalar.DYN);

/** Overloads that replace the library's (same ids); the checker sees the same signatures. */
export const BOUNDED_FUNCS = [
  celMethod('replace', STRING, [STRING, STRING], STRING, replace),
  celMethod('replace', STRING, [STRING, STRING, INT], STRING, replace),
  celMethod('lowerAscii', STRING, [], STRING, function () {
    return shiftAscii(this, 65, 90, 32);
  }),
  celMethod('upperAscii', STRING, [], STRING, function () {
    return shiftAscii(this, 97, 122, -32);
  }),
  celMethod('size', STRING, [], INT, function () {
    return stringSize(this);
  }),
  celFunc('size', [STRING], INT, stringSize),
  celFunc('int', [STRING], INT, (s) => integer(s, 'int')),
  celFunc('uint', [STRING], UINT, (s) => celUint(integer(s, 'uint'))),
  // The library's concatenation is a view over both lists: each element read then walks every
  // earlier concatenation, so a chain of them cost its length times its depth.
  celFunc('_+_', [LIST, LIST], LIST, (l, r) => {
    const out: CelValue[] = [];
    for (let i = 0; i < l.size; i++) out.push(l.get(i) as CelValue);
    for (let i = 0; i < r.size; i++) out.push(r.get(i) as CelValue);
    return celList(out);
  }),
];

// ---------------------------------------------------------------------------------------------
// The metered environment

type FuncResolver = CelEnv['funcs'];
type FuncGroup = NonNullable<ReturnType<FuncResolver['find']>>;

/** Charges a macro's list size times its loop body's size, then gives the list back. */
export const RANGE = '@touchstone.range';
/** A map or filter macro's `accumulator + [element]`: appends in place (see `append`). */
export const APPEND = '@touchstone.append';

/** Lists an APPEND made, with their arrays: only the macro that builds one ever sees it. */
const accumulators = new WeakMap<object, CelValue[]>();

/**
 * `accu + [x]` made a new list per element (quadratic, and a view nested as deep as the list was
 * long). The accumulator of a macro is unreachable from the expression until the macro ends (its
 * name, `@result`, cannot be written), so it can grow in place, as cel-go's does.
 */
function append(accu: CelValue, tail: CelValue): CelValue | undefined {
  if (!isCelList(accu) || !isCelList(tail)) return undefined;
  charge(1 + tail.size);
  let array = accumulators.get(accu);
  let list = accu;
  if (array === undefined) {
    array = accu.size === 0 ? [] : [...accu];
    list = celList(array);
    accumulators.set(list, array);
  }
  for (const e of tail) array.push(e);
  return list;
}

function internalGroup(name: string, call: FuncGroup['call']): FuncGroup {
  return { name, call, *[Symbol.iterator]() {} };
}

const INTERNAL: Readonly<Record<string, FuncGroup>> = {
  [RANGE]: internalGroup(RANGE, (_id, _target, [range, weight]) => {
    charge(1 + items(range) * Number(weight));
    return range;
  }),
  [APPEND]: internalGroup(APPEND, (_id, _target, [accu, tail]) =>
    accu === undefined || tail === undefined ? undefined : append(accu, tail),
  ),
};

function meteredGroup(name: string, group: FuncGroup | undefined): FuncGroup | undefined {
  const internal = INTERNAL[name];
  if (internal !== undefined || group === undefined) return internal;
  const price = PRICES[name] ?? one;
  if (name === 'format') {
    return {
      name,
      [Symbol.iterator]: () => group[Symbol.iterator](),
      call(id, target, args) {
        charge(price(target, args));
        const out = group.call(id, target, args);
        charge(textCost(chars(out as CelValue)));
        return out;
      },
    };
  }
  return {
    name,
    [Symbol.iterator]: () => group[Symbol.iterator](),
    call(id, target, args) {
      charge(price(target, args));
      return group.call(id, target, args);
    },
  };
}

/**
 * The environment to plan with: the same, but every function group charged. `plan` reads only
 * the namespace, the registry and the functions of an environment.
 */
export function meteredEnv(env: CelEnv): CelEnv {
  const groups = new Map<string, FuncGroup | undefined>();
  const funcs = {
    [Symbol.iterator]: () => env.funcs[Symbol.iterator](),
    find(name: string): FuncGroup | undefined {
      if (!groups.has(name)) groups.set(name, meteredGroup(name, env.funcs.find(name)));
      return groups.get(name);
    },
  };
  return {
    namespace: env.namespace,
    registry: env.registry,
    variables: env.variables,
    funcs,
  } as unknown as CelEnv;
}

// ---------------------------------------------------------------------------------------------
// Macros: the rewrite that charges them

type Expr = ReturnType<typeof parse>['expr'];

function countNodes(e: Expr | undefined): number {
  if (e === undefined) return 0;
  const k = e.exprKind;
  switch (k.case) {
    case 'selectExpr':
      return 1 + countNodes(k.value.operand);
    case 'callExpr':
      return 1 + countNodes(k.value.target) + k.value.args.reduce((n, a) => n + countNodes(a), 0);
    // Making a list or map costs more than reading a node: an allocation, a key check per entry.
    case 'listExpr':
      return 2 + k.value.elements.reduce((n, a) => n + 1 + countNodes(a), 0);
    case 'structExpr':
      return (
        2 +
        k.value.entries.reduce(
          (n, en) =>
            n +
            3 +
            countNodes(en.value) +
            (en.keyKind.case === 'mapKey' ? countNodes(en.keyKind.value) : 0),
          0,
        )
      );
    case 'comprehensionExpr': {
      const c = k.value;
      return (
        1 +
        countNodes(c.iterRange) +
        countNodes(c.accuInit) +
        countNodes(c.loopCondition) +
        countNodes(c.loopStep) +
        countNodes(c.result)
      );
    }
    default:
      return 1;
  }
}

class MacroRewrite {
  private next: bigint;
  readonly positions: Record<string, number>;

  constructor(root: Expr, positions: Readonly<Record<string, number>>) {
    this.positions = { ...positions };
    let max = 0n;
    const visit = (e: Expr | undefined): void => {
      if (e === undefined) return;
      if (e.id > max) max = e.id;
      forEachChild(e, visit);
    };
    visit(root);
    this.next = max + 1n;
  }

  /** A new node at the source position of `at`. */
  private node(at: Expr, exprKind: Expr['exprKind']): Expr {
    const id = this.next++;
    this.positions[id.toString()] = this.positions[at.id.toString()] ?? 0;
    return { $typeName: 'cel.expr.Expr', id, exprKind };
  }

  private call(at: Expr, fn: string, args: Expr[]): Expr {
    return this.node(at, {
      case: 'callExpr',
      value: { $typeName: 'cel.expr.Expr.Call', function: fn, args },
    });
  }

  private int(at: Expr, value: number): Expr {
    return this.node(at, {
      case: 'constExpr',
      value: {
        $typeName: 'cel.expr.Constant',
        constantKind: { case: 'int64Value', value: BigInt(value) },
      },
    });
  }

  /** Rewrites in place, innermost macros first. */
  visit(e: Expr): void {
    forEachChild(e, (child) => this.visit(child));
    if (e.exprKind.case !== 'comprehensionExpr') return;
    const c = e.exprKind.value;
    if (c.iterRange === undefined || c.loopStep === undefined) return;
    const weight = Math.max(1, countNodes(c.loopCondition) + countNodes(c.loopStep));
    this.appends(c.loopStep, c.accuVar);
    c.iterRange = this.call(c.iterRange, RANGE, [c.iterRange, this.int(c.iterRange, weight)]);
  }

  /** `accu + [x]` in a macro's step (under `? :` for filter) becomes an in-place append. */
  private appends(e: Expr, accuVar: string): void {
    if (e.exprKind.case !== 'callExpr') return;
    const call = e.exprKind.value;
    const [l, r] = call.args;
    if (
      call.function === '_+_' &&
      l?.exprKind.case === 'identExpr' &&
      l.exprKind.value.name === accuVar &&
      r?.exprKind.case === 'listExpr'
    ) {
      call.function = APPEND;
      return;
    }
    if (call.function === '_?_:_') for (const a of call.args) this.appends(a, accuVar);
  }
}

function forEachChild(e: Expr, fn: (child: Expr) => void): void {
  const k = e.exprKind;
  switch (k.case) {
    case 'selectExpr':
      if (k.value.operand !== undefined) fn(k.value.operand);
      return;
    case 'callExpr':
      if (k.value.target !== undefined) fn(k.value.target);
      for (const a of k.value.args) fn(a);
      return;
    case 'listExpr':
      for (const a of k.value.elements) fn(a);
      return;
    case 'structExpr':
      for (const en of k.value.entries) {
        if (en.keyKind.case === 'mapKey') fn(en.keyKind.value);
        if (en.value !== undefined) fn(en.value);
      }
      return;
    case 'comprehensionExpr':
      for (const part of [
        k.value.iterRange,
        k.value.accuInit,
        k.value.loopCondition,
        k.value.loopStep,
        k.value.result,
      ]) {
        if (part !== undefined) fn(part);
      }
      return;
    default:
      return;
  }
}

/**
 * Rewrites a checked expression in place so its macros are charged (and map and filter append in
 * place); returns the source positions of the nodes, added ones included.
 */
export function meterMacros(
  root: Expr,
  positions: Readonly<Record<string, number>>,
): Record<string, number> {
  const rewrite = new MacroRewrite(root, positions);
  rewrite.visit(root);
  return rewrite.positions;
}
