import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { freshPgSchema, PG_URL, type PgSchema } from '../../test/support/stores.js';
import { FakeClock, type Result } from '../core/index.js';
import { openStore, type Store } from './index.js';
import type { PolicyResults, ScoreAggregateFilter, StoreDialect } from './ports.js';
import type { Database as Tables } from './schema.js';
import { aggregateScores, rangePieces } from './score-aggregate.js';
import { SQLITE_FILE_NAME } from './sqlite/backend.js';

/**
 * The score rollup (migration 15) answers aggregates exactly as reading every result does: after
 * inserts, replaced versions, annotations changed in place, results deleted, and when backfilled
 * by the migration. Scores are multiples of 1/16, so sums in any order are exact and compared
 * with `toEqual`. SQLite always; PostgreSQL when TOUCHSTONE_TEST_PG is set.
 */

const T0 = Date.parse('2026-03-01T00:00:00Z');
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const traceId = (n: number) => n.toString(16).padStart(32, '0');

interface Target {
  dialect: StoreDialect;
  open(): Promise<Store>;
  /** A connection of the test's own, for the per-result answer and the rollup's rows. */
  db: Kysely<Tables>;
  cleanup(): Promise<void>;
}

async function sqliteTarget(): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-score-rollup-'));
  const open = () => openStore({ driver: 'sqlite' }, { clock: new FakeClock(T0), dataDir: dir });
  await (await open()).close();
  const file = new Database(join(dir, SQLITE_FILE_NAME));
  const db = new Kysely<Tables>({ dialect: new SqliteDialect({ database: file }) });
  return {
    dialect: 'sqlite',
    open,
    db,
    async cleanup() {
      await db.destroy();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function pgTarget(url: string): Promise<Target> {
  const schema: PgSchema = await freshPgSchema(url);
  const open = () =>
    openStore({ driver: 'postgres', url: schema.url, pool_size: 2 }, { clock: new FakeClock(T0) });
  await (await open()).close();
  const db = new Kysely<Tables>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: schema.url, max: 1 }) }),
  });
  return {
    dialect: 'postgres',
    open,
    db,
    async cleanup() {
      await db.destroy();
      await schema.drop();
    },
  };
}

/** A deterministic stream of numbers in [0, 1). */
function numbers(seed: number) {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return x / 2147483648;
  };
}

const sixteenths = (r: () => number) => Math.floor(r() * 64) / 16;

function results(r: () => number, evaluators: string[]): Result[] {
  return evaluators.map((evaluator) => {
    if (r() < 0.1) {
      return { evaluator, outcome: 'OUTCOME_ERROR', scores: [], reason: 'x', durationMs: 1 };
    }
    return {
      evaluator,
      outcome: 'OUTCOME_SCORED',
      scores: [
        { name: `${evaluator}.value`, value: sixteenths(r) },
        { name: `${evaluator}.pass`, passed: r() < 0.5 },
        { name: `${evaluator}.label`, label: 'none' },
      ],
      durationMs: 1,
    };
  });
}

/** Ranges and buckets that split into hour rows, minute rows and results, or only results. */
function filters(): ScoreAggregateFilter[] {
  const out: ScoreAggregateFilter[] = [];
  const ranges: [number, number][] = [
    [T0, T0 + 6 * HOUR],
    [T0 - HOUR, T0 + 7 * HOUR],
    [T0 + 17 * MINUTE + 1234, T0 + 4 * HOUR + 41 * MINUTE + 59_999],
    [T0 + 90 * MINUTE + 5, T0 + 92 * MINUTE],
  ];
  for (const [since, until] of ranges) {
    for (const bucketMs of [MINUTE, 5 * MINUTE, 90_000, HOUR, 2 * HOUR, 7 * MINUTE]) {
      out.push({ project: 'p', since, until, bucketMs });
    }
    out.push({ project: 'p', policy: 'quality', since, until, bucketMs: HOUR });
    out.push({ project: 'p', policy: 'quality', evaluator: 'b', since, until, bucketMs: HOUR });
    out.push({ project: 'p', evaluator: 'a', since, until, bucketMs: 5 * MINUTE });
  }
  return out;
}

