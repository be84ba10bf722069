import { describe, expect, it } from 'vitest';
import { translateSqliteError } from './errors.js';

function sqliteError(code: string): Error {
  return Object.assign(new Error(`sqlite says ${code}`), { code });
}

describe('translateSqliteError', () => {
  const file = '/data/touchstone.db';

  it('maps busy, locked, I/O and full-disk errors to STORE_UNAVAILABLE', () => {
    for (const code of [
      'SQLITE_BUSY',
      'SQLITE_BUSY_SNAPSHOT',
      'SQLITE_IOERR_WRITE',
      'SQLITE_FULL',
    ]) {
      const out = translateSqliteError(sqliteError(code), file);
      expect(out).toMatchObject({ code: 'STORE_UNAVAILABLE', retryable: true });
      expect((out as Error).message).toContain(file);
    }
  });

  it('maps unique and primary key violations to ALREADY_EXISTS', () => {
    expect(translateSqliteError(sqliteError('SQLITE_CONSTRAINT_UNIQUE'), file)).toMatchObject({
      code: 'ALREADY_EXISTS',
    });
    expect(translateSqliteError(sqliteError('SQLITE_CONSTRAINT_PRIMARYKEY'), file)).toMatchObject({
      code: 'ALREADY_EXISTS',
    });
  });

  it('maps a closed connection to STORE_CLOSED and leaves other errors alone', () => {
    expect(
      translateSqliteError(new TypeError('The database connection is not open'), file),
    ).toMatchObject({ code: 'STORE_CLOSED' });
    const other = sqliteError('SQLITE_ERROR');
    expect(translateSqliteError(other, file)).toBe(other);
  });
});
