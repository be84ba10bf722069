/**
 * Implementations replacing the library's where it is slow or unbounded (`replace`, the ASCII
 * case functions, `size`, integer conversions, list concatenation), with the same signatures.
 */
import {
  CelScalar,
  type CelValue,
  celFunc,
  celList,
  celMethod,
  celUint,
  listType,
} from '@bufbuild/cel';
import { codePoints, countLimit } from './cost.js';
import { INT64_MAX, INT64_MIN, UINT64_MAX } from './types.js';

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
