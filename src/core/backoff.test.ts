import { describe, expect, it } from 'vitest';
import { backoffMs } from './backoff.js';

const POLICY = { baseMs: 5_000, maxMs: 3_600_000 };

describe('backoffMs (full jitter)', () => {
  it('draws below a ceiling that doubles per attempt up to the cap', () => {
    const top = () => 0.999_999;
    expect(backoffMs(1, POLICY, undefined, top)).toBe(4_999);
    expect(backoffMs(2, POLICY, undefined, top)).toBe(9_999);
    expect(backoffMs(4, POLICY, undefined, top)).toBe(39_999);
    expect(backoffMs(30, POLICY, undefined, top)).toBe(3_599_996);
    expect(backoffMs(3, POLICY, undefined, () => 0)).toBe(0);
    expect(backoffMs(3, POLICY, undefined, () => 0.5)).toBe(10_000);
  });

  it('spreads the retries of rows that failed together over the window', () => {
    const waits = Array.from({ length: 1000 }, () => backoffMs(3, POLICY));
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...waits)).toBeLessThan(20_000);
    // Uniform: about a quarter in each quarter of the window.
    const firstQuarter = waits.filter((w) => w < 5_000).length;
    expect(firstQuarter).toBeGreaterThan(150);
    expect(firstQuarter).toBeLessThan(350);
  });

  it('never retries before Retry-After, and Retry-After 0 still waits the jittered delay', () => {
    expect(backoffMs(1, POLICY, 42, () => 0.9)).toBe(42_000);
    expect(backoffMs(12, POLICY, 42, () => 0.5)).toBe(1_800_000);
    expect(backoffMs(2, POLICY, 0, () => 0.5)).toBe(5_000);
    expect(backoffMs(1, POLICY, 0.25, () => 0)).toBe(250);
  });
});

describe('backoffMs (equal jitter and none)', () => {
  it('equal: draws in the upper half of the ceiling', () => {
    const equal = { ...POLICY, jitter: 'equal' } as const;
    expect(backoffMs(1, equal, undefined, () => 0)).toBe(2_500);
    expect(backoffMs(3, equal, undefined, () => 0.5)).toBe(15_000);
    expect(backoffMs(30, equal, undefined, () => 0)).toBe(1_800_000);
    const waits = Array.from({ length: 200 }, () => backoffMs(2, equal));
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(5_000);
    expect(Math.max(...waits)).toBeLessThan(10_000);
  });

  it('none: the ceiling itself, doubling up to the cap, Retry-After still a floor', () => {
    const none = { baseMs: 5_000, maxMs: 300_000, jitter: 'none' } as const;
    expect([1, 2, 3, 4, 5, 6, 7, 30].map((a) => backoffMs(a, none))).toEqual([
      5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000,
    ]);
    expect(backoffMs(0, none)).toBe(5_000);
    expect(backoffMs(1, none, 42)).toBe(42_000);
    expect(backoffMs(3, none, 1)).toBe(20_000);
  });
});