function contract(make: () => Promise<Target>): void {
  let target: Target;
  let store: Store;

  beforeEach(async () => {
    target = await make();
    store = await target.open();
  });

  afterEach(async () => {
    await store.close();
    await target.cleanup();
  });

  /** Results of 40 traces: the first 20 one policy at a time, the others in batches. */
  async function scoreMany(seed: number): Promise<void> {
    const r = numbers(seed);
    let batch: PolicyResults[] = [];
    for (let n = 0; n < 40; n++) {
      const id = traceId(n);
      for (const [policy, evaluators] of [
        ['quality', ['a', 'b']],
        ['safety', ['a']],
      ] as const) {
        const version = {
          project: n % 7 === 0 ? 'other' : 'p',
          traceId: id,
          policy,
          digest: 'd1',
          results: results(r, [...evaluators]),
          scoredAt: T0 + Math.floor(r() * 6 * HOUR),
        };
        if (n < 20) await store.results.insert(version, false);
        else batch.push(version);
      }
      if (batch.length >= 8) {
        // One of them stored already: it stays as it is, counted once.
        const again = batch[0];
        const inserted = await store.results.insertMany(batch);
        expect(inserted).toEqual(batch.map(() => true));
        if (again !== undefined) expect(await store.results.insertMany([again])).toEqual([false]);
        batch = [];
      }
    }
    if (batch.length > 0) await store.results.insertMany(batch);
  }

  async function expectRollupAnswers(): Promise<void> {
    for (const filter of filters()) {
      const fromRollup = await store.results.aggregate(filter);
      const fromResults = await aggregateScores(target.db, target.dialect, filter, []);
      expect(fromRollup, JSON.stringify(filter)).toEqual(fromResults);
    }
  }

  it('answers as the results do after inserts', async () => {
    await scoreMany(1);
    await expectRollupAnswers();
    const any = await store.results.aggregate({
      project: 'p',
      since: T0,
      until: T0 + 6 * HOUR,
      bucketMs: HOUR,
    });
    expect(any.length).toBeGreaterThan(0);
  });

  it('follows replaced versions, changed annotations and deleted results', async () => {
    await scoreMany(2);
    const r = numbers(3);
    for (let n = 1; n < 40; n += 3) {
      // A replace deletes the version's rows and writes others (fewer evaluators, other times).
      await store.results.insert(
        {
          project: 'p',
          traceId: traceId(n),
          policy: 'quality',
          digest: 'd1',
          results: results(r, n % 2 === 0 ? ['a'] : ['b', 'a']),
          scoredAt: T0 + Math.floor(r() * 6 * HOUR),
        },
        true,
      );
      for (const value of [0.25, 0.75]) {
        await store.results.annotate({
          project: 'p',
          traceId: traceId(n),
          annotatedAt: T0 + Math.floor(r() * 6 * HOUR),
          result: {
            evaluator: 'rating',
            outcome: 'OUTCOME_SCORED',
            scores: [{ name: 'rating', value }],
            durationMs: 0,
            annotator: { principal: 'ann', kind: 'human' },
          },
        });
      }
    }
    await target.db
      .deleteFrom('results')
      .where('project', '=', 'p')
      .where('policy', '=', 'safety')
      .where('trace_id', '<', traceId(20))
      .execute();
    await target.db
      .updateTable('results')
      .set({ outcome: 'OUTCOME_ERROR' })
      .where('project', '=', 'p')
      .where('evaluator', '=', 'b')
      .where('trace_id', '>', traceId(30))
      .execute();
    await expectRollupAnswers();
    const emptied = await target.db
      .selectFrom('score_rollup')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('n', '<=', 0)
      .executeTakeFirstOrThrow();
    expect(Number(emptied.n)).toBe(0);
    await target.db.deleteFrom('results').execute();
    const left = await target.db
      .selectFrom('score_rollup')
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirstOrThrow();
    expect(Number(left.n)).toBe(0);
  });

  it('backfills results stored before the migration', async () => {
    await scoreMany(4);
    await store.close();
    // Undo migration 15 (results stay), then let the store apply it again.
    const { db } = target;
    if (target.dialect === 'sqlite') {
      // Migration 20 dropped the insert trigger on SQLite.
      for (const op of ['insert', 'update', 'delete']) {
        await sql`drop trigger if exists ${sql.raw(`score_rollup_${op}`)}`.execute(db);
      }
    } else {
      await sql`drop function score_rollup_sync() cascade`.execute(db);
    }
    await sql`drop table score_rollup`.execute(db);
    await db
      .deleteFrom('schema_migrations' as 'results')
      .where(sql`version`, '=', 15)
      .execute();
    store = await target.open();
    await expectRollupAnswers();
  });
}

describe('score rollup', () => {
  it('splits a range into hours, minutes and the edges left', () => {
    expect(rangePieces(T0 + 30_000, T0 + 2 * HOUR + 90_000, [HOUR, MINUTE])).toEqual([
      { from: T0 + 30_000, to: T0 + MINUTE },
      { from: T0 + MINUTE, to: T0 + HOUR, spanMs: MINUTE },
      { from: T0 + HOUR, to: T0 + 2 * HOUR, spanMs: HOUR },
      { from: T0 + 2 * HOUR, to: T0 + 2 * HOUR + MINUTE, spanMs: MINUTE },
      { from: T0 + 2 * HOUR + MINUTE, to: T0 + 2 * HOUR + 90_000 },
    ]);
    expect(rangePieces(T0 + 1, T0 + 2, [HOUR, MINUTE])).toEqual([{ from: T0 + 1, to: T0 + 2 }]);
    expect(rangePieces(T0, T0, [HOUR])).toEqual([]);
  });

  describe('on SQLite', () => contract(sqliteTarget));
  describe.skipIf(PG_URL === undefined || PG_URL === '')('on PostgreSQL', () =>
    contract(() => pgTarget(PG_URL as string)),
  );
});
