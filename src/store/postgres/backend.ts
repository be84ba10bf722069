import { type Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { StoreBackend, StoreLogger } from '../backend.js';
import type { Database } from '../schema.js';
import { translatePgError } from './errors.js';
import { describePostgresUrl } from './url.js';

const INT8_OID = 20;
const NUMERIC_OID = 1700;

/** First half of the migration advisory lock key ('TSMG'); the second is the schema's hash. */
const MIGRATION_LOCK_CLASS = 0x54534d47;

const CONNECT_TIMEOUT_MS = 10_000;

/**
 * Asked of each pooled session before its first query: large values (span chunks, trace records)
 * are compressed with lz4 instead of PostgreSQL's default pglz, for about a third less of the
 * server's CPU per stored span (docs/performance.md, "Compression of large values on
 * PostgreSQL"). A server built without lz4, or older than 14, refuses the setting and keeps pglz;
 * a column given its own COMPRESSION keeps it. Values stored before keep the method they were
 * written with: each value records its own.
 */
const LZ4_TOAST = "set default_toast_compression = 'lz4'";

/**
 * pg returns int8 (our epoch-ms times, `count(*)`) and numeric as strings so as not to lose
 * precision; every such value here fits a double, and numbers keep one query text for both
 * dialects. Set per pool, not on pg's global registry, so other pg users are unaffected.
 */
const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    (oid === INT8_OID || oid === NUMERIC_OID) && format !== 'binary'
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

export interface PostgresBackendOptions {
  url: string;
  poolSize: number;
  logger?: StoreLogger | undefined;
}

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

export function createPostgresBackend(options: PostgresBackendOptions): StoreBackend {
  const target = describePostgresUrl(options.url);
  const translateError = (err: unknown) => translatePgError(err, target);
  const clientConfig: pg.ClientConfig = {
    connectionString: options.url,
    types,
    application_name: 'touchstone',
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    keepAlive: true,
  };
  const pool = new pg.Pool({ ...clientConfig, max: options.poolSize });
  // An idle client that loses its connection emits 'error' on the pool; unhandled, it would
  // crash the process. The pool drops that client and the next query reconnects.
  pool.on('error', (err) => {
    options.logger?.warn(
      { code: errorCode(err), target },
      'an idle PostgreSQL connection failed; it will be replaced',
    );
  });
  // pg-pool removes its listener while a client is checked out, so a connection lost mid-query
  // would be an uncaught 'error' that ends the process. The same failure rejects the query,
  // which is where it is reported (and classified: see lostInFlight in ../backend.ts).
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
    // Queued ahead of the query the session was opened for; refused, the session goes on as is.
    client.query(LZ4_TOAST).catch(() => undefined);
  });

  return {
    dialect: 'postgres',
    target,
    kyselyDialect: new PostgresDialect({ pool }),
    translateError,

    // The lock lives on its own session rather than a pooled connection: ending that session
    // always releases it, even if an unlock or the connection fails halfway.
    async withMigrationLock<T>(
      db: Kysely<Database>,
      fn: (conn: Kysely<Database>) => Promise<T>,
    ): Promise<T> {
      const client = new pg.Client(clientConfig);
      client.on('error', () => {
        // Reported by the failing query below; losing the session also frees the lock.
      });
      try {
        await client.connect();
        const key = [MIGRATION_LOCK_CLASS];
        const lockSql = `hashtext(coalesce(current_schema(), ''))`;
        const tried = await client.query<{ ok: boolean }>(
          `select pg_try_advisory_lock($1, ${lockSql}) as ok`,
          key,
        );
        if (tried.rows[0]?.ok !== true) {
          options.logger?.info({ target }, 'waiting for another replica to finish migrations');
          await client.query(`select pg_advisory_lock($1, ${lockSql})`, key);
        }
        return await db.connection().execute(fn);
      } catch (err) {
        throw translateError(err);
      } finally {
        await client.end().catch(() => undefined);
      }
    },

    async tableExists(db: Kysely<Database>, table: string): Promise<boolean> {
      const { rows } = await sql<{ found: boolean }>`
        select to_regclass(${table}) is not null as found
      `.execute(db);
      return rows[0]?.found === true;
    },
  };
}
