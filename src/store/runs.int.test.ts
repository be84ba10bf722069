import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  PG_URL,
  pgHarness,
  type StoreHarness,
  type StoreTarget,
  sqliteHarness,
} from '../../test/support/stores.js';
import { FakeClock, type Result } from '../core/index.js';
import type { NewRun, RunProgress, Store } from './index.js';

/**
 * The runs part of the store contract (runs, their lease, outputs, results, deletion, retention
 * queries), run on SQLite always and on PostgreSQL when TOUCHSTONE_TEST_PG names a server.
 */

const T0 = Date.parse('2026-03-01T00:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();
const LEASE = 30_000;

function newRun(n: number, overrides: Partial<NewRun> = {}): NewRun {
  return {
    id: `run_${n.toString().padStart(4, '0')}`,
    project: 'p',
    name: `nightly-${n}`,
    labels: { team: 'a' },
    keep: false,
    spec: {
      dataset: { records: [{ id: 'a', output: 'x' }] },
      evaluators: [{ ref: 'exact-match' }],
    },
    createdBy: 'key_1',
    createdAt: T0 + n,
    ...overrides,
  };
}

function result(evaluator: string, passed: boolean): Result {
  return {
    evaluator,
    outcome: 'OUTCOME_SCORED',
    scores: [{ name: evaluator, passed }],
    durationMs: 0.1,
  };
}

function progress(items: [number, number][], evaluators = ['a', 'b']): RunProgress {
  return {
    done: items.length,
    outputs: items.map(([recordIndex, trial]) => ({
      recordIndex,
      trial,
      recordId: `r${recordIndex}`,
      output: JSON.stringify({ output: `out ${recordIndex}/${trial}` }),
    })),
    results: items.flatMap(([recordIndex, trial]) =>
      evaluators.map((e, position) => ({
        recordIndex,
        trial,
        recordId: `r${recordIndex}`,
        position,
        result: result(e, (recordIndex + trial) % 2 === 0),
      })),
    ),
  };
}

function runsContract(harness: StoreHarness): void {
  let target: StoreTarget;
  let clock: FakeClock;
  let store: Store;

  beforeEach(async () => {
    target = await harness();
    clock = new FakeClock(T0 + 1000);
    store = await target.open(clock);
  });

  afterEach(async () => {
    await store.close();
    await target.cleanup();
  });

  const record = (id: string, holder: string, p: RunProgress) =>
    store.withTransaction((tx) => tx.runs.record(id, holder, clock.now(), LEASE, p));

  it('creates a pending run and reads it back, with and without its spec', async () => {
    const created = await store.runs.create(newRun(1));
    expect(created).toStrictEqual({
      id: 'run_0001',
      project: 'p',
      name: 'nightly-1',
      labels: { team: 'a' },
      status: 'RUN_STATUS_PENDING',
      spec: newRun(1).spec,
      createdBy: 'key_1',
      createdAt: iso(T0 + 1),
      total: 0,
      done: 0,
      cancelRequested: false,
    });
    expect(await store.runs.get('run_0001')).toStrictEqual(created);
    const { spec: _spec, ...withoutSpec } = created;
    expect(await store.runs.get('run_0001', { spec: false })).toStrictEqual(withoutSpec);
    expect(await store.runs.get('run_nope')).toBeUndefined();
  });

  it('lists newest first per project or across projects, paged, without specs', async () => {
    for (let i = 1; i <= 5; i++)
      await store.runs.create(newRun(i, { project: i === 3 ? 'q' : 'p' }));
    const first = await store.runs.list('p', { pageSize: 2 });
    expect(first.items.map((r) => r.id)).toEqual(['run_0005', 'run_0004']);
    expect(first.items[0]?.spec).toBeUndefined();
    const second = await store.runs.list('p', {
      pageSize: 2,
      ...(first.nextPageToken === undefined ? {} : { pageToken: first.nextPageToken }),
    });
    expect(second.items.map((r) => r.id)).toEqual(['run_0002', 'run_0001']);
    expect(second.nextPageToken).toBeUndefined();
    expect((await store.runs.list(undefined, { pageSize: 10 })).items).toHaveLength(5);
    await expect(store.runs.list('p', { pageSize: 2, pageToken: 'junk' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });

  it('claims the oldest open run once; a live lease keeps others off, an expired one lets them adopt', async () => {
    await store.runs.create(newRun(2));
    await store.runs.create(newRun(1));
    const a = await store.runs.claim('exec-a', clock.now(), LEASE);
    expect(a).toMatchObject({
      id: 'run_0001',
      status: 'RUN_STATUS_RUNNING',
      leaseHolder: 'exec-a',
      leaseExpiresAt: iso(clock.now() + LEASE),
      startedAt: iso(clock.now()),
    });
    const b = await store.runs.claim('exec-b', clock.now(), LEASE);
    expect(b?.id).toBe('run_0002');
    expect(await store.runs.claim('exec-c', clock.now(), LEASE)).toBeUndefined();

    // exec-a renews; exec-b goes silent and its run is adopted once its lease lapses.
    clock.advance(LEASE - 1);
    expect(await store.runs.renew('run_0001', 'exec-a', clock.now(), LEASE)).toEqual({
      cancelRequested: false,
    });
    expect(await store.runs.claim('exec-c', clock.now(), LEASE)).toBeUndefined();
    clock.advance(1);
    const adopted = await store.runs.claim('exec-c', clock.now(), LEASE);
    expect(adopted).toMatchObject({
      id: 'run_0002',
      leaseHolder: 'exec-c',
      startedAt: iso(T0 + 1000),
    });
    // The old holder is fenced off: it can neither renew nor write.
    expect(await store.runs.renew('run_0002', 'exec-b', clock.now(), LEASE)).toBeUndefined();
    expect(await record('run_0002', 'exec-b', progress([[0, 0]]))).toBe(false);
    expect(await store.runs.finishedItems('run_0002')).toEqual([]);

    // Released: adoptable at once.
    await store.runs.release('run_0001', 'exec-a');
    expect((await store.runs.claim('exec-d', clock.now(), LEASE))?.id).toBe('run_0001');
  });

  it('two claimers racing take different runs', async () => {
    for (let i = 1; i <= 6; i++) await store.runs.create(newRun(i));
    const claims = await Promise.all(
      Array.from({ length: 6 }, (_, i) => store.runs.claim(`exec-${i}`, clock.now(), LEASE)),
    );
    const ids = claims.map((c) => c?.id).filter((id) => id !== undefined);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toHaveLength(6);
  });

  it('records batches under the lease, keeps the first copy of a key, and pages results by item', async () => {
    await store.runs.create(newRun(1));
    await store.runs.claim('exec', clock.now(), LEASE);
    expect(
      await store.runs.prepare('run_0001', 'exec', { total: 6, done: 0, datasetDigest: 'd1' }),
    ).toBe(true);
    expect(
      await store.runs.prepare('run_0001', 'other', { total: 6, done: 0, datasetDigest: 'x' }),
    ).toBe(false);
    expect(
      await record(
        'run_0001',
        'exec',
        progress([
          [0, 0],
          [0, 1],
          [1, 0],
        ]),
      ),
    ).toBe(true);
    // The same keys again (a retried batch) change nothing stored.
    const again = progress([[1, 0]]);
    again.results = again.results.map((r) => ({ ...r, result: result(r.result.evaluator, false) }));
    expect(await record('run_0001', 'exec', { ...again, done: 0 })).toBe(true);
    expect(
      await record(
        'run_0001',
        'exec',
        progress([
          [1, 1],
          [2, 0],
        ]),
      ),
    ).toBe(true);

    const run = await store.runs.get('run_0001');
    expect(run).toMatchObject({ total: 6, done: 5, datasetDigest: 'd1' });
    expect(
      (await store.runs.finishedItems('run_0001')).sort(
        (x, y) => x.recordIndex - y.recordIndex || x.trial - y.trial,
      ),
    ).toEqual([
      { recordIndex: 0, trial: 0 },
      { recordIndex: 0, trial: 1 },
      { recordIndex: 1, trial: 0 },
      { recordIndex: 1, trial: 1 },
      { recordIndex: 2, trial: 0 },
    ]);
    const all = await store.runs.allResults('run_0001');
    expect(all).toHaveLength(10);
    expect(all[4]).toEqual({
      recordIndex: 1,
      trial: 0,
      recordId: 'r1',
      position: 0,
      result: result('a', false),
    });
    expect(all[5]?.result).toEqual(result('b', false));
    expect((await store.runs.outputs('run_0001')).map((o) => o.output)).toContain(
      JSON.stringify({ output: 'out 2/0' }),
    );

    const page1 = await store.runs.results('run_0001', { pageSize: 2 });
    expect(page1.items.map((i) => [i.recordIndex, i.trial])).toEqual([
      [0, 0],
      [0, 1],
    ]);
    expect(page1.items[0]).toEqual({
      recordIndex: 0,
      trial: 0,
      recordId: 'r0',
      output: JSON.stringify({ output: 'out 0/0' }),
      results: [result('a', true), result('b', true)],
    });
    const rest: [number, number][] = [];
    let token = page1.nextPageToken;
    while (token !== undefined) {
      const page = await store.runs.results('run_0001', { pageSize: 2, pageToken: token });
      rest.push(...page.items.map((i): [number, number] => [i.recordIndex, i.trial]));
      token = page.nextPageToken;
    }
    expect(rest).toEqual([
      [1, 0],
      [1, 1],
      [2, 0],
    ]);
    expect((await store.runs.results('run_nope', { pageSize: 5 })).items).toEqual([]);
  });

  it('a rolled-back batch leaves nothing behind', async () => {
    await store.runs.create(newRun(1));
    await store.runs.claim('exec', clock.now(), LEASE);
    await expect(
      store.withTransaction(async (tx) => {
        await tx.runs.record('run_0001', 'exec', clock.now(), LEASE, progress([[0, 0]]));
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await store.runs.allResults('run_0001')).toEqual([]);
    expect(await store.runs.get('run_0001')).toMatchObject({ done: 0 });
  });

  it('finishes under the lease or, without a holder, only when no live lease holds the run', async () => {
    await store.runs.create(newRun(1));
    await store.runs.create(newRun(2));
    await store.runs.claim('exec', clock.now(), LEASE);
    const fields = {
      status: 'RUN_STATUS_SUCCEEDED' as const,
      summaries: [{ metric: 'a', mean: 1 }],
      gates: [{ gate: { metric: 'a', min: 0.5 }, passed: true, value: 1 }],
      finishedAt: clock.now(),
    };
    expect(await store.runs.finish('run_0001', 'other', clock.now(), fields)).toBeUndefined();
    expect(await store.runs.finish('run_0001', undefined, clock.now(), fields)).toBeUndefined();
    const done = await store.runs.finish('run_0001', 'exec', clock.now(), fields);
    expect(done).toMatchObject({
      status: 'RUN_STATUS_SUCCEEDED',
      summaries: fields.summaries,
      gates: fields.gates,
      finishedAt: iso(clock.now()),
    });
    expect(done?.leaseHolder).toBeUndefined();
    // Final: not again, not claimable, no more writes.
    expect(await store.runs.finish('run_0001', 'exec', clock.now(), fields)).toBeUndefined();
    expect(await record('run_0001', 'exec', progress([[0, 0]]))).toBe(false);

    // A pending run is finished without a holder (a cancel).
    expect(await store.runs.requestCancel('run_0002')).toBe(true);
    const cancelled = await store.runs.finish('run_0002', undefined, clock.now(), {
      status: 'RUN_STATUS_CANCELLED',
      summaries: [],
      gates: [],
      finishedAt: clock.now(),
    });
    expect(cancelled).toMatchObject({ status: 'RUN_STATUS_CANCELLED', cancelRequested: true });
    expect(await store.runs.requestCancel('run_0002')).toBe(false);
    expect(await store.runs.claim('exec', clock.now(), LEASE)).toBeUndefined();
  });

  it('reports a cancel request to the lease holder', async () => {
    await store.runs.create(newRun(1));
    await store.runs.claim('exec', clock.now(), LEASE);
    expect(await store.runs.requestCancel('run_0001')).toBe(true);
    expect(await store.runs.renew('run_0001', 'exec', clock.now(), LEASE)).toEqual({
      cancelRequested: true,
    });
  });

  it('deletes only final, unleased runs, with their outputs and results, in one transaction', async () => {
    await store.runs.create(newRun(1));
    await store.runs.create(newRun(2));
    const del = (id: string) => store.withTransaction((tx) => tx.runs.delete(id, clock.now()));
    expect(await del('run_0001')).toBe('not_finished');
    await store.runs.claim('exec', clock.now(), LEASE);
    await record('run_0001', 'exec', progress([[0, 0]]));
    expect(await del('run_0001')).toBe('not_finished');
    await store.runs.finish('run_0001', 'exec', clock.now(), {
      status: 'RUN_STATUS_FAILED',
      summaries: [],
      gates: [],
      finishedAt: clock.now(),
    });
    await expect(
      store.withTransaction(async (tx) => {
        await tx.runs.delete('run_0001', clock.now());
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await store.runs.allResults('run_0001')).toHaveLength(2);
    expect(await del('run_0001')).toBe('deleted');
    expect(await store.runs.get('run_0001')).toBeUndefined();
    expect(await store.runs.allResults('run_0001')).toEqual([]);
    expect(await store.runs.outputs('run_0001')).toEqual([]);
    expect(await del('run_0001')).toBe('not_found');
    expect(await store.runs.get('run_0002')).toBeDefined();
  });

  it('finds runs past retention, oldest first, sparing kept runs and by project', async () => {
    const finish = async (n: number, project: string, keep: boolean, at: number) => {
      await store.runs.create(newRun(n, { project, keep }));
      clock.set(at);
      expect(await store.runs.requestCancel(`run_${n.toString().padStart(4, '0')}`)).toBe(true);
      await store.runs.finish(`run_${n.toString().padStart(4, '0')}`, undefined, at, {
        status: 'RUN_STATUS_CANCELLED',
        summaries: [],
        gates: [],
        finishedAt: at,
      });
    };
    await finish(1, 'p', false, T0 + 10);
    await finish(2, 'p', true, T0 + 5);
    await finish(3, 'q', false, T0 + 20);
    await finish(4, 'p', false, T0 + 30);
    await store.runs.create(newRun(5)); // pending: never expired
    expect(await store.runs.expired({ finishedBefore: T0 + 25 }, 10)).toEqual([
      { id: 'run_0001', project: 'p' },
      { id: 'run_0003', project: 'q' },
    ]);
    expect(await store.runs.expired({ finishedBefore: T0 + 100 }, 2)).toEqual([
      { id: 'run_0001', project: 'p' },
      { id: 'run_0003', project: 'q' },
    ]);
    expect(await store.runs.expired({ finishedBefore: T0 + 100, projects: ['q'] }, 10)).toEqual([
      { id: 'run_0003', project: 'q' },
    ]);
    expect(
      await store.runs.expired({ finishedBefore: T0 + 100, exceptProjects: ['q'] }, 10),
    ).toEqual([
      { id: 'run_0001', project: 'p' },
      { id: 'run_0004', project: 'p' },
    ]);
    expect(await store.runs.expired({ finishedBefore: T0 + 100, projects: [] }, 10)).toEqual([]);
  });
}

describe('run store on SQLite', () => {
  runsContract(sqliteHarness('touchstone-runs-'));
});

describe.skipIf(PG_URL === undefined || PG_URL === '')('run store on PostgreSQL', () => {
  runsContract(pgHarness(PG_URL ?? ''));
});
