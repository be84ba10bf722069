import { describe, expect, it } from 'vitest';
import { translatePgError } from './errors.js';

function pgError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

describe('translatePgError', () => {
  const target = 'db:5432/touchstone';

  it('maps connection failures to STORE_UNAVAILABLE naming the target', () => {
    for (const err of [
      pgError('ECONNREFUSED', 'connect ECONNREFUSED 10.0.0.1:5432'),
      pgError('57P01', 'terminating connection due to administrator command'),
      pgError('53300', 'sorry, too many clients already'),
      pgError('28P01', 'password authentication failed for user "app"'),
      pgError('08006', 'connection failure'),
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
    ]) {
      const out = translatePgError(err, target);
      expect(out).toMatchObject({ code: 'STORE_UNAVAILABLE', retryable: true });
      expect((out as Error).message).toContain(target);
    }
  });

  it('maps deadlocks and serialization failures to retryable STORE_CONFLICT', () => {
    expect(translatePgError(pgError('40P01', 'deadlock detected'), target)).toMatchObject({
      code: 'STORE_CONFLICT',
      kind: 'aborted',
      retryable: true,
    });
    expect(translatePgError(pgError('40001', 'could not serialize'), target)).toMatchObject({
      code: 'STORE_CONFLICT',
    });
  });

  it('maps unique violations to ALREADY_EXISTS without the driver detail', () => {
    const err = Object.assign(pgError('23505', 'duplicate key value violates unique constraint'), {
      detail: 'Key (secret_hash)=(abc123) already exists.',
    });
    const out = translatePgError(err, target) as Error;
    expect(out).toMatchObject({ code: 'ALREADY_EXISTS' });
    expect(out.cause).toBeUndefined();
    expect(out.message).not.toContain('abc123');
  });

  it('maps use after close to STORE_CLOSED', () => {
    expect(
      translatePgError(new Error('Cannot use a pool after calling end on the pool'), target),
    ).toMatchObject({ code: 'STORE_CLOSED' });
  });

  it('leaves other errors alone', () => {
    const syntax = pgError('42601', 'syntax error at or near "selec"');
    expect(translatePgError(syntax, target)).toBe(syntax);
    expect(translatePgError('text', target)).toBe('text');
  });
});
