import {
  CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  Kysely,
  type QueryResult,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  sql,
} from 'kysely';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  PG_URL,
  type StoreTarget,
  storeVariants,
  variantTarget,
} from '../../test/support/stores.js';
import { FakeClock, isTouchstoneError } from '../core/index.js';
import { translatingDialect } from './backend.js';
import {
  type IdempotencyOutcome,
  type IdempotencyReservation,
  type IdempotencyScope,
  openStore,
  type Store,
} from './index.js';

/**
 * The Idempotency-Key part of the store contract, on SQLite always and on PostgreSQL when
 * TOUCHSTONE_TEST_PG names a server; and the classification of failures after a write was sent
 * (STORE_OUTCOME_UNKNOWN) that the idempotency layer turns into "outcome uncertain".
 */

const T0 = Date.parse('2026-01-01T00:00:00Z');
const DAY = 24 * 60 * 60 * 1000;

const scope = (key: string, principal = 'key_a', operation = 'runs.create'): IdempotencyScope => ({
  principal,
  operation,
  key,
});

function reservation(
  key: string,
  createdAt: number,
  overrides: Partial<IdempotencyReservation> = {},
): IdempotencyReservation {
  return {
    ...scope(key),
    digest: `digest-${key}`,
    token: `token-${key}`,
    createdAt,
    expiresAt: createdAt + DAY,
    ...overrides,
  };
}

function outcome(body: string | Uint8Array, status = 200): IdempotencyOutcome {
  return {
    status,
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? Buffer.from(body) : body,
  };
}

