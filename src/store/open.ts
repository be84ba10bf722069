import { Kysely, sql } from 'kysely';
import type { Clock } from '../core/index.js';
import {
  type StoreBackend,
  type StoreLogger,
  type StoreObserver,
  translatingDialect,
} from './backend.js';
import { StoreErrors } from './error-codes.js';
import { migrate } from './migrate.js';
import { MIGRATIONS } from './migrations/index.js';
import type { Store } from './ports.js';
import type { Database } from './schema.js';
import { KyselyStore } from './store.js';

/** The `store` section of the server config (`Config['store']` fits it). */
export interface StoreConfig {
  driver: 'sqlite' | 'postgres';
  /** PostgreSQL connection URL; required for `postgres`. */
  url?: string | undefined;
  /** Most pooled PostgreSQL connections (default 10). */
  pool_size?: number | undefined;
}

/** The parts of the server config the store reads (a whole `Config` fits it). */
export interface StoreServerConfig {
  store: StoreConfig;
  data_dir?: string | undefined;
}

export interface OpenStoreOptions {
  clock: Clock;
  /**
   * Where SQLite keeps `touchstone.db` (created if missing). Defaults to the config's
   * `data_dir`; required when only the `store` section is passed.
   */
  dataDir?: string | undefined;
  logger?: StoreLogger | undefined;
  /** Told how long statements waited for SQLite's write lock (telemetry). */
  observer?: StoreObserver | undefined;
}

const DEFAULT_POOL_SIZE = 10;

/** Each backend, and its driver, is loaded only by a process that uses it. */
async function createBackend(
  config: StoreConfig,
  dataDir: string | undefined,
  options: OpenStoreOptions,
): Promise<StoreBackend> {
  if (config.driver === 'postgres') {
    if (config.url === undefined || config.url === '') {
      throw StoreErrors.STORE_CONFIG_INVALID('store.url is required when store.driver is postgres');
    }
    const { createPostgresBackend } = await import('./postgres/backend.js');
    return createPostgresBackend({
      url: config.url,
      poolSize: config.pool_size ?? DEFAULT_POOL_SIZE,
      logger: options.logger,
    });
  }
  if (dataDir === undefined || dataDir === '') {
    throw StoreErrors.STORE_CONFIG_INVALID('data_dir is required for the sqlite store');
  }
  const { createSqliteBackend } = await import('./sqlite/backend.js');
  return createSqliteBackend(dataDir, options.observer);
}

/**
 * Connects, applies pending migrations (serialized across replicas) and returns the store.
 * Throws STORE_UNAVAILABLE when the database cannot be reached, STORE_MIGRATION_FAILED or
 * STORE_SCHEMA_TOO_NEW when its schema cannot be brought to this build's version.
 */
export async function openStore(
  config: StoreConfig | StoreServerConfig,
  options: OpenStoreOptions,
): Promise<Store> {
  const section = 'store' in config ? config.store : config;
  const dataDir = options.dataDir ?? ('store' in config ? config.data_dir : undefined);
  const backend = await createBackend(section, dataDir, options);
  const db = new Kysely<Database>({
    dialect: translatingDialect(backend.kyselyDialect, backend.translateError),
  });
  try {
    // Fail fast, naming the database, before the migration lock is taken.
    await sql`select 1`.execute(db);
    await migrate(db, backend, MIGRATIONS, { clock: options.clock, logger: options.logger });
  } catch (err) {
    await db.destroy().catch(() => undefined);
    throw err;
  }
  options.logger?.info({ driver: backend.dialect, target: backend.target }, 'store opened');
  return new KyselyStore(db, backend, { clock: options.clock, migrations: MIGRATIONS });
}
