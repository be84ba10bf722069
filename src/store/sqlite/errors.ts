import { CoreErrors, isTouchstoneError } from '../../core/index.js';
import { StoreErrors } from '../error-codes.js';

/** better-sqlite3 error codes (extended result codes as strings) → store errors. */
export function translateSqliteError(err: unknown, file: string): unknown {
  if (isTouchstoneError(err) || !(err instanceof Error)) return err;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && code.startsWith('SQLITE_')) {
    if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
      // The driver message names the columns but not the values; still, keep it out.
      return CoreErrors.ALREADY_EXISTS('a row with the same unique key already exists');
    }
    if (
      code.startsWith('SQLITE_BUSY') ||
      code.startsWith('SQLITE_LOCKED') ||
      code.startsWith('SQLITE_IOERR') ||
      code.startsWith('SQLITE_READONLY') ||
      code === 'SQLITE_FULL' ||
      code === 'SQLITE_CANTOPEN' ||
      code === 'SQLITE_PROTOCOL'
    ) {
      return StoreErrors.STORE_UNAVAILABLE(`SQLite database ${file} is unavailable (${code})`, {
        cause: err,
      });
    }
    return err;
  }
  if (err instanceof TypeError && /database connection is not open/i.test(err.message)) {
    return StoreErrors.STORE_CLOSED('the store is closed');
  }
  return err;
}
