import { defineErrors } from '../core/index.js';

/**
 * Errors of the storage layer. Messages name the database by host, port and database name (or
 * the SQLite file path) only: never a connection URL, user, password or row content.
 */
export const StoreErrors = defineErrors({
  STORE_UNAVAILABLE: {
    kind: 'unavailable',
    retryable: true,
    doc: 'The database cannot be reached, refused the connection, or is busy; retry later and check the database and `store.url`.',
  },
  STORE_OUTCOME_UNKNOWN: {
    kind: 'unavailable',
    retryable: true,
    doc: 'The connection to the database failed after a write or COMMIT was sent, so whether it took effect is unknown; check the result before retrying a write that is not idempotent (with an `Idempotency-Key`, retry with the same key).',
  },
  STORE_CONFLICT: {
    kind: 'aborted',
    retryable: true,
    doc: 'A database transaction lost a race (deadlock or serialization failure) and was rolled back; retry the operation.',
  },
  STORE_CLOSED: {
    kind: 'unavailable',
    retryable: true,
    doc: 'The store was used after the server began shutting down; retry against another replica or after restart.',
  },
  STORE_CONFIG_INVALID: {
    kind: 'invalid_argument',
    doc: '`store.url` is not a valid `postgres://` URL, or the data directory cannot be used; fix the server config.',
  },
  STORE_MIGRATION_FAILED: {
    kind: 'internal',
    doc: 'A schema migration failed at startup and was rolled back; the server log names the migration and the cause.',
  },
  STORE_SCHEMA_TOO_NEW: {
    kind: 'failed_precondition',
    doc: 'The database was migrated by a newer Touchstone than this one; run the newer version or restore a backup.',
  },
  STORE_TRANSACTION_MISUSE: {
    kind: 'internal',
    doc: 'A programming error: code inside `withTransaction` used the store itself instead of the transaction it was given.',
  },
});
