import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  PG_URL,
  pgHarness,
  type StoreHarness,
  type StoreTarget,
  sqliteHarness,
} from '../../test/support/stores.js';
import { FakeClock, type Result, type Span } from '../core/index.js';
import type { Store } from './index.js';

/**
 * The store contract for what the web UI reads (migration 8): token usage on trace rows, the
 * trace list's result filters, projects, the latest results of many traces, score aggregates by
 * time bucket and alert transitions. SQLite always; PostgreSQL when TOUCHSTONE_TEST_PG is set.
 */

const T0 = Date.parse('2026-03-01T00:00:00Z');
const HOUR = 3_600_000;
const traceId = (n: number) => n.toString(16).padStart(32, '0');

function scored(evaluator: string, scores: Result['scores']): Result {
  return { evaluator, outcome: 'OUTCOME_SCORED', scores, durationMs: 1 };
}

function readViewsContract(harness: StoreHarness): void {
  let target: StoreTarget;
  let store: Store;

  beforeEach(async () => {
    target = await harness();
    store = await target.open(new FakeClock(T0));
  });

  afterEach(async () => {
    await store.close();
    await target.cleanup();
  });

  async function addTrace(
    id: string,
    opts: { project?: string; labels?: Record<string, string>; usage?: object } = {},
  ): Promise<void> {
    const project = opts.project ?? 'p';
    const span: Span = {
      traceId: id,
      spanId: '1'.repeat(16),
      parentSpanId: '',
      name: 'root',
      kind: 1,
      startTimeUnixNano: `${T0}000000`,
      endTimeUnixNano: `${T0 + 5}000000`,
      attributes: {},
      events: [],
      links: [],
      status: { code: 0, message: '' },
      resource: { 'service.name': 'svc' },
      scope: { name: 's', version: '1' },
    };
    await store.traces.appendSpans(
      [{ project, traceId: id, spans: [span], labels: {}, source: '' }],
      T0,
    );
    const done = await store.traces.complete(
      { project, traceId: id, lastSpanAt: T0, labels: {}, source: '' },
      {
        record: { id, output: 'out', ...(opts.usage === undefined ? {} : { usage: opts.usage }) },
        summary: {
          traceId: id,
          service: 'svc',
          name: 'root',
          startTime: new Date(T0).toISOString(),
          durationMs: 5,
          steps: 1,
          error: false,
          labels: opts.labels ?? {},
        },
      },
      'd1',
      T0,
    );
    expect(done.completed).toBe(true);
  }

  it('keeps a completed trace’s token usage (not its latency) on the summary the list reads', async () => {
    await addTrace(traceId(1), {
      usage: { inputTokens: 42, outputTokens: 7, totalTokens: 49, latencyMs: 900 },
    });
    await addTrace(traceId(2), { usage: { latencyMs: 5 } });
    const { items } = await store.traces.list({ project: 'p' }, { pageSize: 10 });
    const byId = new Map(items.map((t) => [t.traceId, t]));
    expect(byId.get(traceId(1))?.usage).toEqual({
      inputTokens: 42,
      outputTokens: 7,
      totalTokens: 49,
    });
    expect(byId.get(traceId(2))).not.toHaveProperty('usage');
  });

  it('filters the trace list by policy, evaluator and outcome of stored results', async () => {
    for (const n of [1, 2, 3]) await addTrace(traceId(n));
    await store.results.insert(
      {
        project: 'p',
        traceId: traceId(1),
        policy: 'quality',
        digest: 'd1',
        results: [scored('tool-errors', [{ name: 'tool-errors', value: 1 }])],
        scoredAt: T0,
      },
      false,
    );
    await store.results.insert(
      {
        project: 'p',
        traceId: traceId(2),
        policy: 'judge',
        digest: 'd1',
        results: [
          {
            evaluator: 'helpful',
            outcome: 'OUTCOME_SKIPPED',
            scores: [],
            reason: 'no judge',
            durationMs: 0,
          },
        ],
        scoredAt: T0,
      },
      false,
    );
    const ids = async (filter: Parameters<Store['traces']['list']>[0]) =>
      (await store.traces.list({ project: 'p', ...filter }, { pageSize: 10 })).items.map(
        (t) => t.traceId,
      );
    expect(await ids({ policy: 'quality' })).toEqual([traceId(1)]);
    expect(await ids({ evaluator: 'helpful' })).toEqual([traceId(2)]);
    expect(await ids({ outcome: 'OUTCOME_SKIPPED' })).toEqual([traceId(2)]);
    // One result must match every given field.
    expect(await ids({ policy: 'quality', outcome: 'OUTCOME_SKIPPED' })).toEqual([]);
    expect((await ids({})).length).toBe(3);
  });

  it('filters the trace list by several labels at once, odd keys included', async () => {
    await addTrace(traceId(1), { labels: { env: 'dev', tier: 'trial', 'a"b.c': 'x', $k: 'y' } });
    await addTrace(traceId(2), { labels: { env: 'dev', tier: 'gold' } });
    await addTrace(traceId(3), { labels: { env: 'prod', tier: 'trial' } });
    const ids = async (labels: Record<string, string>) =>
      (await store.traces.list({ project: 'p', labels }, { pageSize: 10 })).items.map(
        (t) => t.traceId,
      );
    expect(await ids({ env: 'dev', tier: 'trial' })).toEqual([traceId(1)]);
    expect((await ids({ env: 'dev' })).sort()).toEqual([traceId(1), traceId(2)]);
    expect(await ids({ 'a"b.c': 'x', $k: 'y' })).toEqual([traceId(1)]);
    expect(await ids({ env: 'dev', tier: 'none' })).toEqual([]);
  });

  it('lists the projects that hold traces, by name', async () => {
    expect(await store.traces.projects()).toEqual([]);
    await addTrace(traceId(1), { project: 'shop' });
    await addTrace(traceId(2), { project: 'billing' });
    await addTrace(traceId(3), { project: 'shop' });
    expect(await store.traces.projects()).toEqual(['billing', 'shop']);
  });

  it('reads the latest results of many traces in the order asked', async () => {
    for (const n of [1, 2]) await addTrace(traceId(n));
    await store.results.insert(
      {
        project: 'p',
        traceId: traceId(2),
        policy: 'quality',
        digest: 'd1',
        results: [scored('tool-errors', [{ name: 'tool-errors', value: 0.5 }])],
        scoredAt: T0,
      },
      false,
    );
    const latest = await store.results.latestOf([
      { project: 'p', traceId: traceId(1) },
      { project: 'p', traceId: traceId(2) },
    ]);
    expect(latest[0]).toEqual([]);
    expect(latest[1]?.map((p) => [p.policy, p.results[0]?.scores[0]?.value])).toEqual([
      ['quality', 0.5],
    ]);
  });

  it('aggregates numeric scores per policy, evaluator, metric and time bucket', async () => {
    await addTrace(traceId(1), { labels: { env: 'prod' } });
    await addTrace(traceId(2), { labels: { env: 'dev' } });
    await addTrace(traceId(3), { labels: { env: 'prod' } });
    const add = (id: number, digest: string, at: number, results: Result[]) =>
      store.results.insert(
        { project: 'p', traceId: traceId(id), policy: 'quality', digest, results, scoredAt: at },
        false,
      );
    await add(1, 'a', T0 + 10, [
      scored('exact', [{ name: 'exact', passed: true }]),
      scored('judge', [
        { name: 'judge.helpful', value: 0.8 },
        { name: 'judge.tone', label: 'neutral' },
      ]),
    ]);
    await add(2, 'a', T0 + 20, [scored('exact', [{ name: 'exact', passed: false }])]);
    await add(3, 'a', T0 + HOUR + 5, [
      scored('exact', [{ name: 'exact', passed: true }]),
      {
        evaluator: 'judge',
        outcome: 'OUTCOME_ERROR',
        scores: [],
        reason: 'timeout',
        durationMs: 1,
      },
    ]);
    // Scored again (a changed trace): each scoring counts, as it does in alert windows.
    await add(3, 'b', T0 + HOUR + 6, [scored('exact', [{ name: 'exact', passed: false }])]);
    // Outside the range.
    await add(2, 'b', T0 + 3 * HOUR, [scored('exact', [{ name: 'exact', passed: true }])]);

    const all = await store.results.aggregate({
      project: 'p',
      since: T0,
      until: T0 + 2 * HOUR,
      bucketMs: HOUR,
    });
    expect(all).toEqual([
      { policy: 'quality', evaluator: 'exact', metric: 'exact', bucketStart: T0, n: 2, sum: 1 },
      {
        policy: 'quality',
        evaluator: 'exact',
        metric: 'exact',
        bucketStart: T0 + HOUR,
        n: 2,
        sum: 1,
      },
      {
        policy: 'quality',
        evaluator: 'judge',
        metric: 'judge.helpful',
        bucketStart: T0,
        n: 1,
        sum: 0.8,
      },
    ]);
    const prod = await store.results.aggregate({
      project: 'p',
      evaluator: 'exact',
      labels: { env: 'prod' },
      since: T0,
      until: T0 + 2 * HOUR,
      bucketMs: HOUR,
    });
    expect(prod.map((b) => [b.bucketStart, b.n, b.sum])).toEqual([
      [T0, 1, 1],
      [T0 + HOUR, 2, 1],
    ]);
    expect(
      await store.results.aggregate({
        project: 'p',
        services: [],
        since: T0,
        until: T0 + 2 * HOUR,
        bucketMs: HOUR,
      }),
    ).toEqual([]);
    expect(
      await store.results.aggregate({
        project: 'other',
        since: T0,
        until: T0 + 2 * HOUR,
        bucketMs: HOUR,
      }),
    ).toEqual([]);
  });

  it('keeps alert transitions and reads one project’s alert states', async () => {
    const base = { project: 'p', policy: 'quality', metric: 'exact', mean: 0.4, n: 12, below: 0.8 };
    await store.alerts.addTransition({ ...base, at: T0 + 10, firing: true });
    await store.alerts.addTransition({ ...base, at: T0 + 20, firing: false, mean: 0.9 });
    await store.alerts.addTransition({ ...base, project: 'q', at: T0 + 15, firing: true });
    await store.alerts.addTransition({ ...base, policy: 'other', at: T0 + 30, firing: true });
    expect(await store.alerts.transitions('p', { since: T0, until: T0 + 100 }, 10)).toEqual([
      { ...base, at: T0 + 10, firing: true },
      { ...base, at: T0 + 20, firing: false, mean: 0.9 },
      { ...base, policy: 'other', at: T0 + 30, firing: true },
    ]);
    expect(
      (
        await store.alerts.transitions(
          'p',
          { policy: 'quality', since: T0 + 11, until: T0 + 100 },
          10,
        )
      ).map((t) => t.at),
    ).toEqual([T0 + 20]);
    expect((await store.alerts.transitions('p', { since: T0, until: T0 + 100 }, 1)).length).toBe(1);

    const state = {
      project: 'p',
      policy: 'quality',
      metric: 'exact',
      firing: true,
      mean: 0.4,
      n: 12,
      changedAt: T0,
    };
    await store.alerts.saveState(state);
    await store.alerts.saveState({ ...state, project: 'q' });
    expect(await store.alerts.statesOf('p')).toEqual([state]);
  });
}

describe('read views on SQLite', () => {
  readViewsContract(sqliteHarness('touchstone-read-views-'));
});

describe.skipIf(PG_URL === undefined || PG_URL === '')('read views on PostgreSQL', () => {
  readViewsContract(pgHarness(PG_URL ?? ''));
});
