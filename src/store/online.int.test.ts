import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  PG_URL,
  pgHarness,
  type StoreHarness,
  type StoreTarget,
  sqliteHarness,
} from '../../test/support/stores.js';
import {
  FakeClock,
  type NormalizedTrace,
  type Result,
  type Span,
  type TraceRoot,
} from '../core/index.js';
import type { ScoredTrace, Store } from './index.js';
import { encodePageToken } from './page-token.js';

/**
 * The online-evaluation part of the store contract (policies, work queue, results, alert
 * windows and states, judge budgets, and what online scoring added to traces and deliveries),
 * run on SQLite always and on PostgreSQL when TOUCHSTONE_TEST_PG names a server. Every test gets
 * an empty database: a temp dir for SQLite, a new schema for PostgreSQL.
 */

const T0 = Date.parse('2026-01-01T00:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function gate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, opened };
}

const traceId = (n: number) => n.toString(16).padStart(32, '0');

function result(evaluator: string, value = 1): Result {
  return {
    evaluator,
    outcome: 'OUTCOME_SCORED',
    scores: [{ name: 'score', value }],
    durationMs: 1,
  };
}

interface TraceSpec {
  project?: string;
  service?: string;
  labels?: Record<string, string>;
  startMs?: number;
  digest?: string;
  root?: TraceRoot;
}

