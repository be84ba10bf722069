import { describe, expect, it } from 'vitest';
import { seededRandom as random } from '../../../test/support/random.js';
import { scoresOf, skipOf } from './evaluate.testkit.js';
import { editDistance, fuzzyMatch, similarity } from './fuzzy-match.js';

function naiveDistance(a: readonly number[], b: readonly number[]): number {
  const row = Array.from({ length: a.length + 1 }, (_, i) => i);
  for (let j = 1; j <= b.length; j++) {
    let diagonal = row[0]!;
    row[0] = j;
    for (let i = 1; i <= a.length; i++) {
      const up = row[i]!;
      row[i] = Math.min(up + 1, row[i - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = up;
    }
  }
  return row[a.length]!;
}

const cp = (s: string) => Array.from(s, (c) => c.codePointAt(0)!);

describe('editDistance', () => {
  it('gives textbook distances', () => {
    expect(editDistance(cp('kitten'), cp('sitting'))).toBe(3);
    expect(editDistance(cp('flaw'), cp('lawn'))).toBe(2);
    expect(editDistance(cp(''), cp('abc'))).toBe(3);
    expect(editDistance(cp('abc'), cp(''))).toBe(3);
    expect(editDistance(cp('same'), cp('same'))).toBe(0);
  });

  it('agrees with the dynamic-programming definition across block boundaries', () => {
    const rnd = random(42);
    for (let t = 0; t < 1500; t++) {
      const alphabet = 1 + Math.floor(rnd() * 6);
      const word = () =>
        Array.from({ length: Math.floor(rnd() * 150) }, () => 97 + Math.floor(rnd() * alphabet));
      const a = word();
      const b = word();
      expect(editDistance(a, b), `case ${t}`).toBe(naiveDistance(a, b));
    }
  });

  it('handles exactly 32 and 64 code points and a shared prefix and suffix', () => {
    const a = cp('x'.repeat(32));
    const b = cp(`${'x'.repeat(31)}y`);
    expect(editDistance(a, b)).toBe(1);
    const c = cp(`pre${'ab'.repeat(32)}suf`);
    const d = cp(`pre${'ba'.repeat(32)}suf`);
    expect(editDistance(c, d)).toBe(naiveDistance(c, d));
  });

  it('gives up past the work limit', () => {
    const rnd = random(7);
    const a = Array.from({ length: 3000 }, () => Math.floor(rnd() * 50));
    const b = Array.from({ length: 3000 }, () => Math.floor(rnd() * 50));
    expect(editDistance(a, b, 1000)).toBeUndefined();
    expect(editDistance(a, a, 1000)).toBe(0);
  });
});

describe('similarity', () => {
  it('is 1 − distance / longer length over code points', () => {
    expect(similarity('kitten', 'sitting')).toBeCloseTo(1 - 3 / 7);
    expect(similarity('', '')).toBe(1);
    expect(similarity('abc', '')).toBe(0);
    expect(similarity('😀a', '😀b')).toBe(0.5);
  });
});

describe('fuzzy-match', () => {
  it('scores the best reference candidate, normalized', async () => {
    const s = await scoresOf(fuzzyMatch, {}, { output: 'Kitten', reference: ['dog', 'sitting'] });
    expect(s['fuzzy-match']?.value).toBeCloseTo(1 - 3 / 7);
    expect(s['fuzzy-match']?.explanation).toBe('similarity 0.571429 (reference candidate 2 of 2)');
    const exact = await scoresOf(
      fuzzyMatch,
      {},
      { output: '  HELLO  world', reference: 'hello world' },
    );
    expect(exact['fuzzy-match']?.value).toBe(1);
  });

  it('is case-sensitive and punctuation-aware only when asked', async () => {
    const cs = await scoresOf(
      fuzzyMatch,
      { caseSensitive: true },
      { output: 'ABCD', reference: 'abcd' },
    );
    expect(cs['fuzzy-match']?.value).toBe(0);
    const p = await scoresOf(
      fuzzyMatch,
      { ignorePunctuation: true },
      { output: 'a.b.c', reference: 'abc' },
    );
    expect(p['fuzzy-match']?.value).toBe(1);
  });

  it('skips when no candidate is present', async () => {
    expect(await skipOf(fuzzyMatch, {}, { output: 'x', reference: [null] })).toMatch(
      /no candidate/,
    );
  });

  it('stays fast on long texts and skips the ones past its limit', async () => {
    const rnd = random(3);
    const text = (n: number) =>
      Array.from({ length: n }, () => String.fromCharCode(97 + Math.floor(rnd() * 26))).join('');
    const started = performance.now();
    const s = await scoresOf(fuzzyMatch, {}, { output: text(5000), reference: text(5000) });
    expect(s['fuzzy-match']?.value).toBeGreaterThan(0);
    expect(s['fuzzy-match']?.value).toBeLessThan(1);
    expect(performance.now() - started).toBeLessThan(500);
    expect(await skipOf(fuzzyMatch, {}, { output: text(20_000), reference: text(20_000) })).toMatch(
      /too long/,
    );
  });
});
