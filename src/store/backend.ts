import type {
  CompiledQuery,
  DatabaseConnection,
  Dialect,
  Driver,
  Kysely,
  QueryResult,
  TransactionSettings,
} from 'kysely';
import { isTouchstoneError } from '../core/index.js';
import { StoreErrors } from './error-codes.js';
import type { StoreDialect } from './ports.js';
import type { Database } from './schema.js';

/** The slice of a pino logger the store uses. */
export interface StoreLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** What the store reports (telemetry implements it). */
export interface StoreObserver {
  /**
   * A statement on the thread answering requests waited `seconds` for another connection's
   * SQLite write lock (a worker thread's, another process's) before it ran or gave up.
   */
  onLockWait(seconds: number): void;
}

/**
 * What differs between SQLite and PostgreSQL, and nothing else: how to connect, which driver
 * errors mean what, how migrations are serialized across processes. Query code is shared.
 */
export interface StoreBackend {
  readonly dialect: StoreDialect;
  /** Where the database is, safe for messages: `host:port/db` or the SQLite file path. */
  readonly target: string;
  readonly kyselyDialect: Dialect;
  /** Maps a driver error to a TouchstoneError when it means something a caller can act on. */
  translateError(err: unknown): unknown;
  /** Runs `fn` on one connection while holding the cross-process migration lock. */
  withMigrationLock<T>(
    db: Kysely<Database>,
    fn: (conn: Kysely<Database>) => Promise<T>,
  ): Promise<T>;
  tableExists(db: Kysely<Database>, table: string): Promise<boolean>;
}

/**
 * Wraps a dialect so every driver failure (connect, query, begin, commit) passes through
 * `translate` once, at the lowest level, instead of in every repository method.
 */
export function translatingDialect(inner: Dialect, translate: (err: unknown) => unknown): Dialect {
  return {
    createDriver: () => new TranslatingDriver(inner.createDriver(), translate),
    createQueryCompiler: () => inner.createQueryCompiler(),
    createAdapter: () => inner.createAdapter(),
    createIntrospector: (db) => inner.createIntrospector(db),
  };
}

/** Socket failures that can only happen once a request was on the wire. */
const LOST_IN_FLIGHT_CODES = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ECONNABORTED']);

/**
 * True when the connection failed while a statement was outstanding, so the server may have
 * applied it (PostgreSQL: the socket dropped, or the session was terminated, mid-statement;
 * SQLite: an I/O error, which can strike after the WAL frames were written). Failures before
 * anything was sent (no connection, a client already known broken, a busy lock) are not.
 */
export function lostInFlight(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    return (
      LOST_IN_FLIGHT_CODES.has(code) ||
      code === '57P01' ||
      code === '57P02' ||
      code === '08006' ||
      code.startsWith('SQLITE_IOERR')
    );
  }
  return /^Connection terminated( unexpectedly)?$/.test(err.message);
}

/** Statements that may change data (raw SQL counts unless it is a plain SELECT). */
function mayWrite(query: CompiledQuery): boolean {
  switch (query.query.kind) {
    case 'SelectQueryNode':
      return false;
    case 'RawNode':
      return !/^\s*select\b/i.test(query.sql);
    default:
      return true;
  }
}

/**
 * A failure after a write or COMMIT was sent: the caller cannot tell whether it took effect, and
 * must not treat it as "nothing happened" (the idempotency layer answers it as uncertain).
 */
function outcomeUnknown(translated: unknown, raw: unknown): unknown {
  const what = isTouchstoneError(translated)
    ? translated.message
    : 'the database connection failed';
  return StoreErrors.STORE_OUTCOME_UNKNOWN(
    `${what}; the write was sent, so whether it took effect is unknown`,
    { cause: raw },
  );
}

class TranslatingConnection implements DatabaseConnection {
  /** Set between BEGIN and COMMIT/ROLLBACK: a statement's failure there rolls everything back. */
  inTransaction = false;
  /** Set when COMMIT failed: Kysely's rollback that follows must not replace that error. */
  commitFailed = false;

