import { describe, expect, it } from 'vitest';
import { CoreErrors, isTouchstoneError } from '../core/index.js';
import { sinceMs } from './service.js';

describe('the since of a rescore or backfill', () => {
  it('is an RFC 3339 time, read as epoch ms', () => {
    expect(sinceMs('2026-01-02T15:04:05Z', CoreErrors.INVALID_ARGUMENT)).toBe(
      Date.parse('2026-01-02T15:04:05Z'),
    );
  });

  it.each(['yesterday', '1767366245000', '2026-01-02', '2026-13-45T99:00:00Z'])(
    'refuses %s with the resource error naming since',
    (since) => {
      let thrown: unknown;
      try {
        sinceMs(since, CoreErrors.INVALID_ARGUMENT);
      } catch (err) {
        thrown = err;
      }
      expect(isTouchstoneError(thrown) && thrown.code).toBe(CoreErrors.INVALID_ARGUMENT.code);
      expect(isTouchstoneError(thrown) && thrown.details).toEqual([
        { path: 'since', message: 'an RFC 3339 time such as 2026-01-02T15:04:05Z' },
      ]);
    },
  );
});
