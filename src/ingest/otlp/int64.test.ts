import { describe, expect, it } from 'vitest';
import { int64Value, jsonInt64Value, jsonUint64Decimal, uint64ToDecimal } from './int64.js';

function halves(v: bigint): [number, number] {
  return [Number(v & 0xffffffffn), Number((v >> 32n) & 0xffffffffn)];
}

/** Deterministic 64-bit values spread over every magnitude, plus the edges. */
function samples(): bigint[] {
  const out = [
    0n,
    1n,
    2n ** 32n - 1n,
    2n ** 32n,
    2n ** 53n - 1n,
    2n ** 53n,
    2n ** 63n - 1n,
    2n ** 63n,
    2n ** 64n - 1n,
  ];
  let x = 0x9e3779b97f4a7c15n;
  for (let i = 0; i < 20_000; i++) {
    x = (x * 6364136223846793005n + 1442695040888963407n) & (2n ** 64n - 1n);
    out.push(x >> BigInt(i % 64));
  }
  return out;
}

describe('64-bit conversions', () => {
  it('uint64ToDecimal is exact over the whole range', () => {
    for (const v of samples()) expect(uint64ToDecimal(...halves(v))).toBe(v.toString());
  });

  it('int64Value gives numbers up to 2^53-1 in magnitude and exact strings beyond', () => {
    for (const u of samples()) {
      const v = BigInt.asIntN(64, u);
      const expected = v >= -(2n ** 53n - 1n) && v <= 2n ** 53n - 1n ? Number(v) : v.toString();
      expect(int64Value(...halves(u))).toBe(expected);
    }
  });

  it('reads OTLP/JSON int64 and uint64 values from strings and numbers', () => {
    expect(jsonInt64Value('120')).toBe(120);
    expect(jsonInt64Value(120)).toBe(120);
    expect(jsonInt64Value('-0')).toBe(0);
    expect(jsonInt64Value('+5')).toBe(5);
    expect(jsonInt64Value('9007199254740993')).toBe('9007199254740993');
    expect(jsonInt64Value('-9223372036854775808')).toBe('-9223372036854775808');
    expect(jsonInt64Value('9223372036854775808')).toBeUndefined();
    expect(jsonInt64Value(2 ** 63)).toBeUndefined();
    expect(jsonInt64Value(1.5)).toBeUndefined();
    expect(jsonInt64Value('1.5')).toBeUndefined();
    expect(jsonInt64Value('')).toBeUndefined();
    expect(jsonInt64Value(true)).toBeUndefined();
    expect(jsonUint64Decimal('18446744073709551615')).toBe('18446744073709551615');
    expect(jsonUint64Decimal('18446744073709551616')).toBeUndefined();
    expect(jsonUint64Decimal('0001767225600000000000')).toBe('1767225600000000000');
    expect(jsonUint64Decimal('007')).toBe('7');
    expect(jsonUint64Decimal('0')).toBe('0');
    expect(jsonUint64Decimal('000')).toBe('0');
    expect(jsonUint64Decimal('+12')).toBe('12');
    expect(jsonUint64Decimal('99999999999999999999')).toBeUndefined();
    expect(jsonUint64Decimal(1767225600000000000)).toBe('1767225600000000000');
    expect(jsonUint64Decimal(-1)).toBeUndefined();
    expect(jsonUint64Decimal('-1')).toBeUndefined();
  });
});