for (const variant of storeVariants()) {
  describe(`idempotency store on ${variant.name}`, () => {
    let store: Store;
    let dispose: () => Promise<void>;
    let target: StoreTarget;
    const clock = new FakeClock(T0);

    beforeEach(async () => {
      target = await variantTarget(variant, 'touchstone-idem-store-');
      store = await target.open(clock);
      dispose = async () => {
        await store.close();
        await target.cleanup();
      };
    });
    afterEach(async () => dispose());

    it('reserves a key once: a second insert of the same scope is ALREADY_EXISTS', async () => {
      await store.idempotency.insert(reservation('k1', T0));
      await expect(store.idempotency.insert(reservation('k1', T0 + 1))).rejects.toMatchObject({
        code: 'ALREADY_EXISTS',
      });
      // The same key under another principal or operation is another scope.
      await store.idempotency.insert({ ...reservation('k1', T0), principal: 'key_b' });
      await store.idempotency.insert({ ...reservation('k1', T0), operation: 'runs.delete' });
      expect(await store.idempotency.get(scope('k1'))).toEqual({
        ...reservation('k1', T0),
        state: 'in_flight',
        heartbeatAt: T0,
      });
      expect(await store.idempotency.get(scope('k1', 'key_c'))).toBeUndefined();
    });

    it('completes only under the holding token, and keeps body bytes and headers exactly', async () => {
      await store.idempotency.insert(reservation('k1', T0));
      const body = new Uint8Array([0, 1, 2, 255, 254, 10, 13]);
      expect(await store.idempotency.complete(scope('k1'), 'other', outcome(body), T0 + DAY)).toBe(
        false,
      );
      expect(
        await store.idempotency.complete(
          scope('k1'),
          'token-k1',
          { ...outcome(body, 201), withheld: ['secret'] },
          T0 + 5 + DAY,
        ),
      ).toBe(true);
      const got = await store.idempotency.get(scope('k1'));
      expect(got).toMatchObject({ state: 'completed', expiresAt: T0 + 5 + DAY });
      expect(got?.outcome?.status).toBe(201);
      expect(got?.outcome?.headers).toEqual({ 'content-type': 'application/json' });
      expect(got?.outcome?.withheld).toEqual(['secret']);
      expect(Buffer.from(got?.outcome?.body ?? []).equals(Buffer.from(body))).toBe(true);
      // Completed is final: no second completion, no release, no heartbeat.
      expect(await store.idempotency.complete(scope('k1'), 'token-k1', outcome('{}'), T0)).toBe(
        false,
      );
      expect(await store.idempotency.release(scope('k1'), 'token-k1')).toBe(false);
      expect(await store.idempotency.heartbeat(scope('k1'), 'token-k1', T0 + 9)).toBe(false);
      expect(await store.idempotency.usage('key_a', 'runs.create')).toEqual({
        keys: 1,
        bytes: body.byteLength + JSON.stringify({ 'content-type': 'application/json' }).length,
      });
    });

    it('heartbeats, marks uncertain, takes over and releases, each fenced by the token', async () => {
      await store.idempotency.insert(reservation('k1', T0));
      expect(await store.idempotency.heartbeat(scope('k1'), 'token-k1', T0 + 10)).toBe(true);
      expect(await store.idempotency.heartbeat(scope('k1'), 'nope', T0 + 20)).toBe(false);
      expect((await store.idempotency.get(scope('k1')))?.heartbeatAt).toBe(T0 + 10);

      expect(await store.idempotency.markUncertain(scope('k1'), 'nope')).toBe(false);
      expect(await store.idempotency.markUncertain(scope('k1'), 'token-k1')).toBe(true);
      expect((await store.idempotency.get(scope('k1')))?.state).toBe('uncertain');
      // An uncertain record is no longer the holder's: it cannot renew or release it.
      expect(await store.idempotency.heartbeat(scope('k1'), 'token-k1', T0 + 30)).toBe(false);
      expect(await store.idempotency.release(scope('k1'), 'token-k1')).toBe(false);

      expect(await store.idempotency.takeOver(scope('k1'), 'nope', 't2', T0 + 40)).toBe(false);
      expect(await store.idempotency.takeOver(scope('k1'), 'token-k1', 't2', T0 + 40)).toBe(true);
      expect(await store.idempotency.get(scope('k1'))).toMatchObject({
        state: 'in_flight',
        token: 't2',
        heartbeatAt: T0 + 40,
        createdAt: T0,
      });
      expect(await store.idempotency.release(scope('k1'), 'token-k1')).toBe(false);
      expect(await store.idempotency.release(scope('k1'), 't2')).toBe(true);
      expect(await store.idempotency.get(scope('k1'))).toBeUndefined();
    });

    it('evicts the oldest keys past the count, never a live in-flight one or the kept key', async () => {
      for (let i = 0; i < 6; i++) {
        await store.idempotency.insert(reservation(`k${i}`, T0 + i * 1000));
        if (i !== 1) {
          await store.idempotency.complete(scope(`k${i}`), `token-k${i}`, outcome('x'), T0 + DAY);
        }
      }
      // k1 is in flight and renewed recently: live.
      await store.idempotency.heartbeat(scope('k1'), 'token-k1', T0 + 10_000);
      const left = await store.idempotency.evict('key_a', 'runs.create', {
        maxKeys: 3,
        maxBytes: Number.MAX_SAFE_INTEGER,
        liveSince: T0 + 5_000,
        keep: 'k2',
      });
      expect(left).toMatchObject({ keys: 3, evicted: 3 });
      const keys = [];
      for (let i = 0; i < 6; i++) if (await store.idempotency.get(scope(`k${i}`))) keys.push(i);
      expect(keys).toEqual([1, 2, 5]);

      // A stale in-flight record (not renewed since liveSince) is evictable like any other.
      const stale = await store.idempotency.evict('key_a', 'runs.create', {
        maxKeys: 1,
        maxBytes: Number.MAX_SAFE_INTEGER,
        liveSince: T0 + 20_000,
      });
      expect(stale).toMatchObject({ keys: 1, evicted: 2 });
      expect(await store.idempotency.get(scope('k5'))).toBeDefined();
    });

    it('evicts the oldest outcomes past the byte budget, within one scope only', async () => {
      for (let i = 0; i < 4; i++) {
        await store.idempotency.insert(reservation(`k${i}`, T0 + i));
        await store.idempotency.complete(
          scope(`k${i}`),
          `token-k${i}`,
          { status: 200, headers: {}, body: Buffer.alloc(1000) },
          T0 + DAY,
        );
      }
      await store.idempotency.insert({ ...reservation('other', T0), principal: 'key_b' });
      const perRow = 1000 + JSON.stringify({}).length;
      const left = await store.idempotency.evict('key_a', 'runs.create', {
        maxKeys: 1024,
        maxBytes: 2 * perRow + 1,
        liveSince: T0,
        keep: 'k0',
      });
      expect(left).toEqual({ keys: 2, bytes: 2 * perRow, evicted: 2 });
      expect(await store.idempotency.get(scope('k0'))).toBeDefined();
      expect(await store.idempotency.get(scope('k1'))).toBeUndefined();
      expect(await store.idempotency.get(scope('k2'))).toBeUndefined();
      expect(await store.idempotency.get(scope('k3'))).toBeDefined();
      expect(await store.idempotency.get(scope('other', 'key_b'))).toBeDefined();
    });

    it('deletes expired records in batches, oldest expiry first', async () => {
      for (let i = 0; i < 5; i++) {
        await store.idempotency.insert(reservation(`k${i}`, T0, { expiresAt: T0 + 100 + i }));
      }
      expect(await store.idempotency.deleteExpired(T0 + 99, 10)).toBe(0);
      expect(await store.idempotency.deleteExpired(T0 + 103, 2)).toBe(2);
      expect(await store.idempotency.get(scope('k0'))).toBeUndefined();
      expect(await store.idempotency.get(scope('k2'))).toBeDefined();
      expect(await store.idempotency.deleteExpired(T0 + 103, 10)).toBe(2);
      expect((await store.idempotency.usage('key_a', 'runs.create')).keys).toBe(1);
    });

    it('serializes a scope: the second transaction sees the first one’s reservation', async () => {
      // Two connections (PostgreSQL) or two writers on one file (SQLite) racing for one key: the
      // scope lock makes the loser read the winner's row instead of failing on the insert.
      // SQLite in one process: one connection (a second one would wait for the lock inside a
      // synchronous call, blocking the first); PostgreSQL: a second pool on the same schema.
      const second = variant.name === 'sqlite' ? store : await target.open(clock);
      try {
        const race = (s: Store, token: string) =>
          s.withTransaction(async (tx) => {
            await tx.idempotency.lockScope('key_a', 'runs.create');
            const existing = await tx.idempotency.get(scope('race'));
            if (existing !== undefined) return `saw ${existing.token}`;
            await new Promise((r) => setTimeout(r, 50));
            await tx.idempotency.insert(reservation('race', T0, { token }));
            return `inserted ${token}`;
          });
        const results = await Promise.all([race(store, 'a'), race(second, 'b')]);
        expect(results.filter((r) => r.startsWith('inserted'))).toHaveLength(1);
        const winner = results.find((r) => r.startsWith('inserted'))?.split(' ')[1];
        expect(results).toContain(`saw ${winner}`);
      } finally {
        if (second !== store) await second.close();
      }
    });
  });
}

