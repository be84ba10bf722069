import { describe, expect, it } from 'vitest';
import { scoresOf, skipOf } from './evaluate.testkit.js';
import { isClose, lastNumber, numericMatch } from './numeric-match.js';

const passed = async (output: unknown, reference: unknown, params: object = {}) =>
  (await scoresOf(numericMatch, params, { output, reference }))['numeric-match']?.passed;

describe('lastNumber', () => {
  it.each([
    ['The answer is 42.', 42],
    ['1,234,567.89 dollars', 1234567.89],
    ['temperature -3.5 degrees', -3.5],
    ['between 3-5', 5],
    ['date 2024-01-05', 5],
    ['x-1', 1],
    ['(−7)', -7],
    ['+12', 12],
    ['6.02e23 atoms', 6.02e23],
    ['1E-3', 0.001],
    ['.5 of it', 0.5],
    ['values 1,23', 23],
    ['1,2345', 2345],
    ['50%', 50],
    ['$1,000', 1000],
    ['#### 18', 18],
  ])('%s → %d', (text, n) => {
    expect(lastNumber(text)).toBe(n);
  });

  it('finds none in text without digits', () => {
    expect(lastNumber('no numbers here')).toBeUndefined();
    expect(lastNumber('')).toBeUndefined();
  });
});

describe('numeric-match', () => {
  it('compares last numbers exactly by default', async () => {
    expect(await passed('So the total is 1,200.', '1200')).toBe(true);
    expect(await passed('3.0', '3')).toBe(true);
    expect(await passed('41', '42')).toBe(false);
    expect(await passed('-5', '5')).toBe(false);
  });

  it('applies relTol and absTol as math.isclose does', async () => {
    expect(await passed('101', '100', { relTol: 0.01 })).toBe(true);
    expect(await passed('102', '100', { relTol: 0.01 })).toBe(false);
    expect(await passed('0.3', '0.31', { absTol: 0.01 })).toBe(true);
    expect(await passed('0.1', '0', { relTol: 0.5 })).toBe(false);
    expect(await passed('1.05', '1', { absTol: '0.1' })).toBe(true);
  });

  it('matches any reference candidate that has a number', async () => {
    expect(await passed('7', ['seven', '7.0'])).toBe(true);
    expect(await passed('8', [6, 7])).toBe(false);
  });

  it('fails when the output has no number', async () => {
    const s = await scoresOf(numericMatch, {}, { output: 'I do not know', reference: '4' });
    expect(s['numeric-match']).toMatchObject({
      passed: false,
      explanation: 'no number in the output',
    });
  });

  it('skips when the reference has no number', async () => {
    expect(await skipOf(numericMatch, {}, { output: '4', reference: 'four' })).toMatch(/no number/);
  });

  it('refuses negative tolerances, naming the field', () => {
    expect(numericMatch.manifest.params.safeParse({ relTol: -1 }).error?.issues[0]?.path).toEqual([
      'relTol',
    ]);
  });
});

describe('isClose', () => {
  it('forgives binary rounding but nothing more', () => {
    expect(isClose(0.3, 0.31, 0, 0.01)).toBe(true);
    expect(isClose(0.3, 0.3100001, 0, 0.01)).toBe(false);
    expect(isClose(0.1 + 0.2, 0.3, 0, 0)).toBe(true);
    expect(isClose(1, 1.000001, 0, 0)).toBe(false);
    expect(isClose(Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY, 0, 0)).toBe(true);
    expect(isClose(Number.POSITIVE_INFINITY, 1, 0.5, 0)).toBe(false);
  });
});
