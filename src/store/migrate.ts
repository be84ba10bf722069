import type { Kysely } from 'kysely';
import { type Clock, isTouchstoneError } from '../core/index.js';
import type { StoreBackend, StoreLogger } from './backend.js';
import { StoreErrors } from './error-codes.js';
import type { StoreDialect } from './ports.js';
import type { Database } from './schema.js';

export interface Migration {
  /** 1, 2, 3, … in list order. */
  version: number;
  /** Kebab-case, recorded beside the version. */
  name: string;
  /**
   * Applies the change inside a transaction (DDL is transactional on both dialects). The
   * database type is unknown on purpose: a migration sees the schema as it was, not as schema.ts
   * describes it today.
   */
  up(db: Kysely<unknown>, dialect: StoreDialect): Promise<void>;
}

export const MIGRATIONS_TABLE = 'schema_migrations';

export function checkMigrationList(migrations: readonly Migration[]): void {
  migrations.forEach((m, i) => {
    if (m.version !== i + 1) {
      throw new Error(`migration ${m.name} has version ${m.version}; expected ${i + 1}`);
    }
  });
}

async function appliedVersions(db: Kysely<Database>): Promise<Set<number>> {
  const rows = await db.selectFrom('schema_migrations').select('version').execute();
  return new Set(rows.map((r) => Number(r.version)));
}

export interface MigrateOptions {
  clock: Clock;
  logger?: StoreLogger | undefined;
}

/**
 * Applies pending migrations, each in its own transaction and recorded in `schema_migrations`,
 * while holding the backend's migration lock, so replicas starting together apply each once.
 */
export async function migrate(
  db: Kysely<Database>,
  backend: StoreBackend,
  migrations: readonly Migration[],
  options: MigrateOptions,
): Promise<void> {
  checkMigrationList(migrations);
  await backend.withMigrationLock(db, async (conn) => {
    await conn.schema
      .createTable(MIGRATIONS_TABLE)
      .ifNotExists()
      .addColumn('version', 'integer', (c) => c.primaryKey())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('applied_at', 'bigint', (c) => c.notNull())
      .execute();
    const applied = await appliedVersions(conn);
    const newest = Math.max(0, ...applied);
    if (newest > migrations.length) {
      throw StoreErrors.STORE_SCHEMA_TOO_NEW(
        `the database is at schema version ${newest}; this build knows versions up to ${migrations.length}`,
      );
    }
    for (const m of migrations) {
      if (applied.has(m.version)) continue;
      let ran = false;
      try {
        await conn.transaction().execute(async (trx) => {
          // Read again inside the transaction: another process sharing a SQLite file may have
          // applied it meanwhile (PostgreSQL replicas are already kept out by the lock).
          const done = await trx
            .selectFrom('schema_migrations')
            .select('version')
            .where('version', '=', m.version)
            .executeTakeFirst();
          if (done !== undefined) return;
          await m.up(trx as unknown as Kysely<unknown>, backend.dialect);
          await trx
            .insertInto('schema_migrations')
            .values({ version: m.version, name: m.name, applied_at: options.clock.now() })
            .execute();
          ran = true;
        });
      } catch (err) {
        if (isTouchstoneError(err) && err.retryable) throw err;
        throw StoreErrors.STORE_MIGRATION_FAILED(
          `store migration ${m.version} (${m.name}) failed and was rolled back`,
          { cause: err },
        );
      }
      if (ran) {
        options.logger?.info({ version: m.version, name: m.name }, 'applied store migration');
      }
    }
  });
}

/** True when every known migration is recorded (false on an empty database). */
export async function migrationsApplied(
  db: Kysely<Database>,
  backend: StoreBackend,
  migrations: readonly Migration[],
): Promise<boolean> {
  if (!(await backend.tableExists(db, MIGRATIONS_TABLE))) return false;
  const applied = await appliedVersions(db);
  return migrations.every((m) => applied.has(m.version));
}
