/**
 * @module store
 * Persistence: the storage ports (ports.ts) in domain terms, and `openStore`, which connects to
 * SQLite (embedded default) or PostgreSQL, applies migrations and returns a `Store`. Owns the
 * schema, migrations, dialect adapters and leases. Imports core and config types only; Kysely
 * and driver types never leave this folder. Domain areas import the ports from here; only
 * the composition root (app/) and store tests call `openStore`.
 */

export type { StoreLogger, StoreObserver } from './backend.js';
export { StoreErrors } from './error-codes.js';
export {
  type OpenStoreOptions,
  openStore,
  type StoreConfig,
  type StoreServerConfig,
} from './open.js';
export * from './ports.js';
export { SQLITE_FILE_NAME } from './sqlite/backend.js';
