import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../../../test/support/process.js';
import { LoopWorker } from '../../core/index.js';
import { createSqliteBackend, SQLITE_FILE_NAME, withStatementCache } from './backend.js';
import { releases, waitingForLock, workersWaiting } from './write-turns.js';

describe('the SQLite statement cache', () => {
  const raw = new BetterSqlite3(':memory:');
  afterEach(() => raw.exec('drop table if exists t'));

  it('compiles a statement once and reuses it; a busy one (being iterated) is not shared', () => {
    raw.exec('create table t (x integer)');
    const db = withStatementCache(raw);
    const insert = db.prepare('insert into t (x) values (?)');
    expect(db.prepare('insert into t (x) values (?)')).toBe(insert);
    for (let i = 0; i < 3; i++) insert.run([i]);
    const select = db.prepare('select x from t order by x');
    const iterator = select.iterate([]);
    iterator.next();
    const again = db.prepare('select x from t order by x');
    expect(again).not.toBe(select);
    expect(again.all([])).toEqual([{ x: 0 }, { x: 1 }, { x: 2 }]);
    iterator.return?.();
    expect(db.prepare('select x from t order by x')).toBe(select);
  });

  it('keeps at most 256 statements, dropping the least recently used', () => {
    const db = withStatementCache(raw);
    const first = db.prepare('select 0');
    const second = db.prepare('select 1');
    for (let i = 2; i <= 255; i++) db.prepare(`select ${i}`);
    expect(db.prepare('select 0')).toBe(first); // now the most recent
    db.prepare('select 256'); // evicts `select 1`, the least recently used
    expect(db.prepare('select 0')).toBe(first);
    expect(db.prepare('select 1')).not.toBe(second);
  });
});

describe('the write lock, on the main thread', () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-sqlite-busy-'));
  const waits: number[] = [];
  const db = new Kysely<{ t: { x: number } }>({
    dialect: createSqliteBackend(dir, { onLockWait: (seconds) => waits.push(seconds) })
      .kyselyDialect,
  });
  const other = new BetterSqlite3(join(dir, SQLITE_FILE_NAME));
  afterEach(() => {
    if (other.inTransaction) other.exec('rollback');
  });

  it('is waited for on timers, so the event loop runs while another connection holds it; the wait is reported', async () => {
    await sql`create table if not exists t (x integer)`.execute(db);
    other.exec('begin immediate');
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 5);
    // Ends the other connection's transaction from a timer: a thread sleeping in SQLite's own
    // busy wait would never run it, and fail after its timeout instead.
    setTimeout(() => other.exec('insert into t (x) values (1); commit'), 200);
    const started = performance.now();
    await db.transaction().execute((tx) => sql`insert into t (x) values (2)`.execute(tx));
    clearInterval(ticker);
    expect(performance.now() - started).toBeLessThan(4_000);
    expect(ticks).toBeGreaterThan(10);
    // One statement (the BEGIN) waited, about as long as the other connection held the lock.
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeGreaterThan(0.19);
    expect(waits[0]).toBeLessThan(4);
    const rows = await sql<{ x: number }>`select x from t order by x`.execute(db);
    expect(rows.rows.map((r) => r.x)).toEqual([1, 2]);
  });

  it('gives up with SQLITE_BUSY after 5 s', async () => {
    other.exec('begin immediate');
    const started = performance.now();
    await expect(
      db.transaction().execute((tx) => sql`insert into t (x) values (3)`.execute(tx)),
    ).rejects.toMatchObject({ code: 'SQLITE_BUSY' });
    expect(performance.now() - started).toBeGreaterThan(4_900);
    expect(waits.at(-1)).toBeGreaterThan(4.9);
    other.exec('rollback');
    await db.destroy();
    other.close();
    rmSync(dir, { recursive: true, force: true });
  }, 15_000);
});