  constructor(
    readonly inner: DatabaseConnection,
    private readonly translate: (err: unknown) => unknown,
  ) {}

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    try {
      return await this.inner.executeQuery<R>(compiledQuery);
    } catch (err) {
      const translated = this.translate(err);
      if (!this.inTransaction && mayWrite(compiledQuery) && lostInFlight(err)) {
        throw outcomeUnknown(translated, err);
      }
      throw translated;
    }
  }

  async *streamQuery<R>(
    compiledQuery: CompiledQuery,
    chunkSize?: number,
  ): AsyncIterableIterator<QueryResult<R>> {
    try {
      yield* this.inner.streamQuery<R>(compiledQuery, chunkSize);
    } catch (err) {
      throw this.translate(err);
    }
  }
}

class TranslatingDriver implements Driver {
  // Drivers keep private state on their own connection objects (pg's release), so the inner
  // driver always gets its own connection back.
  private readonly wrapped = new WeakMap<DatabaseConnection, TranslatingConnection>();

  constructor(
    private readonly inner: Driver,
    private readonly translate: (err: unknown) => unknown,
  ) {}

  private async guard<T>(op: Promise<T>): Promise<T> {
    try {
      return await op;
    } catch (err) {
      throw this.translate(err);
    }
  }

  private unwrap(connection: DatabaseConnection): DatabaseConnection {
    return connection instanceof TranslatingConnection ? connection.inner : connection;
  }

  init(): Promise<void> {
    return this.guard(this.inner.init());
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const conn = await this.guard(this.inner.acquireConnection());
    let wrapper = this.wrapped.get(conn);
    if (wrapper === undefined) {
      wrapper = new TranslatingConnection(conn, this.translate);
      this.wrapped.set(conn, wrapper);
    }
    return wrapper;
  }

  private mark(connection: DatabaseConnection, inTransaction: boolean): void {
    if (connection instanceof TranslatingConnection) connection.inTransaction = inTransaction;
  }

  async beginTransaction(
    connection: DatabaseConnection,
    settings: TransactionSettings,
  ): Promise<void> {
    await this.guard(this.inner.beginTransaction(this.unwrap(connection), settings));
    this.mark(connection, true);
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    try {
      await this.inner.commitTransaction(this.unwrap(connection));
    } catch (err) {
      if (connection instanceof TranslatingConnection) connection.commitFailed = true;
      const translated = this.translate(err);
      throw lostInFlight(err) ? outcomeUnknown(translated, err) : translated;
    } finally {
      this.mark(connection, false);
    }
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    const afterFailedCommit =
      connection instanceof TranslatingConnection && connection.commitFailed;
    if (connection instanceof TranslatingConnection) connection.commitFailed = false;
    try {
      await this.guard(this.inner.rollbackTransaction(this.unwrap(connection)));
    } catch (err) {
      // After a failed COMMIT the connection is usually gone; the commit's error is the one
      // that says what happened, and Kysely rethrows whatever this throws instead of it.
      if (!afterFailedCommit) throw err;
    } finally {
      this.mark(connection, false);
    }
  }

  savepoint(
    connection: DatabaseConnection,
    name: string,
    compile: Parameters<NonNullable<Driver['savepoint']>>[2],
  ): Promise<void> {
    return this.guard(this.inner.savepoint!(this.unwrap(connection), name, compile));
  }

  rollbackToSavepoint(
    connection: DatabaseConnection,
    name: string,
    compile: Parameters<NonNullable<Driver['rollbackToSavepoint']>>[2],
  ): Promise<void> {
    return this.guard(this.inner.rollbackToSavepoint!(this.unwrap(connection), name, compile));
  }

  releaseSavepoint(
    connection: DatabaseConnection,
    name: string,
    compile: Parameters<NonNullable<Driver['releaseSavepoint']>>[2],
  ): Promise<void> {
    return this.guard(this.inner.releaseSavepoint!(this.unwrap(connection), name, compile));
  }

  releaseConnection(connection: DatabaseConnection): Promise<void> {
    return this.guard(this.inner.releaseConnection(this.unwrap(connection)));
  }

  destroy(): Promise<void> {
    return this.guard(this.inner.destroy());
  }
}
