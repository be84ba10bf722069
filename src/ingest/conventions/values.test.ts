import { describe, expect, it } from 'vitest';
import { compareNanos, durationMs, isoOf, jsonSafe, nanosText, rawArguments } from './values.js';

/** What isoOf answered when it divided a BigInt and called `Date#toISOString`. */
function reference(text: string): string | undefined {
  if (!/^\d{1,30}$/.test(text)) return undefined;
  const n = BigInt(text);
  if (n === 0n) return undefined;
  const ms = Number(n / 1_000_000n);
  if (ms > 253_402_300_799_999) return undefined;
  return new Date(ms).toISOString();
}

describe('isoOf', () => {
  it('writes what Date#toISOString writes, across the whole four-digit-year range', () => {
    const samples = [
      '1',
      '999999',
      '1000000',
      '0000001000000',
      '951782400000000000', // 2000-02-29
      '4107542400000000000', // 2100-03-01
      '1732700000123456789',
      '253402300799999000000', // 9999-12-31T23:59:59.999Z
      '253402300799999999999',
      '253402300800000000000', // year 10000: out of range
      '0',
      '000',
      '',
      '12a',
      '1'.repeat(31),
    ];
    // Every day boundary and leap rule: random instants from 1970 to 9999.
    let seed = 7;
    for (let i = 0; i < 20_000; i++) {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      const ms = Math.floor((seed / 2 ** 31) * 253_402_300_799_999);
      samples.push(`${ms}${String(seed % 1_000_000).padStart(6, '0')}`);
    }
    for (const text of samples) expect(isoOf(text), text).toBe(reference(text));
  });
});

describe('nanosecond times as text', () => {
  it('orders decimal texts as BigInt orders their values, leading zeros and lengths included', () => {
    const texts = [
      '0',
      '000',
      '7',
      '0010',
      '999999999999999999',
      '1732752000000000000',
      '1732752000000000001',
      '01732752000000000000',
      '9007199254740993000',
      '123456789012345678901234567890',
    ];
    for (const a of texts) {
      for (const b of texts) {
        const byText = Math.sign(compareNanos(nanosText(a) ?? '', nanosText(b) ?? ''));
        const big = BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0;
        expect(byText, `${a} vs ${b}`).toBe(big);
      }
    }
    expect(nanosText('000')).toBe('0');
    expect(nanosText('0010')).toBe('10');
  });

  it('refuses what is not decimal digits', () => {
    for (const bad of ['', '-1', '1e9', ' 1', '1.5', '1'.repeat(31)]) {
      expect(nanosText(bad)).toBeUndefined();
    }
  });

  it('gives durations exactly beyond 2^53 nanoseconds, never negative', () => {
    expect(durationMs('1732752000000000000', '1732752000123456789')).toBe(123.456789);
    expect(durationMs('9007199254740993000', '9007199254740993001')).toBe(0.000001);
    expect(durationMs('1732752000123456789', '1732752000000000000')).toBe(0);
    expect(durationMs('5', '5')).toBe(0);
  });
});

describe('rawArguments of structured values', () => {
  it('serializes as the JSON-safe copy does, whether or not the value is plain JSON', () => {
    let deep: unknown = { leaf: 1 };
    for (let i = 0; i < 70; i++) deep = { next: deep };
    const values: unknown[] = [
      { q: 'Lisbon hotels', n: 2, ok: true, none: null, list: [1, 'a', { b: [] }] },
      [{ a: 1 }, [2, [3]]],
      JSON.parse('{"__proto__": {"x": 1}, "y": 2}'),
      { bytes: new Uint8Array([1, 2, 3]) },
      { n: Number.NaN, inf: [Number.POSITIVE_INFINITY] },
      { big: 10n },
      { gone: undefined, list: [undefined] },
      { at: new Date(0) },
      Object.assign(Object.create(null), { a: 1 }),
      deep,
    ];
    for (const v of values) expect(rawArguments(v)).toBe(JSON.stringify(jsonSafe(v)));
  });
});
