import { CoreErrors, isTouchstoneError } from '../../core/index.js';
import { StoreErrors } from '../error-codes.js';

/** Socket-level failures: the server is down, unreachable, or dropped the connection. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
]);

/** pg's own connection failures carry no code, only these messages. */
const PG_CONNECTION_MESSAGES =
  /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection terminated due to connection timeout)/;

const CLOSED_MESSAGES =
  /^(Cannot use a pool after calling end on the pool|driver has already been destroyed)/;

/**
 * SQLSTATE classes that mean "the database is not usable right now": 08 connection exception,
 * 53 insufficient resources, 57P0x shutdown/crash/starting, 28 invalid authorization, 3D000 no
 * such database (the last two need an operator, but no request can succeed until then).
 */
function isUnavailableState(code: string): boolean {
  return (
    code.startsWith('08') ||
    code.startsWith('53') ||
    code.startsWith('28') ||
    code === '57P01' ||
    code === '57P02' ||
    code === '57P03' ||
    code === '3D000'
  );
}

/**
 * pg errors → store errors. Server messages for the states mapped to STORE_UNAVAILABLE are about
 * the connection (a user or database name at most), so they are kept; messages of data errors
 * (which may quote row values) never are.
 */
export function translatePgError(err: unknown, target: string): unknown {
  if (isTouchstoneError(err) || !(err instanceof Error)) return err;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (code === '23505') {
      return CoreErrors.ALREADY_EXISTS('a row with the same unique key already exists');
    }
    if (code === '40001' || code === '40P01') {
      const what = code === '40001' ? 'serialization failure' : 'deadlock';
      return StoreErrors.STORE_CONFLICT(`transaction rolled back after a ${what}; retry`, {
        cause: err,
      });
    }
    if (NETWORK_CODES.has(code) || isUnavailableState(code)) {
      return StoreErrors.STORE_UNAVAILABLE(
        `PostgreSQL at ${target} is unavailable: ${err.message} (${code})`,
        { cause: err },
      );
    }
    return err;
  }
  if (PG_CONNECTION_MESSAGES.test(err.message)) {
    return StoreErrors.STORE_UNAVAILABLE(`PostgreSQL at ${target} is unavailable: ${err.message}`, {
      cause: err,
    });
  }
  if (CLOSED_MESSAGES.test(err.message)) return StoreErrors.STORE_CLOSED('the store is closed');
  return err;
}