/** A driver that fails the statements `fail` picks, to exercise the translating layer. */
function failingDialect(fail: (sqlText: string) => Error | undefined): Dialect {
  const connection: DatabaseConnection = {
    async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
      const err = fail(query.sql);
      if (err !== undefined) throw err;
      return { rows: [] };
    },
    streamQuery() {
      throw new Error('not used');
    },
  };
  const raw = (text: string) => CompiledQuery.raw(text);
  const driver: Driver = {
    init: async () => undefined,
    acquireConnection: async () => connection,
    beginTransaction: async (c) => void (await c.executeQuery(raw('begin'))),
    commitTransaction: async (c) => void (await c.executeQuery(raw('commit'))),
    rollbackTransaction: async (c) => void (await c.executeQuery(raw('rollback'))),
    releaseConnection: async () => undefined,
    destroy: async () => undefined,
  };
  return {
    createDriver: () => driver,
    createQueryCompiler: () => new SqliteQueryCompiler(),
    createAdapter: () => new SqliteAdapter(),
    createIntrospector: (db) => new SqliteIntrospector(db),
  };
}

const coded = (message: string, code?: string) =>
  Object.assign(new Error(message), code === undefined ? {} : { code });

async function codeOf(op: Promise<unknown>): Promise<string> {
  try {
    await op;
    return 'ok';
  } catch (err) {
    return isTouchstoneError(err) ? err.code : `raw: ${(err as Error).message}`;
  }
}

