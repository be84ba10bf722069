/**
 * 64-bit integers from two unsigned 32-bit halves, without BigInt on the hot path: times become
 * exact decimal strings, int64 attribute values become numbers when they are safe integers.
 */

const TWO_32 = 4294967296;
const E9 = 1_000_000_000;

function pad9(n: number): string {
  const s = String(n);
  return s.length === 9 ? s : '000000000'.slice(s.length) + s;
}

// `hi * 2^32` split at 10^9, for the last high half seen: nanosecond times of one request share
// it (it changes every 4.3 s), so a time costs one division instead of a BigInt.
let cachedHi = -1;
let cachedUpper = 0;
let cachedLower = 0;

/** Exact decimal string of the unsigned 64-bit value `hi * 2^32 + lo`. */
export function uint64ToDecimal(lo: number, hi: number): string {
  if (hi <= 0x1fffff) return String(hi * TWO_32 + lo);
  if (hi !== cachedHi) {
    const big = BigInt(hi) << 32n;
    cachedUpper = Number(big / 1_000_000_000n);
    cachedLower = Number(big % 1_000_000_000n);
    cachedHi = hi;
  }
  // Both sums stay below 2^53: lower + lo < 10^9 + 2^32, upper < 2^64 / 10^9.
  const low = cachedLower + lo;
  const carry = Math.floor(low / E9);
  // The value is at least 2^53, so the part above 10^9 is never 0.
  return String(cachedUpper + carry) + pad9(low - carry * E9);
}

/** A signed 64-bit value (two's complement halves): a number when |v| ≤ 2^53-1, else a decimal string. */
export function int64Value(lo: number, hi: number): number | string {
  if ((hi & 0x80000000) === 0) {
    return hi <= 0x1fffff ? hi * TWO_32 + lo : uint64ToDecimal(lo, hi);
  }
  const nlo = (~lo + 1) >>> 0;
  const nhi = (~hi + (nlo === 0 ? 1 : 0)) >>> 0;
  return nhi <= 0x1fffff ? -(nhi * TWO_32 + nlo) : `-${uint64ToDecimal(nlo, nhi)}`;
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;
const SIGNED_DIGITS = /^[-+]?[0-9]+$/;
const UNSIGNED_DIGITS = /^\+?[0-9]+$/;

/**
 * An int64 from OTLP/JSON (a decimal string or a JSON number) normalised like the protobuf path;
 * undefined when it is not an integer in the int64 range.
 */
export function jsonInt64Value(v: unknown): number | string | undefined {
  if (typeof v === 'number') {
    if (!Number.isInteger(v)) return undefined;
    if (Number.isSafeInteger(v)) return v === 0 ? 0 : v;
    const big = BigInt(v);
    return big < INT64_MIN || big > INT64_MAX ? undefined : big.toString();
  }
  if (typeof v !== 'string' || v.length > 40 || !SIGNED_DIGITS.test(v)) return undefined;
  if (v.length <= 15) {
    const n = Number(v);
    return n === 0 ? 0 : n;
  }
  const big = BigInt(v);
  if (big < INT64_MIN || big > INT64_MAX) return undefined;
  const n = Number(big);
  return Number.isSafeInteger(n) ? n : big.toString();
}

const UINT64_MAX_DECIMAL = '18446744073709551615';

/** A fixed64 time from OTLP/JSON as an exact decimal string; undefined when not a uint64. */
export function jsonUint64Decimal(v: unknown): string | undefined {
  if (typeof v === 'number') {
    if (!Number.isInteger(v) || v < 0) return undefined;
    if (Number.isSafeInteger(v)) return String(v);
    const big = BigInt(v);
    return big > UINT64_MAX ? undefined : big.toString();
  }
  if (typeof v !== 'string' || v.length > 40 || !UNSIGNED_DIGITS.test(v)) return undefined;
  let digits = v.charCodeAt(0) === 43 ? v.slice(1) : v;
  if (digits.length > 1 && digits.charCodeAt(0) === 48) digits = digits.replace(/^0+(?=.)/, '');
  // Fewer than 20 digits always fit; 20 digits fit up to 2^64-1 (same length, so compare text).
  if (digits.length < 20 || (digits.length === 20 && digits <= UINT64_MAX_DECIMAL)) return digits;
  return undefined;
}