describe('the write lock let go', () => {
  it('is told to the other connections by a commit and by a write outside a transaction, not by a read', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'touchstone-sqlite-released-'));
    const db = new Kysely<{ t: { x: number } }>({
      dialect: createSqliteBackend(dir).kyselyDialect,
    });
    try {
      await sql`create table t (x integer)`.execute(db);
      let seen = releases();
      const told = () => {
        const now = releases();
        const changed = now !== seen;
        seen = now;
        return changed;
      };
      // A work queue's claim: an update in a transaction of its own.
      await sql`update t set x = 1 where x = 0`.execute(db);
      expect(told()).toBe(true);
      await db.insertInto('t').values({ x: 1 }).execute();
      expect(told()).toBe(true);
      await sql`select x from t`.execute(db);
      await db.selectFrom('t').selectAll().execute();
      expect(told()).toBe(false);
      await db.transaction().execute(async (tx) => {
        await sql`insert into t (x) values (2)`.execute(tx);
        expect(told()).toBe(false);
      });
      expect(told()).toBe(true);
    } finally {
      await db.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('write turns between the threads of a process', () => {
  it('counts a worker waiting for the lock, which writes once the main thread lets it go', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'touchstone-sqlite-turns-'));
    const db = new Kysely<{ t: { x: number } }>({
      dialect: createSqliteBackend(dir).kyselyDialect,
    });
    await sql`create table t (x integer)`.execute(db);
    const messages: string[] = [];
    const worker = new LoopWorker<{ type: string; value?: number }, { type: string }>({
      entry: new URL('./write-turns.testkit.js', import.meta.url),
      workerData: { dir },
      resourceLimits: {},
      fallback: { start: () => undefined, shutdown: async () => undefined },
      onMessage: (msg) => messages.push(msg.type),
      work: 'test',
      doing: 'testing',
    });
    try {
      worker.start();
      await eventually(async () => (worker.inWorker ? true : undefined));
      const count = (type: string) => messages.filter((m) => m === type).length;
      for (let round = 1; round <= 2; round++) {
        await db.transaction().execute(async (tx) => {
          await sql`insert into t (x) values (${2 * round - 1})`.execute(tx);
          // The worker tries to write while this transaction holds the lock: it waits, counted.
          worker.post({ type: 'write', value: 2 * round });
          await eventually(async () =>
            count('waiting') === round && workersWaiting() ? true : undefined,
          );
        });
        await eventually(async () => (count('written') === round ? true : undefined));
        expect(workersWaiting()).toBe(false);
      }
      const rows = await sql<{ x: number }>`select x from t order by rowid`.execute(db);
      expect(rows.rows.map((r) => r.x)).toEqual([1, 2, 3, 4]);
      // A worker's commits leave checkpoints to its timer until the WAL is 4,000 pages long.
      worker.post({ type: 'pages' });
      await eventually(async () => (messages.includes('pages 4000') ? true : undefined));
    } finally {
      await worker.shutdown();
      await db.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("lets a waiting worker write before the main thread's next transaction begins", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'touchstone-sqlite-turns-'));
    const db = new Kysely<{ t: { x: number } }>({
      dialect: createSqliteBackend(dir).kyselyDialect,
    });
    await sql`create table t (x integer)`.execute(db);
    // A worker's connection, its statement waiting for the lock (as whenNotBusy counts it).
    const other = new BetterSqlite3(join(dir, SQLITE_FILE_NAME));
    let waiting: { done(): void } | undefined = waitingForLock();
    try {
      const main = db.transaction().execute((tx) => sql`insert into t (x) values (2)`.execute(tx));
      // Well within the main thread's give-way (20 ms); a timer due sooner fires first.
      await new Promise((resolve) => setTimeout(resolve, 5));
      other.prepare('insert into t (x) values (1)').run();
      waiting.done();
      waiting = undefined;
      await main;
      const rows = await sql<{ x: number }>`select x from t order by rowid`.execute(db);
      expect(rows.rows.map((r) => r.x)).toEqual([1, 2]);
    } finally {
      waiting?.done();
      other.close();
      await db.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
