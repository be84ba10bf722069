import { describe, expect, it } from 'vitest';
import { cardRangesInRun, cardRangesInToken, isCardNumber, issuerLengths, luhn } from './card.js';

/** The token with every card range replaced by X's (for readable expectations). */
function mark(token: string): string {
  const ranges = cardRangesInToken(token);
  let out = token;
  for (let i = 0; i < ranges.length; i += 2) {
    out =
      out.slice(0, ranges[i]) + 'X'.repeat(ranges[i + 1]! - ranges[i]!) + out.slice(ranges[i + 1]);
  }
  return out;
}

describe('luhn', () => {
  it('accepts valid numbers and refuses a changed digit', () => {
    expect(luhn('4111111111111111')).toBe(true);
    expect(luhn('4111111111111112')).toBe(false);
    expect(luhn('xx4111111111111111', 2)).toBe(true);
    expect(luhn('41111111111111110', 0, 16)).toBe(true);
  });
});

describe('issuerLengths', () => {
  const lengths = (d: string) =>
    Array.from({ length: 20 }, (_, n) => n).filter((n) => issuerLengths(d) & (1 << n));
  it.each([
    ['4111', [13, 16, 19]],
    ['5105', [16]],
    ['2221', [16]],
    ['2720', [16]],
    ['2721', []],
    ['3782', [15]],
    ['3400', [15]],
    ['6011', [16, 17, 18, 19]],
    ['6445', [16, 17, 18, 19]],
    ['6500', [16, 17, 18, 19]],
    ['3528', [16, 17, 18, 19]],
    ['3589', [16, 17, 18, 19]],
    ['3590', []],
    ['3056', [14]],
    ['3600', [14]],
    ['3800', [14]],
    ['6200', [16, 17, 18, 19]],
    ['1234', []],
    ['9780', []],
  ])('%s → %j', (prefix, expected) => {
    expect(lengths(prefix)).toEqual(expected);
  });
});

describe('whole numbers (13–19 digits)', () => {
  it.each([
    '4111111111111111',
    '4222222222222',
    '5555555555554444',
    '2221000000000009',
    '378282246310005',
    '6011111111111117',
    '3530111333300000',
    '30569309025904',
    '6200000000000005',
    '4111111111111111110',
    '900000000000000001', // Luhn-valid without an issuer: the first clause still applies
  ])('redacts the Luhn-valid number %s', (d) => {
    expect(cardRangesInRun(d)).toEqual([0, d.length]);
  });

  it.each([
    ['mistyped Visa', '4111111111111112'],
    ['mistyped Amex', '378282246310006'],
    ['mistyped Mastercard', '5555555555554445'],
  ])('keeps a %s readable (issuer length, fails Luhn)', (_, d) => {
    expect(luhn(d)).toBe(false);
    expect(cardRangesInRun(d)).toEqual([]);
  });

  it.each([
    ['ms timestamp', '1763712000001'],
    ['µs timestamp', '1763712000000005'],
    ['ns timestamp', '1763712000000000001'],
    ['compact date-time', '20261121103000'],
    ['ISBN-13', '9783064061569'],
  ])('keeps a Luhn-valid %s readable', (_, d) => {
    expect(luhn(d)).toBe(true);
    expect(cardRangesInRun(d)).toEqual([]);
  });

  it('ignores runs shorter than 13 digits', () => {
    expect(cardRangesInRun('424242424242')).toEqual([]);
  });
});

describe('numbers beside other digits', () => {
  it('redacts an issuer-length, Luhn-valid window inside a longer run', () => {
    expect(mark('0041111111111111117')).toBe('00XXXXXXXXXXXXXXXX7');
    expect(mark(`${'9'.repeat(30)}378282246310005${'0'.repeat(10)}`)).toBe(
      `${'9'.repeat(30)}${'X'.repeat(15)}${'0'.repeat(10)}`,
    );
  });

  it('needs the issuer prefix and that issuer’s length for a window', () => {
    // Luhn-valid windows without an issuer prefix stay: 900000000000000001 inside a longer run.
    expect(mark('77900000000000000001')).toBe('77900000000000000001');
    // A Visa prefix beside other digits, but no Visa-length window is Luhn-valid.
    expect(mark('0040000000000000000')).toBe('0040000000000000000');
  });

  it('redacts at 64 digits and leaves runs over 64 digits readable', () => {
    const at64 = `${'1'.repeat(48)}4111111111111111`;
    expect(at64).toHaveLength(64);
    expect(mark(at64)).toBe(`${'1'.repeat(48)}${'X'.repeat(16)}`);
    const at65 = `1${at64}`;
    expect(mark(at65)).toBe(at65);
  });
});

describe('separated numbers', () => {
  it.each([
    ['4111 1111 1111 1111', 'XXXXXXXXXXXXXXXXXXX'],
    ['4111-1111-1111-1111', 'XXXXXXXXXXXXXXXXXXX'],
    ['3782 822463 10005', 'XXXXXXXXXXXXXXXXX'],
    ['3056 930902 5904', 'XXXXXXXXXXXXXXXX'],
    ['4111 1111 1111 1111 0425', 'XXXXXXXXXXXXXXXXXXX 0425'],
    ['12 4111 1111 1111 1111', '12 XXXXXXXXXXXXXXXXXXX'],
    ['3 4111111111111111', '3 XXXXXXXXXXXXXXXX'],
  ])('%s → %s', (token, expected) => {
    expect(mark(token)).toBe(expected);
  });

  it.each([
    '4111 1111 1111 1112', // mistyped
    '4111-1111 1111-1111', // mixed separators
    '1 2 3 4 5 6 7 8 9 0 1 2 6', // not grouped like a card
    '978-3-06-406156-9', // hyphenated ISBN
    '12345678-1234-1234-1234-123456789012', // all-digit UUID
  ])('keeps %s readable', (token) => {
    expect(mark(token)).toBe(token);
  });
});

describe('isCardNumber', () => {
  it('checks integer attribute values by their decimal form', () => {
    expect(isCardNumber(4111111111111111)).toBe(true);
    expect(isCardNumber(4111111111111112)).toBe(false);
    expect(isCardNumber(1763712000001)).toBe(false);
    expect(isCardNumber(1234)).toBe(false);
    expect(isCardNumber(4.5)).toBe(false);
    expect(isCardNumber(-4111111111111111)).toBe(false);
  });
});
