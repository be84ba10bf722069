/**
 * The credit-card detector's decisions, made on digit tokens that RE2 found (runs of at least 13
 * digits, optionally with single spaces or dashes between digits). The spec's rule is "Luhn-valid
 * numbers, or numbers beside other digits with a real issuer prefix and that issuer's length;
 * digit runs over 64 digits, timestamps and mistyped cards are left readable". Exactly:
 *
 * - A token glued to a word (a letter, digit or `_` right beside it, or `-`/`.` joining it to one,
 *   as in `ORD-…`, `build.2026…`, `1.4111…`, hex ids) is part of an identifier: readable (the
 *   caller, pii.ts, refuses such tokens before they get here).
 * - Over 64 digits: readable.
 * - A whole number (an unseparated run, or a separated token grouped like a card: first group 4
 *   digits, middle groups 4 or 6, last group 1–6, one kind of separator) of 13–19 digits is
 *   redacted when Luhn-valid, except timestamps: 13/16/19 digits starting with `1` (Unix ms, µs,
 *   ns from 2001-09-09 to 2033-05-18; no issuer starts with 1), 14/17-digit compact date-times
 *   (`yyyyMMddHHmmss[SSS]`, 19xx/20xx) and ISBN-13 (978/979 with a valid ISBN check digit).
 * - A whole number with an issuer prefix and that issuer's length that fails Luhn is a mistyped
 *   card: readable.
 * - Otherwise, a window strictly inside the token ("beside other digits") is redacted when it
 *   starts with a real issuer prefix, has that issuer's length and is Luhn-valid. Windows are
 *   taken left to right, longest first; in separated tokens they start and end on group bounds.
 */

/** Bit `n` set: the issuer accepts length n. */
const LEN_13_16_19 = (1 << 13) | (1 << 16) | (1 << 19);
const LEN_14 = 1 << 14;
const LEN_15 = 1 << 15;
const LEN_16 = 1 << 16;
const LEN_16_TO_19 = (1 << 16) | (1 << 17) | (1 << 18) | (1 << 19);

function num(d: string, at: number, n: number): number {
  let v = 0;
  for (let i = at; i < at + n; i++) v = v * 10 + (d.charCodeAt(i) - 48);
  return v;
}

/**
 * Lengths (bit mask) of the issuers whose prefix starts `d` at `at`: Visa 4 (13/16/19);
 * Mastercard 51–55, 2221–2720 (16); Amex 34, 37 (15); Discover 6011, 644–649, 65 (16–19);
 * JCB 3528–3589 (16–19); Diners 300–305, 36, 38 (14); UnionPay 62 (16–19).
 */
export function issuerLengths(d: string, at = 0): number {
  if (d.length - at < 4) return 0;
  const two = num(d, at, 2);
  const three = num(d, at, 3);
  const four = num(d, at, 4);
  let mask = 0;
  if (two >= 40 && two <= 49) mask |= LEN_13_16_19;
  if ((two >= 51 && two <= 55) || (four >= 2221 && four <= 2720)) mask |= LEN_16;
  if (two === 34 || two === 37) mask |= LEN_15;
  if (four === 6011 || (three >= 644 && three <= 649) || two === 65) mask |= LEN_16_TO_19;
  if (four >= 3528 && four <= 3589) mask |= LEN_16_TO_19;
  if ((three >= 300 && three <= 305) || two === 36 || two === 38) mask |= LEN_14;
  if (two === 62) mask |= LEN_16_TO_19;
  return mask;
}

/** Luhn check of the `n` digits of `d` starting at `at`. */
export function luhn(d: string, at = 0, n = d.length - at): boolean {
  let sum = 0;
  let double = false;
  for (let i = at + n - 1; i >= at; i--) {
    let v = d.charCodeAt(i) - 48;
    if (double) {
      v *= 2;
      if (v > 9) v -= 9;
    }
    sum += v;
    double = !double;
  }
  return sum % 10 === 0;
}

function isIsbn13(d: string): boolean {
  if (d.length !== 13 || !(d.startsWith('978') || d.startsWith('979'))) return false;
  let sum = 0;
  for (let i = 0; i < 13; i++) sum += (d.charCodeAt(i) - 48) * (i % 2 === 0 ? 1 : 3);
  return sum % 10 === 0;
}

function isCompactDateTime(d: string): boolean {
  if (d.length !== 14 && d.length !== 17) return false;
  const century = num(d, 0, 2);
  const month = num(d, 4, 2);
  const day = num(d, 6, 2);
  return (
    (century === 19 || century === 20) &&
    month >= 1 &&
    month <= 12 &&
    day >= 1 &&
    day <= 31 &&
    num(d, 8, 2) <= 23 &&
    num(d, 10, 2) <= 59 &&
    num(d, 12, 2) <= 59
  );
}

