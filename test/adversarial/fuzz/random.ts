/**
 * The fuzzers' randomness: one seeded generator per run, so iteration i of a seed is always the
 * same input and a failure found once can be found again.
 */

export type Rand = () => number;

/** mulberry32: small, fast, deterministic. */
export function rng(seed: number): Rand {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An integer in [0, n). */
export const int = (r: Rand, n: number): number => Math.floor(r() * n);

export const pick = <T>(r: Rand, xs: readonly T[]): T => xs[int(r, xs.length)]!;

export function randomBytes(r: Rand, n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = int(r, 256);
  return out;
}

/** `n` characters drawn from `alphabet` (code points, so surrogate pairs stay whole). */
export function randomText(r: Rand, alphabet: string, n: number): string {
  const chars = [...alphabet];
  let s = '';
  for (let i = 0; i < n; i++) s += pick(r, chars);
  return s;
}

/**
 * A marker (`mk`, 8 hex digits, `q`) to put in content the code under test must never quote: an
 * error text that matches MARKER echoes that content.
 */
export const marker = (r: Rand): string =>
  `mk${int(r, 2 ** 32)
    .toString(16)
    .padStart(8, '0')}q`;
export const MARKER = /mk[0-9a-f]{8}q/;

/** One way of making an input, chosen with probability proportional to its weight. */
export interface Way<T> {
  /** Counted by the driver and named in a failure (`flip`, `alias bomb`). */
  name: string;
  weight: number;
  make: (r: Rand) => T;
}

/**
 * Picks a way by weight and makes the input. The table is fixed per target, so the same seed
 * makes the same choices.
 */
export function choose<T>(r: Rand, ways: readonly Way<T>[]): { value: T; way: string } {
  let total = 0;
  for (const w of ways) total += w.weight;
  let x = r() * total;
  for (const w of ways) {
    x -= w.weight;
    if (x < 0) return { value: w.make(r), way: w.name };
  }
  const last = ways[ways.length - 1]!;
  return { value: last.make(r), way: last.name };
}
