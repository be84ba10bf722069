import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isMainThread } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import {
  CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Kysely,
  SqliteAdapter,
  type SqliteDatabase,
  type SqliteDialectConfig,
  SqliteDriver,
  SqliteIntrospector,
  SqliteQueryCompiler,
  sql,
} from 'kysely';
import type { StoreBackend, StoreObserver } from '../backend.js';
import { StoreErrors } from '../error-codes.js';
import type { Database } from '../schema.js';
import { translateSqliteError } from './errors.js';
import {
  awaitReleaseBlocking,
  giveWayToWorkers,
  released,
  releasedSince,
  releases,
  waitingForLock,
  workersWaiting,
} from './write-turns.js';

export const SQLITE_FILE_NAME = 'touchstone.db';

/** How long a statement waits for another connection's write lock before STORE_UNAVAILABLE. */
const BUSY_TIMEOUT_MS = 5_000;

/**
 * SQLite's own busy wait would sleep the thread that answers every request (reads, health checks)
 * for as long as another connection holds the write lock, and it learns the lock is free only at
 * its next sleep's end. So connections have no busy timeout: a statement that finds the lock taken
 * fails at once with SQLITE_BUSY and is tried again as soon as another connection of the process
 * lets the lock go (write-turns.ts), or after a timeout doubling from 1 ms to 50 ms (a connection
 * of another process), until BUSY_TIMEOUT_MS has passed. The main thread waits without blocking,
 * so the event loop serves requests meanwhile; a worker thread blocks: nothing else runs on it.
 */
const BUSY_RETRY_MAX_MS = 50;

function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/**
 * Runs a statement, trying again while another connection holds the lock (see above); the time it
 * waited goes to `observer`.
 */
async function whenNotBusy<T>(run: () => Promise<T>, observer?: StoreObserver): Promise<T> {
  const started = performance.now();
  const deadline = started + BUSY_TIMEOUT_MS;
  let waited = false;
  let counted: { done(): void } | undefined;
  try {
    for (let wait = 1; ; wait = Math.min(2 * wait, BUSY_RETRY_MAX_MS)) {
      const seen = releases();
      try {
        return await run();
      } catch (err) {
        if (!isBusy(err) || performance.now() + wait > deadline) throw err;
        waited = true;
        if (!isMainThread) {
          counted ??= waitingForLock();
          awaitReleaseBlocking(seen, wait);
        } else {
          await releasedSince(seen, wait);
        }
      }
    }
  } finally {
    counted?.done();
    if (waited) observer?.onLockWait((performance.now() - started) / 1000);
  }
}

/**
 * Checkpoints (copying the WAL into the database file, with an fsync of each) run on the thread
 * whose commit takes the WAL past `wal_autocheckpoint` pages: by default mostly the one answering
 * OTLP requests, which they stalled for about a tenth of its time. So a connection opened in a
 * worker thread (trace completion's or scoring's) runs a passive checkpoint every
 * CHECKPOINT_INTERVAL_MS (it waits for no one and blocks no one), and every connection
 * checkpoints on commit only past BACKSTOP_PAGES (16 MB of WAL): when no worker runs (CLI
 * commands, the in-process completer) or it falls behind. A worker's commits left at SQLite's
 * default (1,000 pages) each ran a checkpoint of their own at 1,000 traces/s, the WAL being past
 * it between the timer's: the scoring worker's claims took 1.7 ms instead of 0.5, the main thread
 * waiting behind them. Durability is unchanged: a committed transaction is in the WAL either way.
 */
const CHECKPOINT_INTERVAL_MS = 100;
const BACKSTOP_PAGES = 4000;

/** A statement outside a transaction that starts so takes no write lock; any other may. */
const READS = /^\s*select\b/i;

/**
 * Transactions start with BEGIN IMMEDIATE: a deferred transaction that reads and then writes
 * fails at once with SQLITE_BUSY (no busy wait) when another process wrote in between; taking the
 * write lock up front makes it wait for the lock (whenNotBusy) instead. In one process Kysely
 * already serializes everything through the single connection, so nothing is lost.
 */
