import { describe, expect, it } from 'vitest';
import { scoresOf } from './evaluate.testkit.js';
import { length, measure } from './length.js';

describe('measure', () => {
  it('counts code points and whitespace-separated words', () => {
    expect(measure('héllo 😀', 'characters')).toBe(7);
    expect(measure('  one two\n\tthree  ', 'words')).toBe(3);
    expect(measure('', 'words')).toBe(0);
    expect(measure('   ', 'words')).toBe(0);
  });
});

describe('length', () => {
  it('reports characters by default, with no within score when unbounded', async () => {
    const s = await scoresOf(length, {}, { output: 'hello' });
    expect(s).toEqual({ length: { name: 'length', value: 5, explanation: '5 characters' } });
  });

  it('reports words and checks inclusive bounds', async () => {
    const s = await scoresOf(length, { unit: 'words', min: 2, max: 3 }, { output: 'a b c' });
    expect(s.length?.value).toBe(3);
    expect(s.within?.passed).toBe(true);
    const over = await scoresOf(length, { unit: 'words', max: '2' }, { output: 'a b c' });
    expect(over.within).toMatchObject({
      passed: false,
      explanation: 'length 3 words is above the maximum 2 words',
    });
    const under = await scoresOf(length, { min: 10 }, { output: 'short' });
    expect(under.within?.passed).toBe(false);
  });

  it('measures the answer of a transcript', async () => {
    const output = [
      { role: 'user', content: 'a long question here' },
      { role: 'assistant', content: 'ok' },
    ];
    expect((await scoresOf(length, {}, { output })).length?.value).toBe(2);
  });

  it('refuses max below min and bad units, naming the field', () => {
    expect(length.manifest.params.safeParse({ min: 5, max: 2 }).error?.issues[0]?.path).toEqual([
      'max',
    ]);
    expect(length.manifest.params.safeParse({ unit: 'tokens' }).error?.issues[0]?.path).toEqual([
      'unit',
    ]);
    expect(length.manifest.params.safeParse({ min: 1.5 }).error?.issues[0]?.path).toEqual(['min']);
  });
});
