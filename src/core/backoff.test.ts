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