class ImmediateSqliteDriver extends SqliteDriver {
  constructor(
    config: SqliteDialectConfig,
    private readonly inTransaction: () => boolean,
    private readonly observer: StoreObserver | undefined,
  ) {
    super(config);
  }

  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    // The main thread lets a worker waiting for the lock go first (write-turns.ts).
    if (isMainThread && workersWaiting()) await giveWayToWorkers();
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }

  /**
   * Statements wait for the write lock (see whenNotBusy); a statement that ends a transaction, or
   * writes outside one (its own transaction: a work queue's claim), tells the process's other
   * connections that the lock is free. Without the second, a statement waiting behind a claim
   * learned it only at its next timer.
   */
  override async acquireConnection(): Promise<DatabaseConnection> {
    const connection = await super.acquireConnection();
    const { inTransaction, observer } = this;
    return {
      async executeQuery(query) {
        const wasIn = inTransaction();
        try {
          return await whenNotBusy(() => connection.executeQuery(query), observer);
        } finally {
          if (!inTransaction() && (wasIn || !READS.test(query.sql))) released();
        }
      },
      streamQuery: (query, chunkSize) => connection.streamQuery(query, chunkSize),
    };
  }
}

/**
 * Prepared statements kept per connection. better-sqlite3 compiles the SQL on every `prepare()`,
 * and Kysely prepares every query it runs: for the statements run per trace or per request that
 * compilation was a tenth of the completion worker's time. Statements longer than
 * MAX_CACHED_SQL (one-off multi-row statements) are not kept.
 */
const STATEMENT_CACHE_SIZE = 256;
const MAX_CACHED_SQL = 16_384;

/** The connection Kysely sees: `prepare()` answers from an LRU of compiled statements. */
export function withStatementCache(database: BetterSqlite3.Database): SqliteDatabase {
  const cache = new Map<string, BetterSqlite3.Statement>();
  return {
    close: () => database.close(),
    prepare(text: string) {
      const cached = cache.get(text);
      // A statement still being iterated (a streamed query) cannot run again until it is done.
      if (cached !== undefined && !cached.busy) {
        cache.delete(text);
        cache.set(text, cached);
        return cached;
      }
      const statement = database.prepare(text);
      if (cached === undefined && text.length <= MAX_CACHED_SQL) {
        cache.set(text, statement);
        if (cache.size > STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value as string);
      }
      return statement;
    },
  };
}

function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'unknown error';
}

function checkpointPeriodically(database: BetterSqlite3.Database): void {
  const timer = setInterval(() => {
    if (!database.open) {
      clearInterval(timer);
      return;
    }
    try {
      database.pragma('wal_checkpoint(PASSIVE)');
    } catch {
      // Retried on the next tick; a failing disk surfaces in the commits that store data.
    }
  }, CHECKPOINT_INTERVAL_MS);
  timer.unref();
}

/**
 * Opens (creating if needed) `<dataDir>/touchstone.db` in WAL mode; on the main thread, the time
 * statements wait for the write lock goes to `observer`.
 */
export function createSqliteBackend(dataDir: string, observer?: StoreObserver): StoreBackend {
  const dir = resolve(dataDir);
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    throw StoreErrors.STORE_CONFIG_INVALID(
      `cannot create the data directory ${dir} (${errorCode(err)})`,
      { cause: err },
    );
  }
  const file = join(dir, SQLITE_FILE_NAME);
  let database: BetterSqlite3.Database;
  try {
    database = new BetterSqlite3(file);
  } catch (err) {
    throw StoreErrors.STORE_UNAVAILABLE(`cannot open SQLite database ${file} (${errorCode(err)})`, {
      cause: err,
    });
  }
  try {
    database.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    database.pragma('journal_mode = WAL');
    // With WAL, NORMAL loses at most the last transactions on power loss, never integrity.
    database.pragma('synchronous = NORMAL');
    database.pragma('foreign_keys = ON');
    database.pragma(`wal_autocheckpoint = ${BACKSTOP_PAGES}`);
    if (!isMainThread) checkpointPeriodically(database);
    // Statements wait for the lock themselves (whenNotBusy).
    database.pragma('busy_timeout = 0');
  } catch (err) {
    database.close();
    throw translateSqliteError(err, file);
  }

  const config = { database: withStatementCache(database) };
  const kyselyDialect: Dialect = {
    createDriver: () => new ImmediateSqliteDriver(config, () => database.inTransaction, observer),
    createQueryCompiler: () => new SqliteQueryCompiler(),
    createAdapter: () => new SqliteAdapter(),
    createIntrospector: (db) => new SqliteIntrospector(db),
  };

  return {
    dialect: 'sqlite',
    target: file,
    kyselyDialect,
    translateError: (err) => translateSqliteError(err, file),
    // Every migration runs in a BEGIN IMMEDIATE transaction that re-reads what is applied, which
    // is all the serialization processes sharing the file need.
    withMigrationLock: (db, fn) => db.connection().execute(fn),
    async tableExists(db: Kysely<Database>, table: string): Promise<boolean> {
      const { rows } = await sql<{ n: number }>`
        select count(*) as n from sqlite_master where type = 'table' and name = ${table}
      `.execute(db);
      return (rows[0]?.n ?? 0) > 0;
    },
  };
}
