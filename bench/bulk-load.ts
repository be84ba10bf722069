import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { systemClock } from '../src/core/index.js';
import { openStore, SQLITE_FILE_NAME, type StoreConfig } from '../src/store/index.js';

/**
 * Writes a bench's rows straight into the store's tables: the store's migrations (and the
 * triggers they install) first, as a server runs them, then `statements` of the database's
 * dialect in one transaction, then fresh planner statistics. Resolves to the milliseconds the
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