/** Digit strings that are timestamps or ISBNs, never cards. */
function isReadableNumber(d: string): boolean {
  const n = d.length;
  if ((n === 13 || n === 16 || n === 19) && d.charCodeAt(0) === 0x31) return true;
  return isCompactDateTime(d) || isIsbn13(d);
}

const MAX_DIGITS = 64;

/**
 * Card ranges (pairs of digit indexes, end exclusive) in an unseparated digit run.
 * `whole` false: the run is itself beside other digits, so only issuer windows count.
 */
export function cardRangesInRun(d: string, whole = true): number[] {
  const n = d.length;
  if (n < 13 || n > MAX_DIGITS) return [];
  if (whole && n <= 19) {
    if (isReadableNumber(d)) return [];
    if (luhn(d)) return [0, n];
    if (issuerLengths(d) & (1 << n)) return [];
  }
  const out: number[] = [];
  for (let i = 0; i + 13 <= n; ) {
    const mask = issuerLengths(d, i);
    let taken = 0;
    if (mask !== 0) {
      for (let len = Math.min(19, n - i); len >= 13; len--) {
        if (whole && len === n) continue;
        if (mask & (1 << len) && luhn(d, i, len)) {
          taken = len;
          break;
        }
      }
    }
    if (taken > 0) {
      out.push(i, i + taken);
      i += taken;
    } else {
      i++;
    }
  }
  return out;
}

function cardGrouped(groups: readonly string[], from: number, to: number): boolean {
  if (to - from < 1 || groups[from]!.length !== 4) return false;
  for (let k = from + 1; k < to; k++) {
    const len = groups[k]!.length;
    if (len !== 4 && len !== 6) return false;
  }
  const last = groups[to]!.length;
  return last >= 1 && last <= 6;
}

/**
 * Card ranges (pairs of offsets into `token`, end exclusive) in a token of digits with single
 * spaces or dashes between them, as the RE2 candidate pattern finds it.
 */
export function cardRangesInToken(token: string): number[] {
  let digits = 0;
  for (let i = 0; i < token.length; i++) {
    const c = token.charCodeAt(i);
    if (c >= 48 && c <= 57) digits++;
  }
  if (digits > MAX_DIGITS) return [];
  if (digits === token.length) return cardRangesInRun(token);

  const groups: string[] = [];
  const starts: number[] = [];
  const seps: string[] = [];
  let start = 0;
  for (let i = 0; i <= token.length; i++) {
    const c = i < token.length ? token.charCodeAt(i) : 0x20;
    if (c === 0x20 || c === 0x2d) {
      groups.push(token.slice(start, i));
      starts.push(start);
      if (i < token.length) seps.push(token[i]!);
      start = i + 1;
    }
  }
  const last = groups.length - 1;
  const uniform = (from: number, to: number): boolean => {
    for (let k = from + 1; k < to; k++) if (seps[k] !== seps[from]) return false;
    return true;
  };
  const joined = (from: number, to: number): string => groups.slice(from, to + 1).join('');
  const end = (k: number): number => starts[k]! + groups[k]!.length;

  if (uniform(0, last) && cardGrouped(groups, 0, last) && digits >= 13 && digits <= 19) {
    const d = joined(0, last);
    if (luhn(d)) return [0, token.length];
    if (issuerLengths(d) & (1 << digits)) return [];
  }

  const out: number[] = [];
  for (let i = 0; i <= last; ) {
    let next = i + 1;
    const group = groups[i]!;
    if (group.length >= 13) {
      // A long group beside a dash is joined to other digits; beside spaces it stands alone.
      const alone = (i === 0 || seps[i - 1] === ' ') && (i === last || seps[i] === ' ');
      const inner = cardRangesInRun(group, alone);
      for (let k = 0; k < inner.length; k++) out.push(starts[i]! + inner[k]!);
    } else {
      for (let j = last; j > i; j--) {
        if (i === 0 && j === last) continue;
        if (!uniform(i, j) || !cardGrouped(groups, i, j)) continue;
        const d = joined(i, j);
        if (d.length >= 13 && d.length <= 19 && issuerLengths(d) & (1 << d.length) && luhn(d)) {
          out.push(starts[i]!, end(j));
          next = j + 1;
          break;
        }
      }
    }
    i = next;
  }
  return out;
}

/** Whether an integer attribute or JSON number is a card number (its decimal form). */
export function isCardNumber(value: number): boolean {
  if (!Number.isInteger(value) || value < 1e12 || value >= 1e21) return false;
  return cardRangesInRun(String(value)).length > 0;
}
