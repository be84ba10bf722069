import { describe, expect, it } from 'vitest';
import { llmStep, scoresOf, skipOf, toolStep } from './evaluate.testkit.js';
import { compareTrajectories, trajectoryMatch } from './trajectory-match.js';

const trajectory = [
  llmStep(),
  toolStep('search'),
  llmStep(),
  toolStep('fetch'),
  toolStep('search'),
];

const run = async (reference: unknown, mode?: string) =>
  (await scoresOf(trajectoryMatch, mode ? { mode } : {}, { trajectory, reference }))[
    'trajectory-match'
  ];

describe('compareTrajectories', () => {
  const a = ['search', 'fetch', 'search'];
  it.each([
    ['strict', ['search', 'fetch', 'search'], true],
    ['strict', ['fetch', 'search', 'search'], false],
    ['strict', ['search', 'fetch'], false],
    ['unordered', ['search', 'search', 'fetch'], true],
    ['unordered', ['search', 'fetch'], false],
    ['subset', ['search', 'fetch', 'search', 'answer'], true],
    ['subset', ['search', 'fetch'], false],
    ['superset', ['fetch', 'search'], true],
    ['superset', ['search', 'search', 'search'], false],
    ['superset', ['answer'], false],
  ] as const)('%s against %j → %s', (mode, expected, passed) => {
    expect(compareTrajectories(a, expected, mode).passed).toBe(passed);
  });

  it('explains the first strict difference and the multiset differences', () => {
    expect(compareTrajectories(['a', 'b'], ['a', 'c', 'd'], 'strict').explanation).toBe(
      'expected 3 tool calls, got 2; first difference at call 2 (expected c, got b)',
    );
    expect(compareTrajectories(['a'], ['a', 'b'], 'strict').explanation).toMatch(
      /expected b, got nothing/,
    );
    expect(compareTrajectories(['a', 'a', 'c'], ['a', 'b'], 'unordered').explanation).toBe(
      'the tool calls are not the same calls as the expected ones: missing b: 1; unexpected a: 1, c: 1',
    );
  });
});

describe('trajectory-match', () => {
  it('reads a list of names, strict by default', async () => {
    expect((await run(['search', 'fetch', 'search']))?.passed).toBe(true);
    expect((await run(['search', 'search', 'fetch']))?.passed).toBe(false);
    expect((await run(['search', 'search', 'fetch'], 'unordered'))?.passed).toBe(true);
  });

  it('reads toolCalls, tool_calls and trajectory objects, and JSON text', async () => {
    expect(
      (await run({ toolCalls: [{ name: 'search' }, { name: 'fetch' }] }, 'superset'))?.passed,
    ).toBe(true);
    expect(
      (await run({ tool_calls: [{ name: 'search', arguments: '{}' }] }, 'subset'))?.passed,
    ).toBe(false);
    expect((await run({ trajectory: ['search', 'fetch', 'search', 'x'] }, 'subset'))?.passed).toBe(
      true,
    );
    expect((await run('["search", "fetch", "search"]'))?.passed).toBe(true);
  });

  it('passes when any reference candidate passes', async () => {
    const s = await run([['fetch'], ['search', 'fetch', 'search']]);
    expect(s).toMatchObject({ passed: true });
    expect(s?.explanation).toMatch(/reference candidate 2 of 2/);
  });

  it('compares an empty tool sequence too', async () => {
    const s = await scoresOf(
      trajectoryMatch,
      { mode: 'subset' },
      { trajectory: [llmStep()], reference: ['a'] },
    );
    expect(s['trajectory-match']?.passed).toBe(true);
    const strict = await scoresOf(
      trajectoryMatch,
      {},
      { trajectory: [llmStep()], reference: ['a'] },
    );
    expect(strict['trajectory-match']?.passed).toBe(false);
  });

  it('skips when the reference names no tools', async () => {
    expect(await skipOf(trajectoryMatch, {}, { trajectory, reference: 'Paris' })).toMatch(
      /no expected tool/,
    );
    expect(await skipOf(trajectoryMatch, {}, { trajectory, reference: { toolCalls: [] } })).toMatch(
      /no expected/,
    );
  });

  it('refuses an unknown mode, naming the field', () => {
    expect(
      trajectoryMatch.manifest.params.safeParse({ mode: 'loose' }).error?.issues[0]?.path,
    ).toEqual(['mode']);
  });
});
