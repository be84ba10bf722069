import { describe, expect, it } from 'vitest';
import { batches, placeholders } from './batches.js';

const sizes = (dialect: 'sqlite' | 'postgres', n: number, max: number) =>
  [
    ...batches(
      dialect,
      Array.from({ length: n }, (_, i) => i),
      max,
    ),
  ].map((b) => b.length);

describe('batches', () => {
  it('splits SQLite rows into groups of 128 and the binary digits of the rest, in order', () => {
    expect(sizes('sqlite', 512, 1000)).toEqual([128, 128, 128, 128]);
    expect(sizes('sqlite', 300, 1000)).toEqual([128, 128, 32, 8, 4]);
    expect(sizes('sqlite', 1, 1000)).toEqual([1]);
    expect(sizes('sqlite', 0, 1000)).toEqual([]);
    const rows = Array.from({ length: 77 }, (_, i) => i);
    expect([...batches('sqlite', rows, 1000)].flat()).toEqual(rows);
    // Every size drawn from a fixed set, whatever the count.
    const seen = new Set<number>();
    for (let n = 1; n <= 700; n++) for (const s of sizes('sqlite', n, 1000)) seen.add(s);
    expect([...seen].sort((a, b) => a - b)).toEqual([1, 2, 4, 8, 16, 32, 64, 128]);
  });

  it('never exceeds a smaller maximum on SQLite', () => {
    expect(sizes('sqlite', 130, 50)).toEqual([50, 50, 25, 3, 1, 1]);
  });

  it('gives PostgreSQL up to the maximum per statement', () => {
    expect(sizes('postgres', 2500, 1000)).toEqual([1000, 1000, 500]);
  });
});

describe('placeholders', () => {
  it('numbers PostgreSQL parameters and repeats `?` for SQLite', () => {
    expect(placeholders('sqlite', 2, 3)).toBe('(?, ?, ?), (?, ?, ?)');
    expect(placeholders('postgres', 2, 2)).toBe('($1, $2), ($3, $4)');
    expect(placeholders('postgres', 2, 2)).toBe('($1, $2), ($3, $4)');
  });
});
