import { describe, expect, it } from 'vitest';
import { contains } from './contains.js';
import { scoresOf, skipOf } from './evaluate.testkit.js';

const run = async (params: object, output: unknown, reference?: unknown) =>
  (await scoresOf(contains, params, { output, reference })).contains;

describe('contains', () => {
  it('finds one value case-insensitively, across collapsed whitespace', async () => {
    expect((await run({ value: 'Hello World' }, 'oh, hello\n  world!'))?.passed).toBe(true);
    expect((await run({ value: 'Hello', caseSensitive: true }, 'hello'))?.passed).toBe(false);
  });

  it('checks a list in any (default) or all mode', async () => {
    const value = ['alpha', 'beta'];
    expect((await run({ value }, 'only alpha here'))?.passed).toBe(true);
    const all = await run({ value, mode: 'all' }, 'only alpha here');
    expect(all).toMatchObject({ passed: false, explanation: 'contains 1 of 2 values (mode all)' });
    expect((await run({ value, mode: 'all' }, 'beta and alpha'))?.passed).toBe(true);
  });

  it('falls back to any reference candidate without a value', async () => {
    expect((await run({}, 'The capital is Paris.', ['Lyon', 'paris']))?.passed).toBe(true);
    expect((await run({}, 'The capital is Paris.', 'Lyon'))?.passed).toBe(false);
  });

  it('prefers the value over the reference', async () => {
    expect((await run({ value: 'x' }, 'abc', 'abc'))?.passed).toBe(false);
  });

  it('skips without a value and without a usable reference', async () => {
    expect(await skipOf(contains, {}, { output: 'abc' })).toMatch(/no `value`/);
    expect(await skipOf(contains, {}, { output: 'abc', reference: '   ' })).toMatch(/no `value`/);
  });

  it('refuses blank or empty values, naming the field', () => {
    for (const value of ['', '  ', [], ['ok', '']]) {
      const r = contains.manifest.params.safeParse({ value });
      expect(r.success).toBe(false);
      expect(r.error?.issues[0]?.path[0]).toBe('value');
    }
    expect(contains.manifest.params.safeParse({ mode: 'some' }).error?.issues[0]?.path).toEqual([
      'mode',
    ]);
  });
});