describe('failures after a write was sent (STORE_OUTCOME_UNKNOWN)', () => {
  // What the backends' translators make of such failures (STORE_UNAVAILABLE), kept raw here.
  const translate = (err: unknown) => (isTouchstoneError(err) ? err : coded('unavailable'));

  function db(fail: (sqlText: string) => Error | undefined) {
    return new Kysely<{ t: { a: number } }>({
      dialect: translatingDialect(failingDialect(fail), translate),
    });
  }

  it('a write outside a transaction that loses the connection is unknown; a read is not', async () => {
    const ioerr = db(() => coded('disk I/O error', 'SQLITE_IOERR_WRITE'));
    expect(await codeOf(ioerr.insertInto('t').values({ a: 1 }).execute())).toBe(
      'STORE_OUTCOME_UNKNOWN',
    );
    expect(await codeOf(ioerr.updateTable('t').set({ a: 2 }).execute())).toBe(
      'STORE_OUTCOME_UNKNOWN',
    );
    expect(await codeOf(sql`delete from t`.execute(ioerr))).toBe('STORE_OUTCOME_UNKNOWN');
    expect(await codeOf(ioerr.selectFrom('t').selectAll().execute())).toBe('raw: unavailable');
    expect(await codeOf(sql`select 1`.execute(ioerr))).toBe('raw: unavailable');

    const reset = db(() => coded('read ECONNRESET', 'ECONNRESET'));
    expect(await codeOf(reset.insertInto('t').values({ a: 1 }).execute())).toBe(
      'STORE_OUTCOME_UNKNOWN',
    );
    const terminated = db(() => coded('Connection terminated unexpectedly'));
    expect(await codeOf(terminated.deleteFrom('t').execute())).toBe('STORE_OUTCOME_UNKNOWN');
  });

  it('a failure known to have applied nothing stays what it was', async () => {
    // A busy lock, or a client already known broken, never sent the statement.
    const busy = db(() => coded('database is locked', 'SQLITE_BUSY'));
    expect(await codeOf(busy.insertInto('t').values({ a: 1 }).execute())).toBe('raw: unavailable');
    const broken = db(() =>
      coded('Client has encountered a connection error and is not queryable'),
    );
    expect(await codeOf(broken.insertInto('t').values({ a: 1 }).execute())).toBe(
      'raw: unavailable',
    );
  });

  it('inside a transaction only a COMMIT that loses the connection is unknown', async () => {
    // A statement failing mid-transaction rolls the whole transaction back: nothing applied.
    const midway = db((text) =>
      /^insert/i.test(text) ? coded('read ECONNRESET', 'ECONNRESET') : undefined,
    );
    expect(
      await codeOf(
        midway.transaction().execute(async (trx) => trx.insertInto('t').values({ a: 1 }).execute()),
      ),
    ).toBe('raw: unavailable');

    const atCommit = db((text) =>
      text === 'commit' ? coded('Connection terminated unexpectedly') : undefined,
    );
    expect(
      await codeOf(
        atCommit
          .transaction()
          .execute(async (trx) => trx.insertInto('t').values({ a: 1 }).execute()),
      ),
    ).toBe('STORE_OUTCOME_UNKNOWN');
    // After the failed commit the connection is no longer in a transaction: a later write that
    // loses the connection is unknown again, a busy commit is not.
    const busyCommit = db((text) =>
      text === 'commit' ? coded('database is locked', 'SQLITE_BUSY') : undefined,
    );
    expect(
      await codeOf(
        busyCommit
          .transaction()
          .execute(async (trx) => trx.insertInto('t').values({ a: 1 }).execute()),
      ),
    ).toBe('raw: unavailable');
  });
});

