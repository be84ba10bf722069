import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Kysely, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { systemClock } from '../src/core/index.js';
import { openStore, SQLITE_FILE_NAME, type StoreConfig } from '../src/store/index.js';
import { rollupUpsert } from '../src/store/migrations/0015-score-rollup.js';

/**
 * Writes a bench's rows straight into the store's tables: the store's migrations (and the
 * triggers they install) first, as a server runs them, then `statements` of the database's
 * dialect in one transaction, then (SQLite, where the store adds what it inserts to the score
 * rollup: migration 20) the rollup of the results written, then fresh planner statistics. Resolves to the milliseconds the
 * statements took. Used only by benches, to load more rows than ingest would in their time.
 */
export async function bulkLoad(
  dataDir: string,
  storeConfig: StoreConfig,
  pgUrl: string | undefined,
  statements: (dialect: 'sqlite' | 'postgres') => string[],
): Promise<number> {
  const store = await openStore(storeConfig, { clock: systemClock, dataDir });
  await store.close();
  const started = performance.now();
  if (pgUrl === undefined) {
    const db = new Database(join(dataDir, SQLITE_FILE_NAME));
    db.pragma('journal_mode = WAL');
    db.transaction(() => {
      for (const statement of statements('sqlite')) db.exec(statement);
    })();
    const rollup = rollupUpsert('sqlite', sql.raw('results')).compile(
      new Kysely({ dialect: new SqliteDialect({ database: db }) }),
    );
    db.prepare(rollup.sql).run(...rollup.parameters);
    db.exec('analyze');
    db.pragma('wal_checkpoint(TRUNCATE)');
    db.close();
  } else {
    const client = new pg.Client({ connectionString: pgUrl });
    await client.connect();
    await client.query('begin');
    for (const statement of statements('postgres')) await client.query(statement);
    await client.query('commit');
    await client.query('vacuum analyze');
    await client.end();
  }
  return performance.now() - started;
}