function onlineContract(harness: StoreHarness): void {
  let target: StoreTarget;
  let clock: FakeClock;
  let store: Store;

  beforeEach(async () => {
    target = await harness();
    clock = new FakeClock(T0);
    store = await target.open(clock);
  });

  afterEach(async () => {
    await store.close();
    await target.cleanup();
  });

  /** Stores spans of a trace and completes it at once (its last span arrived at `now`). */
  async function addTrace(id: string, spec: TraceSpec = {}): Promise<void> {
    const project = spec.project ?? 'p';
    const now = clock.now();
    const span: Span = {
      traceId: id,
      spanId: '1'.repeat(16),
      parentSpanId: '',
      name: 'root',
      kind: 1,
      startTimeUnixNano: `${spec.startMs ?? T0}000000`,
      endTimeUnixNano: `${(spec.startMs ?? T0) + 5}000000`,
      attributes: {},
      events: [],
      links: [],
      status: { code: 0, message: '' },
      resource: { 'service.name': spec.service ?? 'svc' },
      scope: { name: 's', version: '1' },
    };
    await store.traces.appendSpans(
      [{ project, traceId: id, spans: [span], labels: {}, source: '' }],
      now,
    );
    const trace: NormalizedTrace = {
      record: { id, output: 'out' },
      summary: {
        traceId: id,
        service: spec.service ?? 'svc',
        name: 'root',
        startTime: iso(spec.startMs ?? T0),
        durationMs: 5,
        steps: 1,
        error: false,
        labels: spec.labels ?? {},
      },
    };
    if (spec.root !== undefined) trace.root = spec.root;
    const done = await store.traces.complete(
      { project, traceId: id, lastSpanAt: now, labels: {}, source: '' },
      trace,
      spec.digest ?? 'd1',
      now,
    );
    expect(done.completed).toBe(true);
  }

  /** A late span re-opens a completed trace. */
  async function reopen(id: string, project = 'p'): Promise<void> {
    const span: Span = {
      traceId: id,
      spanId: '2'.repeat(16),
      parentSpanId: '1'.repeat(16),
      name: 'late',
      kind: 1,
      startTimeUnixNano: `${T0}000000`,
      endTimeUnixNano: `${T0 + 1}000000`,
      attributes: {},
      events: [],
      links: [],
      status: { code: 0, message: '' },
      resource: {},
      scope: { name: 's', version: '1' },
    };
    await store.traces.appendSpans(
      [{ project, traceId: id, spans: [span], labels: {}, source: '' }],
      clock.now(),
    );
  }

  async function score(
    id: string,
    policy: string,
    at: number,
    results: Result[],
    opts: { project?: string; digest?: string; replace?: boolean } = {},
  ): Promise<boolean> {
    return store.results.insert(
      {
        project: opts.project ?? 'p',
        traceId: id,
        policy,
        digest: opts.digest ?? 'd1',
        results,
        scoredAt: at,
      },
      opts.replace ?? false,
    );
  }

  const ids = (entries: ScoredTrace[]) =>
    entries.map((e) => `${e.trace.project}/${e.trace.traceId}`);

  describe('policies', () => {
    const resource = (threshold: number) => ({
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name: 'quality', labels: { project: 'p' } },
      spec: { sampling: { rate: 1 }, stages: [{ evaluators: [{ name: 'e', threshold }] }] },
    });

    it('creates, keeps the generation for the same resource, bumps it for a changed one', async () => {
      const created = await store.policies.upsert('p', 'quality', resource(1), clock.now());
      expect(created).toStrictEqual({
        created: true,
        policy: {
          project: 'p',
          name: 'quality',
          resource: resource(1),
          generation: 1,
          createdAt: iso(T0),
          updatedAt: iso(T0),
        },
      });
      clock.advance(1000);
      // The same resource with its keys in another order is the same resource.
      const { spec, metadata, kind, apiVersion } = resource(1);
      const same = await store.policies.upsert(
        'p',
        'quality',
        { spec, metadata, kind, apiVersion },
        clock.now(),
      );
      expect(same.created).toBe(false);
      expect(same.policy).toStrictEqual(created.policy);
      clock.advance(1000);
      const changed = await store.policies.upsert('p', 'quality', resource(2), clock.now());
      expect(changed.created).toBe(false);
      expect(changed.policy).toMatchObject({
        resource: resource(2),
        generation: 2,
        createdAt: iso(T0),
        updatedAt: iso(T0 + 2000),
      });
      expect(await store.policies.get('p', 'quality')).toStrictEqual(changed.policy);
      expect(await store.policies.get('q', 'quality')).toBeUndefined();
      await store.policies.upsert('q', 'quality', resource(1), clock.now());
      expect(await store.policies.versions()).toEqual([
        { project: 'p', name: 'quality', generation: 2 },
        { project: 'q', name: 'quality', generation: 1 },
      ]);
      await store.policies.upsert('p', 'other', resource(1), clock.now());
      expect(await store.policies.projectsWithPolicies(['p', 'r', 'q', 'p'])).toEqual(
        new Set(['p', 'q']),
      );
      expect(await store.policies.projectsWithPolicies([])).toEqual(new Set());
      await store.policies.delete('q', 'quality');
      expect(await store.policies.projectsWithPolicies(['q'])).toEqual(new Set());
    });

    it('lists a project by name page by page, and deletes', async () => {
      for (const name of ['c', 'a', 'e', 'b', 'd']) {
        await store.policies.upsert('p', name, resource(1), clock.now());
      }
      await store.policies.upsert('q', 'z', resource(1), clock.now());
      const first = await store.policies.list('p', { pageSize: 2 });
      expect(first.items.map((x) => x.name)).toEqual(['a', 'b']);
      const second = await store.policies.list('p', {
        pageSize: 2,
        pageToken: first.nextPageToken!,
      });
      expect(second.items.map((x) => x.name)).toEqual(['c', 'd']);
      const third = await store.policies.list('p', {
        pageSize: 2,
        pageToken: second.nextPageToken!,
      });
      expect(third).toStrictEqual({ items: [expect.objectContaining({ name: 'e' })] });
      expect((await store.policies.listAll('p')).map((x) => x.name)).toEqual([
        'a',
        'b',
        'c',
        'd',
        'e',
      ]);
      await expect(
        store.policies.list('p', { pageSize: 2, pageToken: 'nope' }),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect(await store.policies.delete('p', 'c')).toBe(true);
      expect(await store.policies.delete('p', 'c')).toBe(false);
      expect(await store.policies.get('p', 'c')).toBeUndefined();
      // Created again after a delete: a new policy, generation 1.
      const again = await store.policies.upsert('p', 'c', resource(3), clock.now());
      expect(again).toMatchObject({ created: true, policy: { generation: 1 } });
    });
  });

  describe('work queue', () => {
    const item = (
      n: number,
      overrides: Partial<Parameters<Store['work']['enqueue']>[0][0]> = {},
    ) => ({
      project: 'p',
      traceId: traceId(n),
      digest: 'd1',
      policy: '',
      replace: false,
      traceCompletedAt: T0 - n,
      ...overrides,
    });

    it('keeps one item per (project, trace, digest, policy)', async () => {
      expect(await store.work.enqueue([item(1), item(2), item(1)], clock.now())).toBe(2);
      clock.advance(10);
      expect(
        await store.work.enqueue(
          [
            item(1, { replace: true }),
            item(1, { digest: 'd2' }),
            item(1, { policy: 'quality' }),
            item(1, { project: 'q' }),
          ],
          clock.now(),
        ),
      ).toBe(3);
      expect(await store.work.stats()).toStrictEqual({ depth: 5, oldestCreatedAt: T0 });
      expect(await store.work.enqueue([], clock.now())).toBe(0);
      // The first copy of an item stays as queued: not replaced by the later `replace: true`.
      const claimed = await store.work.claim(clock.now(), 10, clock.now() + 1000, 'c1');
      expect(
        claimed.map((w) => [
          w.project,
          w.traceId === traceId(1) ? 1 : 2,
          w.digest,
          w.policy,
          w.replace,
        ]),
      ).toEqual([
        ['p', 1, 'd1', '', false],
        ['p', 2, 'd1', '', false],
        ['p', 1, 'd2', '', false],
        ['p', 1, 'd1', 'quality', false],
        ['q', 1, 'd1', '', false],
      ]);
    });

    it('tells which claims still hold and completes only those (a scoring batch)', async () => {
      await store.work.enqueue([item(1), item(2), item(3)], clock.now());
      const now = clock.now();
      const mine = await store.work.claim(now, 3, now + 60_000, 'c1');
      expect(mine).toHaveLength(3);
      // The first one's timeout passes and another worker claims it.
      const [taken] = await store.work.claim(now + 60_000, 1, now + 120_000, 'c2');
      expect(taken?.id).toBe(mine[0]?.id);
      const asked = [
        ...mine.map((w) => ({ id: w.id, claim: w.claim })),
        { id: 'wi_none', claim: 'c1' },
        { id: mine[1]!.id, claim: '' },
      ];
      const held = await store.withTransaction((tx) => tx.work.holding(asked));
      expect(held).toEqual(new Set([mine[1]!.id, mine[2]!.id]));
      expect(await store.work.completeAll(asked)).toEqual(new Set([mine[1]!.id, mine[2]!.id]));
      expect(await store.work.stats()).toMatchObject({ depth: 1 });
      expect(await store.work.completeAll(asked)).toEqual(new Set());
      expect(await store.work.holding([{ id: taken!.id, claim: 'c2' }])).toEqual(
        new Set([taken!.id]),
      );
    });

    it('claims visible items oldest first, hides them, and hands them out again after the timeout', async () => {
      await store.work.enqueue([item(1), item(2)], clock.now());
      clock.advance(10);
      await store.work.enqueue([item(3, { policy: 'quality', replace: true })], clock.now());
      expect(await store.work.stats()).toStrictEqual({ depth: 3, oldestCreatedAt: T0 });

      const now = clock.now();
      const first = await store.work.claim(now, 2, now + 60_000, 'claim-a');
      expect(first.map((w) => w.traceId)).toEqual([traceId(1), traceId(2)]);
      expect(first[0]).toStrictEqual({
        id: first[0]!.id,
        project: 'p',
        traceId: traceId(1),
        digest: 'd1',
        policy: '',
        replace: false,
        traceCompletedAt: T0 - 1,
        attempts: 1,
        claim: 'claim-a',
        createdAt: T0,
      });
      const second = await store.work.claim(now, 10, now + 60_000, 'claim-b');
      expect(second).toMatchObject([
        { traceId: traceId(3), policy: 'quality', replace: true, attempts: 1, claim: 'claim-b' },
      ]);
      expect(await store.work.claim(now + 59_999, 10, now + 120_000, 'claim-c')).toEqual([]);

      // The worker holding claim-a died: after the timeout its items are claimed again.
      const again = await store.work.claim(now + 60_000, 10, now + 120_000, 'claim-d');
      expect(again.map((w) => [w.traceId, w.attempts, w.claim])).toEqual([
        [traceId(1), 2, 'claim-d'],
        [traceId(2), 2, 'claim-d'],
        [traceId(3), 2, 'claim-d'],
      ]);
      const [one, two, three] = again;

      // Fenced: the stale claim can neither complete nor postpone.
      expect(await store.work.complete(one!.id, 'claim-a')).toBe(false);
      expect(await store.work.postpone(two!.id, 'claim-a', now)).toBe(false);
      expect(await store.work.complete(one!.id, '')).toBe(false);
      expect(await store.work.complete(one!.id, 'claim-d')).toBe(true);
      expect(await store.work.complete(one!.id, 'claim-d')).toBe(false);

      // Postponed: visible again at the given time, not before, with its claims counted.
      expect(await store.work.postpone(two!.id, 'claim-d', now + 70_000)).toBe(true);
      expect(await store.work.claim(now + 69_999, 10, now + 200_000, 'claim-e')).toEqual([]);
      expect(await store.work.claim(now + 70_000, 10, now + 200_000, 'claim-e')).toMatchObject([
        { id: two!.id, attempts: 3, claim: 'claim-e' },
      ]);
      expect(await store.work.stats()).toStrictEqual({ depth: 2, oldestCreatedAt: T0 });
      expect(await store.work.complete(two!.id, 'claim-e')).toBe(true);
      expect(await store.work.complete(three!.id, 'claim-d')).toBe(true);
      expect(await store.work.stats()).toStrictEqual({ depth: 0 });
    });

    it('never hands one item to two concurrent claimers', async () => {
      const items = Array.from({ length: 200 }, (_, i) => item(i));
      expect(await store.work.enqueue(items, clock.now())).toBe(200);
      const now = clock.now();
      const claimedBy = async (worker: number): Promise<string[]> => {
        const got: string[] = [];
        for (let round = 0; ; round++) {
          const batch = await store.work.claim(now, 7, now + 60_000, `w${worker}-${round}`);
          if (batch.length === 0) return got;
          expect(batch.length).toBeLessThanOrEqual(7);
          for (const w of batch) expect(w.claim).toBe(`w${worker}-${round}`);
          got.push(...batch.map((w) => w.id));
        }
      };
      const perWorker = await Promise.all([0, 1, 2, 3].map(claimedBy));
      const all = perWorker.flat();
      expect(all).toHaveLength(200);
      expect(new Set(all).size).toBe(200);

      // All at once for everything: still each item exactly once.
      const later = now + 60_000;
      const batches = await Promise.all(
        [0, 1, 2, 3].map((w) => store.work.claim(later, 200, later + 60_000, `x${w}`)),
      );
      const again = batches.flat().map((w) => w.id);
      expect(again).toHaveLength(200);
      expect(new Set(again).size).toBe(200);
      for (const w of batches.flat()) expect(w.attempts).toBe(2);
    });
  });

  describe('results', () => {
    it('stores a version once per policy unless replaced, and marks the trace scored', async () => {
      const T = traceId(1);
      await addTrace(T);
      expect(await store.results.forTrace('p', T)).toBeUndefined();
      expect(await score(T, 'quality', T0 + 100, [result('b', 0.5), result('a', 1)])).toBe(true);
      expect(await score(T, 'quality', T0 + 200, [result('b', 0.1)])).toBe(false);
      expect(await store.results.forTrace('p', T)).toStrictEqual({
        trace: (await store.traces.get('p', T))!.trace,
        scoredAt: iso(T0 + 100),
        policies: [
          {
            policy: 'quality',
            digest: 'd1',
            scoredAt: iso(T0 + 100),
            results: [result('b', 0.5), result('a', 1)],
          },
        ],
      });
      expect(await store.results.scoredPolicies('p', T, 'd1')).toEqual(new Set(['quality']));
      expect(await store.results.scoredPolicies('p', T, 'd2')).toEqual(new Set());

      // Replaced: evaluators not in the new results go.
      expect(await score(T, 'quality', T0 + 300, [result('c', 0.2)], { replace: true })).toBe(true);
      expect((await store.results.forTrace('p', T))?.policies).toStrictEqual([
        { policy: 'quality', digest: 'd1', scoredAt: iso(T0 + 300), results: [result('c', 0.2)] },
      ]);

      // scoredAt only moves forward.
      expect(await score(T, 'safety', T0 + 50, [result('s')])).toBe(true);
      const got = await store.results.forTrace('p', T);
      expect(got?.scoredAt).toBe(iso(T0 + 300));
      expect(got?.policies.map((x) => x.policy)).toEqual(['quality', 'safety']);
      expect(await store.results.scoredPolicies('p', T, 'd1')).toEqual(
        new Set(['quality', 'safety']),
      );

      expect(await score(T, 'empty', T0 + 400, [])).toBe(false);
      await expect(score(T, 'dup', T0 + 400, [result('a'), result('a')])).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
      expect(await store.results.scoredPolicies('p', T, 'd1')).toEqual(
        new Set(['quality', 'safety']),
      );
    });

    it('lets exactly one of two racing writers store a version', async () => {
      const T = traceId(1);
      await addTrace(T);
      const firstIn = gate();
      const write = (evaluators: string[], after?: Promise<void>) =>
        store.withTransaction(async (tx) => {
          await after;
          const ok = await tx.results.insert(
            {
              project: 'p',
              traceId: T,
              policy: 'quality',
              digest: 'd1',
              results: evaluators.map((e) => result(e)),
              scoredAt: T0 + 100,
            },
            false,
          );
          if (after === undefined) {
            firstIn.open();
            // Hold the transaction open while the other writer runs into our rows.
            await sleep(150);
          }
          return ok;
        });
      // The second writer has other evaluators (another generation of the policy).
      const outcomes = await Promise.all([write(['a', 'b']), write(['a', 'c'], firstIn.opened)]);
      expect(outcomes).toEqual([true, false]);
      expect(
        (await store.results.forTrace('p', T))?.policies[0]?.results.map((r) => r.evaluator),
      ).toEqual(['a', 'b']);
    });

    it('stores many versions at once as insert does each (a scoring batch)', async () => {
      const [T1, T2, T3] = [traceId(1), traceId(2), traceId(3)];
      await addTrace(T1);
      await addTrace(T2);
      await addTrace(T3, { project: 'q' });
      expect(await score(T1, 'quality', T0 + 50, [result('a')])).toBe(true);
      const v = (project: string, id: string, policy: string, results: Result[]) => ({
        project,
        traceId: id,
        policy,
        digest: 'd1',
        results,
        scoredAt: T0 + 100,
      });
      expect(
        await store.results.insertMany([
          // Stored already: it wins.
          v('p', T1, 'quality', [result('b')]),
          v('p', T2, 'quality', [result('b', 0.5), result('a', 1)]),
          // The same version twice in a batch: the first stands.
          v('p', T2, 'quality', [result('c')]),
          v('p', T2, 'safety', [result('s')]),
          v('q', T3, 'quality', [result('a')]),
          v('p', T1, 'empty', []),
        ]),
      ).toEqual([false, true, false, true, true, false]);
      expect(await store.results.forTrace('p', T2)).toStrictEqual({
        trace: (await store.traces.get('p', T2))!.trace,
        scoredAt: iso(T0 + 100),
        policies: [
          {
            policy: 'quality',
            digest: 'd1',
            scoredAt: iso(T0 + 100),
            results: [result('b', 0.5), result('a', 1)],
          },
          { policy: 'safety', digest: 'd1', scoredAt: iso(T0 + 100), results: [result('s')] },
        ],
      });
      expect((await store.results.forTrace('p', T1))?.policies).toStrictEqual([
        { policy: 'quality', digest: 'd1', scoredAt: iso(T0 + 50), results: [result('a')] },
      ]);
      expect((await store.results.forTrace('q', T3))?.scoredAt).toBe(iso(T0 + 100));
      expect(
        await store.results.scoredPoliciesOf([
          { project: 'p', traceId: T2, digest: 'd1' },
          { project: 'p', traceId: T1, digest: 'd1' },
          { project: 'p', traceId: T2, digest: 'd2' },
          { project: 'q', traceId: T3, digest: 'd1' },
          { project: 'q', traceId: T1, digest: 'd1' },
        ]),
      ).toEqual([
        new Set(['quality', 'safety']),
        new Set(['quality']),
        new Set(),
        new Set(['quality']),
        new Set(),
      ]);
      await expect(
        store.results.insertMany([v('p', T1, 'dup', [result('a'), result('a')])]),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect(await store.results.insertMany([])).toEqual([]);
    });

    it('lets exactly one of two racing batches store a version', async () => {
      const T = traceId(1);
      await addTrace(T);
      await addTrace(traceId(2));
      const firstIn = gate();
      const write = (evaluators: string[], other: string, after?: Promise<void>) =>
        store.withTransaction(async (tx) => {
          await after;
          const ok = await tx.results.insertMany(
            [T, other].map((id) => ({
              project: 'p',
              traceId: id,
              policy: 'quality',
              digest: after === undefined ? 'd1' : id === T ? 'd1' : 'd2',
              results: evaluators.map((e) => result(e)),
              scoredAt: T0 + 100,
            })),
          );
          if (after === undefined) {
            firstIn.open();
            await sleep(150);
          }
          return ok;
        });
      const outcomes = await Promise.all([
        write(['a', 'b'], traceId(2)),
        write(['a', 'c'], traceId(2), firstIn.opened),
      ]);
      // The second batch's other version (digest d2) is its own.
      expect(outcomes).toEqual([
        [true, true],
        [false, true],
      ]);
      expect(
        (await store.results.forTrace('p', T))?.policies[0]?.results.map((r) => r.evaluator),
      ).toEqual(['a', 'b']);
    });

    it('shows per policy only the version stored last', async () => {
      const T = traceId(1);
      await addTrace(T, { digest: 'd1' });
      await score(T, 'quality', T0 + 100, [result('q1', 0.1)], { digest: 'd1' });
      await score(T, 'safety', T0 + 110, [result('s1', 0.2)], { digest: 'd1' });
      // A late span changed the trace; quality scored the new version, safety not yet.
      clock.advance(1000);
      await addTrace(T, { digest: 'd2' });
      await score(T, 'quality', T0 + 2000, [result('q1', 0.9), result('q2', 1)], {
        digest: 'd2',
      });
      expect((await store.results.forTrace('p', T))?.policies).toStrictEqual([
        {
          policy: 'quality',
          digest: 'd2',
          scoredAt: iso(T0 + 2000),
          results: [result('q1', 0.9), result('q2', 1)],
        },
        { policy: 'safety', digest: 'd1', scoredAt: iso(T0 + 110), results: [result('s1', 0.2)] },
      ]);
      // Rescoring the old version later makes it the latest one again.
      await score(T, 'quality', T0 + 3000, [result('q1', 0.5)], { digest: 'd1', replace: true });
      expect((await store.results.forTrace('p', T))?.policies[0]).toMatchObject({
        digest: 'd1',
        results: [result('q1', 0.5)],
      });
      const [entry] = (await store.results.list({ project: 'p' }, { pageSize: 10 })).items;
      expect(entry).toStrictEqual(await store.results.forTrace('p', T));
      expect(await store.results.forTrace('q', T)).toBeUndefined();
      expect(await store.results.forTrace('p', traceId(2))).toBeUndefined();
    });

    it('keeps one annotation per person and name, all current, beside policy versions', async () => {
      const T = traceId(1);
      await addTrace(T);
      await score(T, 'quality', T0 + 100, [result('q1', 0.1)]);
      const annotation = (principal: string, name: string, value: number, at: number) =>
        store.results.annotate({
          project: 'p',
          traceId: T,
          annotatedAt: at,
          result: {
            evaluator: name,
            outcome: 'OUTCOME_SCORED',
            scores: [{ name, value }],
            durationMs: 0,
            annotator: { kind: 'human', principal },
          },
        });
      await annotation('alice', 'correct', 1, T0 + 200);
      await annotation('bob', 'correct', 0, T0 + 300);
      await annotation('alice', 'tone', 0.5, T0 + 400);
      // Alice changes her mind: her row is replaced, Bob's stays.
      await annotation('alice', 'correct', 0.25, T0 + 500);
      const got = await store.results.forTrace('p', T);
      expect(got?.scoredAt).toBe(iso(T0 + 500));
      expect(got?.policies.map((x) => x.policy)).toEqual(['@human', 'quality']);
      const human = got?.policies[0];
      expect(human?.scoredAt).toBe(iso(T0 + 500));
      expect(
        human?.results.map((r) => [r.annotator?.principal, r.evaluator, r.scores[0]?.value]),
      ).toEqual([
        ['alice', 'correct', 0.25],
        ['alice', 'tone', 0.5],
        ['bob', 'correct', 0],
      ]);
      // A trace only annotated is listed as scored too.
      const U = traceId(2);
      await addTrace(U);
      await store.results.annotate({
        project: 'p',
        traceId: U,
        annotatedAt: T0 + 600,
        result: {
          evaluator: 'ok',
          outcome: 'OUTCOME_SCORED',
          scores: [{ name: 'ok', passed: true }],
          durationMs: 0,
          annotator: { kind: 'human', principal: 'alice' },
        },
      });
      const listed = await store.results.list(
        { project: 'p', policy: '@human', evaluator: 'ok' },
        { pageSize: 10 },
      );
      expect(ids(listed.items)).toEqual([`p/${U}`]);
    });

    it('lists scored traces newest scored first, paging stably while more are scored', async () => {
      // The same trace id in two projects, and a tie on scoredAt broken by project.
      const plan: [string, number, number][] = [
        ['p', 1, 1],
        ['p', 2, 2],
        ['q', 1, 2],
        ['p', 3, 3],
        ['p', 4, 4],
        ['p', 5, 5],
      ];
      for (const [project, n, at] of plan) {
        await addTrace(traceId(n), { project });
        await score(traceId(n), 'quality', T0 + at, [result('a')], { project });
      }
      await addTrace(traceId(9)); // completed, never scored: not listed
      const expected = ['p/5', 'p/4', 'p/3', 'q/1', 'p/2', 'p/1'].map((s) => {
        const [project, n] = s.split('/');
        return `${project}/${traceId(Number(n))}`;
      });

      const seen: string[] = [];
      let token: string | undefined;
      let round = 0;
      do {
        const page = await store.results.list(
          {},
          token === undefined ? { pageSize: 2 } : { pageSize: 2, pageToken: token },
        );
        seen.push(...ids(page.items));
        token = page.nextPageToken;
        // Between pages: a new trace is scored, and one already served is scored again.
        round++;
        await addTrace(traceId(100 + round));
        await score(traceId(100 + round), 'quality', T0 + 1000 + round, [result('a')]);
        await score(traceId(5), 'safety', T0 + 2000 + round, [result('s')], { replace: true });
      } while (token !== undefined);
      expect(seen).toEqual(expected);
      expect(round).toBe(3);

      // The front of the list now has what was scored meanwhile.
      const now = await store.results.list({ project: 'p' }, { pageSize: 2 });
      expect(ids(now.items)).toEqual([`p/${traceId(5)}`, `p/${traceId(103)}`]);
      expect(now.items[0]?.scoredAt).toBe(iso(T0 + 2003));

      await expect(
        store.results.list({}, { pageSize: 2, pageToken: 'garbage' }),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      // A token without the project part is not one this list issued.
      await expect(
        store.results.list({}, { pageSize: 2, pageToken: encodePageToken({ at: 1, id: 'x' }) }),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    });

    it('leaves out traces open again until they complete', async () => {
      const T = traceId(1);
      await addTrace(T);
      await score(T, 'quality', T0 + 100, [result('a')]);
      clock.advance(1000);
      await reopen(T);
      expect((await store.results.list({}, { pageSize: 10 })).items).toEqual([]);
      expect(await store.results.forTrace('p', T)).toBeUndefined();
    });

    it('filters by project, service, grant, labels, since, policy and evaluator', async () => {
      const [a, b, c, d] = [1, 2, 3, 4].map(traceId);
      await addTrace(a!, { service: 'svc-a', labels: { env: 'prod', tier: 'gold' } });
      await addTrace(b!, { service: 'svc-b', labels: { env: 'dev' } });
      await addTrace(c!, { service: 'svc-a', labels: { env: 'dev' } });
      await addTrace(d!, { project: 'q', service: 'svc-a', labels: { env: 'dev' } });
      await score(a!, 'P1', T0 + 1, [result('e1'), result('e2')]);
      await score(b!, 'P2', T0 + 2, [result('e3')]);
      await score(c!, 'P1', T0 + 3, [result('e1')]);
      await score(c!, 'P2', T0 + 4, [result('e3')]);
      await score(d!, 'P1', T0 + 5, [result('e1')], { project: 'q' });

      const list = async (filter: Parameters<Store['results']['list']>[0]) =>
        ids((await store.results.list(filter, { pageSize: 10 })).items).map((s) =>
          s.replace(/0+(\d)$/, '$1'),
        );
      expect(await list({})).toEqual(['q/4', 'p/3', 'p/2', 'p/1']);
      expect(await list({ project: 'p' })).toEqual(['p/3', 'p/2', 'p/1']);
      expect(await list({ project: 'p', service: 'svc-a' })).toEqual(['p/3', 'p/1']);
      expect(await list({ services: ['svc-b'] })).toEqual(['p/2']);
      expect(await list({ services: ['svc-a', 'svc-b'], project: 'p' })).toEqual([
        'p/3',
        'p/2',
        'p/1',
      ]);
      expect(await list({ services: [] })).toEqual([]);
      expect(await list({ labels: { env: 'dev' } })).toEqual(['q/4', 'p/3', 'p/2']);
      expect(await list({ labels: { env: 'prod', tier: 'gold' } })).toEqual(['p/1']);
      expect(await list({ labels: { env: 'prod', tier: 'free' } })).toEqual([]);
      expect(await list({ project: 'p', since: T0 + 3 })).toEqual(['p/3']);
      expect(await list({ since: T0 + 4 })).toEqual(['q/4', 'p/3']);
      expect(await list({ project: 'p', policy: 'P2' })).toEqual(['p/3', 'p/2']);
      expect(await list({ evaluator: 'e2' })).toEqual(['p/1']);
      expect(await list({ evaluator: 'e3' })).toEqual(['p/3', 'p/2']);
      expect(await list({ policy: 'P1', evaluator: 'e3' })).toEqual([]);
      expect(await list({ policy: 'P1', evaluator: 'e1', project: 'p' })).toEqual(['p/3', 'p/1']);

      // A policy filter selects traces; the entry still shows every policy's results.
      const [entry] = (
        await store.results.list({ policy: 'P2', service: 'svc-a' }, { pageSize: 10 })
      ).items;
      expect(entry).toStrictEqual({
        trace: (await store.traces.get('p', c!))!.trace,
        scoredAt: iso(T0 + 4),
        policies: [
          { policy: 'P1', digest: 'd1', scoredAt: iso(T0 + 3), results: [result('e1')] },
          { policy: 'P2', digest: 'd1', scoredAt: iso(T0 + 4), results: [result('e3')] },
        ],
      });

      // Filtered pages follow the same order and tokens.
      const first = await store.results.list({ labels: { env: 'dev' } }, { pageSize: 2 });
      expect(ids(first.items)).toEqual([`q/${d}`, `p/${c}`]);
      const next = await store.results.list(
        { labels: { env: 'dev' } },
        { pageSize: 2, pageToken: first.nextPageToken! },
      );
      expect(next).toStrictEqual({ items: [expect.objectContaining({ scoredAt: iso(T0 + 2) })] });
    });
  });

  describe('alerts', () => {
    const point = (metric: string, at: number, value: number) => ({
      project: 'p',
      policy: 'quality',
      metric,
      at,
      value,
    });

    it('gives the mean and count of a window, and trims old points of one metric', async () => {
      expect(await store.alerts.window('p', 'quality', 'pass', T0)).toEqual({ mean: 0, n: 0 });
      await store.alerts.addPoints([
        point('pass', T0 - 10, 0),
        point('pass', T0 - 5, 0),
        point('pass', T0, 1),
        point('pass', T0 + 5, 0),
        point('pass', T0 + 10, 1),
        point('score', T0 + 10, 0.25),
        { ...point('pass', T0 + 10, 0), project: 'q' },
      ]);
      await store.alerts.addPoints([]);
      expect(await store.alerts.window('p', 'quality', 'pass', T0)).toEqual({ mean: 2 / 3, n: 3 });
      expect(await store.alerts.window('p', 'quality', 'pass', T0 - 10)).toEqual({
        mean: 0.4,
        n: 5,
      });
      expect(await store.alerts.window('p', 'quality', 'score', T0)).toEqual({ mean: 0.25, n: 1 });
      expect(await store.alerts.window('p', 'other', 'pass', T0)).toEqual({ mean: 0, n: 0 });

      expect(await store.alerts.trimWindow('p', 'quality', 'pass', T0 + 5)).toBe(3);
      expect(await store.alerts.trimWindow('p', 'quality', 'pass', T0 + 5)).toBe(0);
      expect(await store.alerts.window('p', 'quality', 'pass', 0)).toEqual({ mean: 0.5, n: 2 });
      expect(await store.alerts.window('q', 'quality', 'pass', 0)).toEqual({ mean: 0, n: 1 });
    });

    it('saves states and lists them', async () => {
      const state = {
        project: 'p',
        policy: 'quality',
        metric: 'pass',
        firing: true,
        mean: 0.4,
        n: 20,
        changedAt: T0,
      };
      expect(await store.alerts.lockState('p', 'quality', 'pass')).toBeUndefined();
      await store.alerts.saveState(state);
      await store.alerts.saveState({ ...state, metric: 'score', firing: false });
      expect(await store.alerts.lockState('p', 'quality', 'pass')).toStrictEqual(state);
      await store.alerts.saveState({ ...state, firing: false, mean: 0.9, changedAt: T0 + 1 });
      expect(await store.alerts.states()).toStrictEqual([
        { ...state, firing: false, mean: 0.9, changedAt: T0 + 1 },
        { ...state, metric: 'score', firing: false },
      ]);
    });

    for (const existing of [false, true]) {
      it(`serializes transitions of one alert (${existing ? 'state stored' : 'first state'})`, async () => {
        const base = {
          project: 'p',
          policy: 'quality',
          metric: 'pass',
          firing: false,
          mean: 1,
          n: 1,
          changedAt: T0,
        };
        if (existing) await store.alerts.saveState(base);
        const locked = gate();
        const first = store.withTransaction(async (tx) => {
          const before = await tx.alerts.lockState('p', 'quality', 'pass');
          locked.open();
          // The other transaction must wait here rather than read the state we replace.
          await sleep(150);
          await tx.alerts.saveState({ ...base, firing: true, n: (before?.n ?? 0) + 1 });
        });
        await locked.opened;
        const second = store.withTransaction(async (tx) => {
          const seen = await tx.alerts.lockState('p', 'quality', 'pass');
          await tx.alerts.saveState({ ...base, firing: true, n: (seen?.n ?? 0) + 1 });
          return seen;
        });
        await first;
        expect(await second).toMatchObject({ firing: true, n: existing ? 2 : 1 });
        expect((await store.alerts.states())[0]?.n).toBe(existing ? 3 : 2);
      });
    }
  });

  describe('judge budgets', () => {
    it('adds tokens per policy and day, also from concurrent writers', async () => {
      expect(await store.budgets.used('p', 'quality', '2026-01-01')).toBe(0);
      await store.budgets.add('p', 'quality', '2026-01-01', 100);
      await Promise.all(
        Array.from({ length: 10 }, () => store.budgets.add('p', 'quality', '2026-01-01', 5)),
      );
      await store.budgets.add('p', 'quality', '2026-01-02', 7);
      await store.budgets.add('p', 'other', '2026-01-01', 9);
      expect(await store.budgets.used('p', 'quality', '2026-01-01')).toBe(150);
      expect(await store.budgets.used('p', 'quality', '2026-01-02')).toBe(7);
      expect(await store.budgets.used('p', 'other', '2026-01-01')).toBe(9);
      expect(await store.budgets.used('q', 'quality', '2026-01-01')).toBe(0);
    });
  });

  describe('traces for online scoring', () => {
    it('keeps the root of a completed trace, and drops it when a completion has none', async () => {
      const T = traceId(1);
      const root: TraceRoot = {
        attributes: { 'gen_ai.system': 'openai', tokens: 12, ok: true, tags: ['a', 'b'] },
        resource: { 'service.name': 'svc', 'deployment.environment': 'prod' },
      };
      await addTrace(T, { root });
      const got = await store.traces.get('p', T);
      expect(got?.root).toStrictEqual(root);
      clock.advance(1000);
      await addTrace(T, { digest: 'd2' });
      const again = await store.traces.get('p', T);
      expect(again).toBeDefined();
      expect(again).not.toHaveProperty('root');
    });

    it('reads several traces at once as get reads each', async () => {
      const big: TraceRoot = {
        attributes: { 'gen_ai.system': 'openai' },
        // Past the inline limit: stored once in span_resources, named by the root.
        resource: { 'service.name': 'svc', 'process.command_args': 'x'.repeat(3000) },
      };
      const small: TraceRoot = { attributes: { a: 1 }, resource: { 'service.name': 'svc' } };
      await addTrace(traceId(1), { root: big });
      await addTrace(traceId(2), { root: big });
      await addTrace(traceId(3));
      await addTrace(traceId(4), { root: small, project: 'q' });
      await addTrace(traceId(5));
      await reopen(traceId(5));
      const keys = [
        { project: 'p', traceId: traceId(2) },
        { project: 'q', traceId: traceId(4) },
        { project: 'p', traceId: traceId(5) },
        { project: 'p', traceId: traceId(1) },
        { project: 'p', traceId: traceId(9) },
        { project: 'p', traceId: traceId(3) },
        { project: 'q', traceId: traceId(1) },
      ];
      const many = await store.traces.getMany(keys);
      expect(many).toStrictEqual(
        await Promise.all(keys.map((k) => store.traces.get(k.project, k.traceId))),
      );
      expect(many.map((g) => g?.trace.traceId)).toEqual([
        traceId(2),
        traceId(4),
        undefined,
        traceId(1),
        undefined,
        traceId(3),
        undefined,
      ]);
      expect(many[0]?.root).toStrictEqual(big);
      expect(await store.traces.getMany([])).toEqual([]);
    });

    it('lists completed versions by start time, oldest first, page by page', async () => {
      for (const n of [3, 1, 4, 2, 5]) {
        await addTrace(traceId(n), { startMs: T0 + n * 1000, digest: `d${n}` });
      }
      // Same start as trace 2: ordered by id.
      await addTrace(traceId(20), { startMs: T0 + 2000, digest: 'd20' });
      await addTrace(traceId(6), { project: 'q', startMs: T0 + 3000 });
      await addTrace(traceId(7), { startMs: T0 + 3000 });
      await reopen(traceId(7));
      const first = await store.traces.listVersions('p', T0 + 2000, undefined, 2);
      expect(first).toEqual([
        { traceId: traceId(2), digest: 'd2', startMs: T0 + 2000 },
        { traceId: traceId(20), digest: 'd20', startMs: T0 + 2000 },
      ]);
      const last = first.at(-1)!;
      const second = await store.traces.listVersions(
        'p',
        T0 + 2000,
        { startMs: last.startMs, traceId: last.traceId },
        10,
      );
      expect(second.map((v) => v.traceId)).toEqual([traceId(3), traceId(4), traceId(5)]);
      expect(await store.traces.listVersions('p', T0 + 6000, undefined, 10)).toEqual([]);
    });
  });

  describe('deliveries to a policy alert URL', () => {
    it('keeps the target URL on the delivery and its claim', async () => {
      const base = {
        project: 'p',
        webhookName: 'quality',
        event: 'alert.firing',
        payload: '{}',
        createdAt: iso(T0),
      };
      await store.webhooks.enqueue([
        {
          ...base,
          id: 'whd_000001',
          webhookId: 'policy:quality',
          policy: 'quality',
          targetUrl: 'https://alerts.example.com/hook',
        },
        { ...base, id: 'whd_000002', webhookId: 'wh_1' },
      ]);
      const [listed] = (await store.webhooks.listDeliveries('policy:quality', { pageSize: 10 }))
        .items;
      expect(listed).toMatchObject({ targetUrl: 'https://alerts.example.com/hook' });
      const [other] = (await store.webhooks.listDeliveries('wh_1', { pageSize: 10 })).items;
      expect(other).toBeDefined();
      expect(other).not.toHaveProperty('targetUrl');
      const claimed = await store.webhooks.claimDue(T0, 10, 5, T0 + 30_000);
      expect(claimed.map((c) => [c.id, c.targetUrl])).toEqual([
        ['whd_000001', 'https://alerts.example.com/hook'],
        ['whd_000002', undefined],
      ]);
    });
  });
}

describe('online store on SQLite', () => {
  onlineContract(sqliteHarness('touchstone-online-'));
});

describe.skipIf(PG_URL === undefined || PG_URL === '')('online store on PostgreSQL', () => {
  onlineContract(pgHarness(PG_URL ?? ''));
});
