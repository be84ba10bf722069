import { describe, expect, it } from 'vitest';
import { resolveCredential } from './credentials.js';

describe('resolveCredential', () => {
  it('reads the named variable from the environment handed in', () => {
    expect(resolveCredential({ env: 'JUDGE_KEY' }, { JUDGE_KEY: 'sk-1\n' })).toBe('sk-1');
  });

  it('is undefined for unset or blank variables', () => {
    expect(resolveCredential({ env: 'JUDGE_KEY' }, {})).toBeUndefined();
    expect(resolveCredential({ env: 'JUDGE_KEY' }, { JUDGE_KEY: undefined })).toBeUndefined();
    expect(resolveCredential({ env: 'JUDGE_KEY' }, { JUDGE_KEY: '  ' })).toBeUndefined();
  });

  it('does not read inherited properties', () => {
    expect(resolveCredential({ env: 'toString' }, {})).toBeUndefined();
  });
});
