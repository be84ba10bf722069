import { describe, expect, it } from 'vitest';
import { scoresOf, skipOf } from './evaluate.testkit.js';
import { exactMatch } from './exact-match.js';

const passed = async (output: unknown, reference: unknown, params: object = {}) =>
  (await scoresOf(exactMatch, params, { output, reference }))['exact-match']?.passed;

describe('exact-match', () => {
  it('ignores surrounding and repeated whitespace and case by default', async () => {
    expect(await passed('  Paris\n', 'paris')).toBe(true);
    expect(await passed('New   York', 'new york')).toBe(true);
    expect(await passed('Paris.', 'Paris')).toBe(false);
  });

  it('respects caseSensitive and ignorePunctuation', async () => {
    expect(await passed('paris', 'Paris', { caseSensitive: true })).toBe(false);
    expect(await passed('Paris', 'Paris', { caseSensitive: 'true' })).toBe(true);
    expect(await passed('Paris!', 'paris', { ignorePunctuation: true })).toBe(true);
  });

  it('matches any candidate of a list reference and says which', async () => {
    const s = await scoresOf(exactMatch, {}, { output: 'NYC', reference: ['New York', 'nyc'] });
    expect(s['exact-match']).toMatchObject({
      passed: true,
      explanation: 'matches reference candidate 2 of 2',
    });
    const miss = await scoresOf(exactMatch, {}, { output: 'LA', reference: ['New York', 'nyc'] });
    expect(miss['exact-match']).toMatchObject({
      passed: false,
      explanation: 'matches none of 2 reference candidates',
    });
  });

  it('compares the last assistant message of a transcript and non-text references', async () => {
    const output = [
      { role: 'user', content: 'capital?' },
      { role: 'assistant', content: 'Paris' },
    ];
    expect(await passed(output, 'paris')).toBe(true);
    expect(await passed('42', 42)).toBe(true);
  });

  it('skips when every candidate is empty', async () => {
    expect(await skipOf(exactMatch, {}, { output: 'x', reference: [null, ''] })).toMatch(
      /no candidate/,
    );
  });

  it('never quotes the output or the reference', async () => {
    const s = await scoresOf(
      exactMatch,
      {},
      { output: 'secret-output', reference: 'secret-reference' },
    );
    expect(JSON.stringify(s)).not.toMatch(/secret-/);
  });

  it('refuses unknown params, naming them', () => {
    const r = exactMatch.manifest.params.safeParse({ casesensitive: true });
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error?.issues)).toContain('casesensitive');
  });
});