/**
 * A TCP proxy in front of PostgreSQL that, once armed, forwards the next client message matching
 * `trigger` and then cuts the client's connection as soon as the server answers it: the server
 * did the work, the client never hears so. The realistic "commit was sent, then the connection
 * dropped".
 */
class CuttingProxy {
  trigger: RegExp | undefined;
  private constructor(
    private readonly server: import('node:net').Server,
    readonly port: number,
  ) {}

  static async start(host: string, port: number): Promise<CuttingProxy> {
    const net = await import('node:net');
    let proxy: CuttingProxy | undefined;
    const server = net.createServer((client) => {
      const upstream = net.connect(port, host);
      let cut = false;
      client.on('data', (data) => {
        upstream.write(data);
        const trigger = proxy?.trigger;
        if (trigger?.test(data.toString('latin1'))) {
          if (proxy) proxy.trigger = undefined;
          cut = true;
        }
      });
      upstream.on('data', (data) => {
        if (cut) {
          client.destroy();
          upstream.destroy();
          return;
        }
        client.write(data);
      });
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    proxy = new CuttingProxy(server, (server.address() as import('node:net').AddressInfo).port);
    return proxy;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

describe.skipIf(PG_URL === undefined || PG_URL === '')(
  'PostgreSQL connection cut after the server applied the write',
  () => {
    let proxy: CuttingProxy;
    let store: Store;
    let admin: pg.Client;
    let dispose: () => Promise<void>;

    beforeEach(async () => {
      const variant = storeVariants().find((v) => v.name === 'postgres');
      if (variant === undefined) throw new Error('no PostgreSQL variant');
      const opened = await variant.open();
      const url = new URL((opened.overrides.store as { url: string }).url);
      proxy = await CuttingProxy.start(url.hostname, Number(url.port || 5432));
      const direct = url.toString();
      url.hostname = '127.0.0.1';
      url.port = String(proxy.port);
      store = await openStore(
        { driver: 'postgres', url: url.toString(), pool_size: 2 },
        { clock: new FakeClock(T0) },
      );
      admin = new pg.Client({ connectionString: direct });
      await admin.connect();
      dispose = async () => {
        await store.close();
        await admin.end();
        await proxy.close();
        await opened.dispose();
      };
    });
    afterEach(async () => dispose());

    const stored = async (key: string) =>
      (await admin.query('select state from idempotency_keys where key = $1', [key])).rows;

    it('a COMMIT answered after the cut is STORE_OUTCOME_UNKNOWN, and it did commit', async () => {
      proxy.trigger = /commit/i;
      const err = await store
        .withTransaction(async (tx) => tx.idempotency.insert(reservation('cut', T0)))
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toMatchObject({ code: 'STORE_OUTCOME_UNKNOWN', kind: 'unavailable' });
      expect(String((err as Error).message)).not.toMatch(/password/i);
      expect(await stored('cut')).toEqual([{ state: 'in_flight' }]);
      // The pool recovers: the next statement runs on a fresh connection.
      expect(await store.idempotency.get(scope('cut'))).toMatchObject({ state: 'in_flight' });
    });

    it('a single write outside a transaction cut after the server ran it is unknown', async () => {
      proxy.trigger = /insert into "idempotency_keys"/i;
      await expect(store.idempotency.insert(reservation('single', T0))).rejects.toMatchObject({
        code: 'STORE_OUTCOME_UNKNOWN',
      });
      expect(await stored('single')).toEqual([{ state: 'in_flight' }]);
    });

    it('a read cut the same way is plainly unavailable', async () => {
      await store.idempotency.insert(reservation('read', T0));
      proxy.trigger = /select/i;
      await expect(store.idempotency.get(scope('read'))).rejects.toMatchObject({
        code: 'STORE_UNAVAILABLE',
      });
    });
  },
);
