import { describe, expect, it } from 'vitest';
import { globMatch } from './glob.js';

describe('globMatch', () => {
  it.each([
    ['*', '', true],
    ['*', 'anything.at.all', true],
    ['a*b', 'ab', true],
    ['a*b', 'axxb', true],
    ['a*b', 'axxbc', false],
    ['a?c', 'abc', true],
    ['a?c', 'ac', false],
    ['*a*a*a*b', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', false],
    ['*.password', 'db.password', true],
  ])('%s against %s → %s', (glob, text, expected) => {
    expect(globMatch(glob, text)).toBe(expected);
  });
});

describe('globMatch on hostile globs', () => {
  it('stays polynomial where a regular expression would backtrack exponentially', () => {
    const glob = `${'*a'.repeat(31)}*c`;
    const started = performance.now();
    expect(globMatch(glob, 'a'.repeat(63))).toBe(false);
    expect(globMatch(glob, 'a'.repeat(100_000))).toBe(false);
    expect(globMatch(glob, `${'a'.repeat(40)}c`)).toBe(true);
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});
