import { describe, expect, it } from 'vitest';
import { isTouchstoneError } from '../../core/index.js';
import { scoresOf } from './evaluate.testkit.js';
import { regexMatch } from './regex-match.js';

const passed = async (params: object, output: unknown) =>
  (await scoresOf(regexMatch, params, { output }))['regex-match']?.passed;

function bindError(params: object): unknown {
  try {
    regexMatch.bind(regexMatch.manifest.params.parse(params));
  } catch (err) {
    return err;
  }
  return undefined;
}

describe('regex-match', () => {
  it('searches by default', async () => {
    expect(await passed({ pattern: '\\d{3}' }, 'code 123 ok')).toBe(true);
    expect(await passed({ pattern: '^\\d+$' }, 'code 123')).toBe(false);
  });

  it('matches the whole output with fullMatch, even when m makes ^ and $ line anchors', async () => {
    expect(await passed({ pattern: '\\d+', fullMatch: true }, '123')).toBe(true);
    expect(await passed({ pattern: '\\d+', fullMatch: true }, '123 abc')).toBe(false);
    expect(await passed({ pattern: 'a|b', fullMatch: true }, 'ab')).toBe(false);
    expect(await passed({ pattern: '^b$', flags: 'm' }, 'a\nb\nc')).toBe(true);
    expect(await passed({ pattern: 'b', flags: 'm', fullMatch: true }, 'a\nb\nc')).toBe(false);
  });

  it('honours the i and s flags', async () => {
    expect(await passed({ pattern: 'hello' }, 'HELLO')).toBe(false);
    expect(await passed({ pattern: 'hello', flags: 'i' }, 'HELLO')).toBe(true);
    expect(await passed({ pattern: 'a.b' }, 'a\nb')).toBe(false);
    expect(await passed({ pattern: 'a.b', flags: 's' }, 'a\nb')).toBe(true);
  });

  it('matches code points, not UTF-16 halves', async () => {
    expect(await passed({ pattern: '^.$' }, '😀')).toBe(true);
  });

  it('refuses invalid RE2 at bind with an invalid_argument naming pattern', () => {
    for (const pattern of ['(a', '(?=a)b', '(a)\\1', '[z-a]']) {
      const err = bindError({ pattern });
      expect(isTouchstoneError(err)).toBe(true);
      if (!isTouchstoneError(err)) continue;
      expect(err.kind).toBe('invalid_argument');
      expect(err.details[0]?.path).toBe('pattern');
      expect(err.message).toMatch(/not a valid RE2 expression/);
    }
  });

  it('cannot be broken out of by the fullMatch wrapping', async () => {
    expect(bindError({ pattern: 'a)|(b', fullMatch: true })).toBeDefined();
  });

  it('validates flags and requires a pattern', () => {
    for (const flags of ['g', 'ii', 'x', 'u']) {
      expect(
        regexMatch.manifest.params.safeParse({ pattern: 'a', flags }).error?.issues[0]?.path,
      ).toEqual(['flags']);
    }
    expect(regexMatch.manifest.params.safeParse({}).error?.issues[0]?.path).toEqual(['pattern']);
    expect(regexMatch.manifest.params.safeParse({ pattern: 'a', flags: 'ims' }).success).toBe(true);
  });

  it('runs in linear time on a pattern that backtracks catastrophically elsewhere', async () => {
    const started = performance.now();
    expect(await passed({ pattern: '(a+)+$' }, `${'a'.repeat(50_000)}!`)).toBe(false);
    expect(performance.now() - started).toBeLessThan(1000);
  });
});
