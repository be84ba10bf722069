import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { samplePoint } from './engine.js';

describe('deterministic sampling', () => {
  const ids = Array.from({ length: 10_000 }, () => randomBytes(16).toString('hex'));

  it('keeps the rate within tolerance over 10k traces', () => {
    for (const rate of [0.01, 0.1, 0.5, 0.9]) {
      const kept = ids.filter((id) => samplePoint(id, 'quality') < rate).length / ids.length;
      // Binomial: 4 standard deviations at n = 10k is at most 0.02.
      expect(Math.abs(kept - rate)).toBeLessThan(
        4 * Math.sqrt((rate * (1 - rate)) / ids.length) + 1e-9,
      );
    }
  });

  it('decides the same way every time for a (trace, policy), and independently per policy', () => {
    const first = ids.map((id) => samplePoint(id, 'quality') < 0.5);
    expect(ids.map((id) => samplePoint(id, 'quality') < 0.5)).toEqual(first);
    const other = ids.map((id) => samplePoint(id, 'tone') < 0.5);
    const agree = other.filter((v, i) => v === first[i]).length / ids.length;
    expect(agree).toBeGreaterThan(0.45);
    expect(agree).toBeLessThan(0.55);
  });

  it('maps to [0, 1)', () => {
    for (const id of ids.slice(0, 1000)) {
      const p = samplePoint(id, 'x');
      expect(p).toBeGreaterThanOrEqual(0);
      expect(p).toBeLessThan(1);
    }
  });
});
