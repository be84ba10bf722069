import type {
  CompiledQuery,
  DatabaseConnection,
  Dialect,
  Driver,
  Kysely,
  QueryResult,
  TransactionSettings,
} from 'kysely';
import type { StoreDialect } from './ports.js';
import type { Database } from './schema.js';

/** The slice of a pino logger the store uses. */
export interface StoreLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
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

class TranslatingConnection implements DatabaseConnection {
  constructor(
    readonly inner: DatabaseConnection,
    private readonly translate: (err: unknown) => unknown,
  ) {}

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    try {
      return await this.inner.executeQuery<R>(compiledQuery);
    } catch (err) {
      throw this.translate(err);
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

  beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    return this.guard(this.inner.beginTransaction(this.unwrap(connection), settings));
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return this.guard(this.inner.commitTransaction(this.unwrap(connection)));
  }

  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    return this.guard(this.inner.rollbackTransaction(this.unwrap(connection)));
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
