import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  PG_URL,
  pgHarness,
  type StoreHarness,
  type StoreTarget,
  sqliteHarness,
} from '../../test/support/stores.js';
import { FakeClock } from '../core/index.js';
import type { NewWriteBack, SourceState, SourceTrace, Store } from './index.js';
import { encodePageToken } from './page-token.js';

/**
 * The trace-source part of the store contract (sources, pull state, the traces a source knows,
 * the write-back queue and ledger), run on SQLite always and on PostgreSQL when
 * TOUCHSTONE_TEST_PG names a server. Every test gets an empty database: a temp dir for SQLite, a
 * new schema for PostgreSQL; `open` may be called twice for a second connection to it.
 */

const T0 = Date.parse('2026-01-01T00:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();
const traceId = (n: number) => n.toString(16).padStart(32, '0');

function resource(project: string, name: string, interval = '30s') {
  return {
    apiVersion: 'touchstone.dev/v1alpha1',
    kind: 'TraceSource',
    metadata: { name, labels: { project } },
    spec: { type: 'langfuse', pull: { interval, backfill: '7d' }, traceLabels: { a: 'b' } },
  };
}

function state(overrides: Partial<SourceState> = {}): SourceState {
  return {
    project: 'p',
    name: 'lf',
    watermark: T0 - 60_000,
    backfillUntil: T0,
    phase: 'backfilling',
    nextPullAt: T0 + 30_000,
    failures: 0,
    pulled: 0,
    scored: 0,
    recordsPerSecond: 0,
    deadLetters: 0,
    ...overrides,
  };
}

function sourceTrace(n: number, overrides: Partial<SourceTrace> = {}): SourceTrace {
  return {
    project: 'p',
    source: 'lf',
    storeId: `st-${n.toString().padStart(5, '0')}`,
    traceId: traceId(n),
    startMs: T0 + n,
    version: `v${n}`,
    ...overrides,
  };
}

function writeBack(n: number, overrides: Partial<NewWriteBack> = {}): NewWriteBack {
  return {
    project: 'p',
    source: 'lf',
    storeId: `st-${n}`,
    traceId: traceId(n),
    policy: 'quality',
    metric: 'relevance',
    score: JSON.stringify({ name: 'relevance', value: n }),
    judge: false,
    createdAt: T0 + n,
    ...overrides,
  };
}

function sourcesContract(harness: StoreHarness): void {
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

  describe('sources', () => {
    it('creates, keeps the generation for the same resource, bumps it for a changed one', async () => {
      const created = await store.sources.upsert('p', 'lf', resource('p', 'lf'), clock.now());
      expect(created).toStrictEqual({
        created: true,
        source: {
          project: 'p',
          name: 'lf',
          resource: resource('p', 'lf'),
          generation: 1,
          paused: false,
          createdAt: iso(T0),
          updatedAt: iso(T0),
        },
      });
      clock.advance(1000);
      // The same resource with its keys in another order is the same resource.
      const { spec, metadata, kind, apiVersion } = resource('p', 'lf');
      const same = await store.sources.upsert(
        'p',
        'lf',
        {
          spec: { traceLabels: spec.traceLabels, pull: spec.pull, type: spec.type },
          metadata,
          kind,
          apiVersion,
        },
        clock.now(),
      );
      expect(same).toStrictEqual({ created: false, source: created.source });
      clock.advance(1000);
      const changed = await store.sources.upsert('p', 'lf', resource('p', 'lf', '1m'), clock.now());
      expect(changed.created).toBe(false);
      expect(changed.source).toStrictEqual({
        ...created.source,
        resource: resource('p', 'lf', '1m'),
        generation: 2,
        updatedAt: iso(T0 + 2000),
      });
      expect(await store.sources.get('p', 'lf')).toStrictEqual(changed.source);
      expect(await store.sources.get('q', 'lf')).toBeUndefined();
      expect(await store.sources.get('p', 'other')).toBeUndefined();
    });

    it('pauses and resumes without moving the generation; a re-apply keeps the flag', async () => {
      await store.sources.upsert('p', 'lf', resource('p', 'lf'), clock.now());
      expect(await store.sources.setPaused('p', 'nope', true, clock.now())).toBe(false);
      expect(await store.sources.setPaused('q', 'lf', true, clock.now())).toBe(false);
      expect(await store.sources.get('p', 'nope')).toBeUndefined();

      clock.advance(1000);
      expect(await store.sources.setPaused('p', 'lf', true, clock.now())).toBe(true);
      expect(await store.sources.get('p', 'lf')).toMatchObject({
        paused: true,
        generation: 1,
        createdAt: iso(T0),
        updatedAt: iso(T0 + 1000),
      });
      // Pausing a paused source: true, nothing changes.
      clock.advance(1000);
      expect(await store.sources.setPaused('p', 'lf', true, clock.now())).toBe(true);
      expect(await store.sources.get('p', 'lf')).toMatchObject({
        paused: true,
        updatedAt: iso(T0 + 1000),
      });
      // Applying the resource again (changed or not) keeps it paused.
      clock.advance(1000);
      const reapplied = await store.sources.upsert(
        'p',
        'lf',
        resource('p', 'lf', '5m'),
        clock.now(),
      );
      expect(reapplied.source).toMatchObject({
        paused: true,
        generation: 2,
        updatedAt: iso(T0 + 3000),
      });
      clock.advance(1000);
      expect(await store.sources.setPaused('p', 'lf', false, clock.now())).toBe(true);
      expect(await store.sources.get('p', 'lf')).toMatchObject({
        paused: false,
        generation: 2,
        updatedAt: iso(T0 + 4000),
      });
    });

    it('lists by (project, name) page by page, one project or all, and every source', async () => {
      for (const [project, name] of [
        ['q', 'b'],
        ['p', 'c'],
        ['p', 'a'],
        ['q', 'a'],
        ['p', 'b'],
        ['r', 'a'],
      ] as const) {
        await store.sources.upsert(project, name, resource(project, name), clock.now());
      }
      const key = (s: { project: string; name: string }) => `${s.project}/${s.name}`;

      const first = await store.sources.list('p', { pageSize: 2 });
      expect(first.items.map(key)).toEqual(['p/a', 'p/b']);
      const second = await store.sources.list('p', {
        pageSize: 2,
        pageToken: first.nextPageToken!,
      });
      expect(second).toStrictEqual({ items: [expect.objectContaining({ name: 'c' })] });
      expect(await store.sources.list('none', { pageSize: 2 })).toStrictEqual({ items: [] });

      const pages: string[][] = [];
      let token: string | undefined;
      do {
        const page = await store.sources.list(undefined, {
          pageSize: 4,
          ...(token === undefined ? {} : { pageToken: token }),
        });
        pages.push(page.items.map(key));
        token = page.nextPageToken;
      } while (token !== undefined);
      expect(pages).toEqual([
        ['p/a', 'p/b', 'p/c', 'q/a'],
        ['q/b', 'r/a'],
      ]);
      // Exactly a page's worth: no token for an empty next page.
      expect(await store.sources.list('q', { pageSize: 2 })).not.toHaveProperty('nextPageToken');

      expect((await store.sources.listAll()).map(key)).toEqual([
        'p/a',
        'p/b',
        'p/c',
        'q/a',
        'q/b',
        'r/a',
      ]);

      await expect(
        store.sources.list('p', { pageSize: 2, pageToken: 'nope' }),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      // A token without its project is not one this list issued.
      await expect(
        store.sources.list(undefined, {
          pageSize: 2,
          pageToken: encodePageToken({ at: 0, id: 'a' }),
        }),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
      await expect(store.sources.list('p', { pageSize: 0 })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
    });

    it('deletes a source with its pull state; traces, write-backs and the ledger stay', async () => {
      await store.sources.upsert('p', 'lf', resource('p', 'lf'), clock.now());
      await store.sources.setPaused('p', 'lf', true, clock.now());
      await store.sources.saveState(state());
      await store.sources.count('p', 'lf', 'pulled', 5, clock.now());
      await store.sources.saveTraces([sourceTrace(1)]);
      await store.sources.enqueueWriteBacks([writeBack(1)], clock.now());
      const entry = {
        project: 'p',
        source: 'lf',
        traceId: traceId(1),
        policy: 'quality',
        metric: 'relevance',
        remoteId: 'r1',
        valueDigest: 'x',
      };
      await store.sources.saveLedger(entry);

      expect(await store.sources.delete('q', 'lf')).toBe(false);
      expect(await store.sources.delete('p', 'lf')).toBe(true);
      expect(await store.sources.delete('p', 'lf')).toBe(false);
      expect(await store.sources.get('p', 'lf')).toBeUndefined();
      expect(await store.sources.getState('p', 'lf')).toBeUndefined();
      expect(await store.sources.listAll()).toEqual([]);
      expect(await store.sources.traces('p', 'lf', ['st-00001'])).toHaveLength(1);
      expect(await store.sources.ledger('p', 'lf', traceId(1), 'quality', 'relevance')).toEqual(
        entry,
      );
      expect(await store.sources.claimWriteBacks(clock.now(), 10, T0 + 1000, 'c')).toHaveLength(1);

      // Created again: a new source, generation 1, running, and with no state of the old one
      // (not even one a lease holder saved after the delete).
      await store.sources.saveState(state({ pulled: 9 }));
      clock.advance(1000);
      const again = await store.sources.upsert('p', 'lf', resource('p', 'lf', '1m'), clock.now());
      expect(again).toMatchObject({
        created: true,
        source: { generation: 1, paused: false, createdAt: iso(T0 + 1000) },
      });
      expect(await store.sources.getState('p', 'lf')).toBeUndefined();
    });
  });

  describe('pull state', () => {
    it('is undefined before the first save, and count does not create it', async () => {
      expect(await store.sources.getState('p', 'lf')).toBeUndefined();
      await store.sources.count('p', 'lf', 'pulled', 3, T0);
      await store.sources.count('p', 'lf', 'scored', 3, T0);
      expect(await store.sources.getState('p', 'lf')).toBeUndefined();
    });

    it('round-trips the state, omitting absent optional fields', async () => {
      const bare = state();
      await store.sources.saveState(bare);
      const got = await store.sources.getState('p', 'lf');
      expect(got).toStrictEqual(bare);
      for (const k of ['lastError', 'lastCompleteStartAt', 'lastPullAt', 'lastWriteBackAt']) {
        expect(got).not.toHaveProperty(k);
      }
      const full = state({
        phase: 'error',
        lastError: 'HTTP 503 from the store',
        lastCompleteStartAt: T0 - 5000,
        lastPullAt: T0 - 1000,
        failures: 2,
        recordsPerSecond: 12.5,
        watermark: T0,
      });
      await store.sources.saveState(full);
      // The counters are not the saver's to write: they stay as they were.
      expect(await store.sources.getState('p', 'lf')).toStrictEqual(full);
      await store.sources.saveState(
        state({ name: 'other', pulled: 4, scored: 2, lastWriteBackAt: T0 }),
      );
      expect(await store.sources.getState('p', 'other')).toStrictEqual(
        state({ name: 'other', pulled: 4, scored: 2, lastWriteBackAt: T0 }),
      );
      expect(await store.sources.getState('q', 'lf')).toBeUndefined();
    });

    it('adds to the counters; saving the state never overwrites them', async () => {
      await store.sources.saveState(state());
      await store.sources.count('p', 'lf', 'pulled', 3, T0 + 10);
      await store.sources.count('p', 'lf', 'pulled', 4, T0 + 20);
      expect(await store.sources.getState('p', 'lf')).toMatchObject({ pulled: 7, scored: 0 });
      expect(await store.sources.getState('p', 'lf')).not.toHaveProperty('lastWriteBackAt');

      await store.sources.count('p', 'lf', 'scored', 2, T0 + 30);
      expect(await store.sources.getState('p', 'lf')).toMatchObject({
        pulled: 7,
        scored: 2,
        lastWriteBackAt: T0 + 30,
      });
      // A writer finishing late does not move lastWriteBackAt back.
      await store.sources.count('p', 'lf', 'scored', 1, T0 + 25);
      expect(await store.sources.getState('p', 'lf')).toMatchObject({
        scored: 3,
        lastWriteBackAt: T0 + 30,
      });
      // Zero changes nothing; a negative or fractional n is refused.
      await store.sources.count('p', 'lf', 'scored', 0, T0 + 99);
      expect(await store.sources.getState('p', 'lf')).toMatchObject({
        scored: 3,
        lastWriteBackAt: T0 + 30,
      });
      await expect(store.sources.count('p', 'lf', 'pulled', -1, T0)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
      await expect(store.sources.count('p', 'lf', 'pulled', 1.5, T0)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });

      // The lease holder saves what it read before the increments: they survive.
      await store.sources.saveState(
        state({ watermark: T0, phase: 'tailing', pulled: 0, scored: 0, lastWriteBackAt: T0 }),
      );
      expect(await store.sources.getState('p', 'lf')).toStrictEqual(
        state({ watermark: T0, phase: 'tailing', pulled: 7, scored: 3, lastWriteBackAt: T0 + 30 }),
      );
      // Other sources' counters are their own.
      await store.sources.saveState(state({ project: 'q' }));
      expect(await store.sources.getState('q', 'lf')).toMatchObject({ pulled: 0, scored: 0 });
    });

    it('adds up increments made concurrently from two connections', async () => {
      const other = await target.open(clock);
      try {
        await store.sources.saveState(state());
        const rounds = 50;
        const bump = (s: Store, i: number) =>
          Promise.all([
            s.sources.count('p', 'lf', 'pulled', 1, T0 + i),
            s.sources.count('p', 'lf', 'scored', 2, T0 + i),
          ]);
        // A state saver racing with the counters does not lose increments either.
        const saver = async () => {
          for (let i = 0; i < 10; i++) await other.sources.saveState(state({ failures: i }));
        };
        await Promise.all([
          ...Array.from({ length: rounds }, (_, i) => bump(store, i)),
          ...Array.from({ length: rounds }, (_, i) => bump(other, rounds + i)),
          saver(),
        ]);
        expect(await store.sources.getState('p', 'lf')).toMatchObject({
          pulled: 2 * rounds,
          scored: 4 * rounds,
          lastWriteBackAt: T0 + 2 * rounds - 1,
          failures: 9,
        });
      } finally {
        await other.close();
      }
    });
  });

  describe('source traces', () => {
    it('upserts traces and reads them by store id, in the order asked', async () => {
      await store.sources.saveTraces([
        sourceTrace(1),
        sourceTrace(2, { version: '', deferredSince: T0 }),
        sourceTrace(3),
        sourceTrace(3, { source: 'other' }),
        sourceTrace(3, { project: 'q' }),
      ]);
      expect(
        await store.sources.traces('p', 'lf', [
          'st-00003',
          'missing',
          'st-00001',
          'st-00002',
          'st-00003',
        ]),
      ).toStrictEqual([
        sourceTrace(3),
        sourceTrace(1),
        sourceTrace(2, { version: '', deferredSince: T0 }),
      ]);
      expect(await store.sources.traces('p', 'lf', [])).toEqual([]);
      expect(await store.sources.traces('p', 'nope', ['st-00001'])).toEqual([]);

      // Upsert: a new version clears the deferral; the last of two rows for one key wins.
      await store.sources.saveTraces([
        sourceTrace(2, { version: 'x', traceId: traceId(22) }),
        sourceTrace(2, { version: 'v2b', startMs: T0 + 200 }),
        sourceTrace(1, { version: 'v1b', deferredSince: T0 + 5 }),
      ]);
      const got = await store.sources.traces('p', 'lf', ['st-00001', 'st-00002']);
      expect(got).toStrictEqual([
        sourceTrace(1, { version: 'v1b', deferredSince: T0 + 5 }),
        sourceTrace(2, { version: 'v2b', startMs: T0 + 200 }),
      ]);
      expect(got[1]).not.toHaveProperty('deferredSince');
      await store.sources.saveTraces([]);
    });

    it('finds the store id of a trace the source stored', async () => {
      await store.sources.saveTraces([
        sourceTrace(1),
        sourceTrace(2, { version: '', deferredSince: T0 }),
        sourceTrace(3, { source: 'other', storeId: 'elsewhere', traceId: traceId(1) }),
      ]);
      expect(await store.sources.storeIdOf('p', 'lf', traceId(1))).toBe('st-00001');
      expect(await store.sources.storeIdOf('p', 'other', traceId(1))).toBe('elsewhere');
      expect(await store.sources.storeIdOf('p', 'lf', traceId(2))).toBe('st-00002');
      expect(await store.sources.storeIdOf('p', 'lf', traceId(9))).toBeUndefined();
      expect(await store.sources.storeIdOf('q', 'lf', traceId(1))).toBeUndefined();
      expect(await store.sources.storeIdOf('p', 'nope', traceId(1))).toBeUndefined();
    });

    it('finds the trace id of a store id across the sources of a project, the id matched exactly', async () => {
      await store.sources.saveTraces([
        sourceTrace(1, { storeId: 'tr-ABC' }),
        sourceTrace(2, { source: 'other', storeId: 'uuid-2' }),
      ]);
      expect(await store.sources.traceIdOf('p', 'tr-ABC')).toBe(traceId(1));
      expect(await store.sources.traceIdOf('p', 'uuid-2')).toBe(traceId(2));
      expect(await store.sources.traceIdOf('p', 'tr-abc')).toBeUndefined();
      expect(await store.sources.traceIdOf('q', 'tr-ABC')).toBeUndefined();
    });

    it('reads and writes more traces than one statement binds', async () => {
      const many = Array.from({ length: 1234 }, (_, i) => sourceTrace(i));
      await store.sources.saveTraces(many);
      const ids = many.map((t) => t.storeId).reverse();
      const got = await store.sources.traces('p', 'lf', ids);
      expect(got).toHaveLength(1234);
      expect(got.map((t) => t.storeId)).toEqual(ids);
      expect(got[0]).toStrictEqual(sourceTrace(1233));
    });

    it('lists deferred traces oldest first', async () => {
      await store.sources.saveTraces([
        sourceTrace(1, { version: '', deferredSince: T0 + 30 }),
        sourceTrace(2),
        sourceTrace(3, { version: '', deferredSince: T0 + 10 }),
        sourceTrace(4, { version: '', deferredSince: T0 + 20 }),
        sourceTrace(5, { version: '', deferredSince: T0 + 10 }),
        sourceTrace(6, { source: 'other', version: '', deferredSince: T0 }),
        sourceTrace(7, { project: 'q', version: '', deferredSince: T0 }),
      ]);
      const deferred = await store.sources.deferred('p', 'lf', 10);
      expect(deferred.map((t) => t.storeId)).toEqual([
        'st-00003',
        'st-00005',
        'st-00004',
        'st-00001',
      ]);
      expect(deferred[0]).toStrictEqual(sourceTrace(3, { version: '', deferredSince: T0 + 10 }));
      expect((await store.sources.deferred('p', 'lf', 2)).map((t) => t.storeId)).toEqual([
        'st-00003',
        'st-00005',
      ]);
      expect(await store.sources.deferred('p', 'lf', 0)).toEqual([]);
      // Finished in the store: stored with its version and no longer deferred.
      await store.sources.saveTraces([sourceTrace(3)]);
      expect((await store.sources.deferred('p', 'lf', 10)).map((t) => t.storeId)).toEqual([
        'st-00005',
        'st-00004',
        'st-00001',
      ]);
      expect(await store.sources.deferred('p', 'nope', 10)).toEqual([]);
    });
  });

  describe('write-back queue', () => {
    it('claims visible write-backs oldest first, hides them, and hands them out again after the timeout', async () => {
      await store.sources.enqueueWriteBacks(
        [writeBack(1), writeBack(2, { judge: true })],
        clock.now(),
      );
      clock.advance(10);
      await store.sources.enqueueWriteBacks([writeBack(3, { project: 'q' })], clock.now());
      await store.sources.enqueueWriteBacks([], clock.now());

      const now = clock.now();
      // Not visible before they were enqueued.
      expect(await store.sources.claimWriteBacks(T0 - 1, 10, now + 60_000, 'early')).toEqual([]);
      expect(await store.sources.claimWriteBacks(now, 0, now + 60_000, 'none')).toEqual([]);

      const first = await store.sources.claimWriteBacks(now, 2, now + 60_000, 'claim-a');
      expect(first).toStrictEqual([
        { ...writeBack(1), id: first[0]!.id, attempts: 1, claim: 'claim-a' },
        { ...writeBack(2, { judge: true }), id: first[1]!.id, attempts: 1, claim: 'claim-a' },
      ]);
      expect(first[0]!.id).toMatch(/^wb_[0-9a-f]+$/);
      expect(first[0]!.id < first[1]!.id).toBe(true);
      const second = await store.sources.claimWriteBacks(now, 10, now + 60_000, 'claim-b');
      expect(second).toMatchObject([{ project: 'q', attempts: 1, claim: 'claim-b' }]);
      expect(first[1]!.id < second[0]!.id).toBe(true);
      expect(await store.sources.claimWriteBacks(now + 59_999, 10, now + 120_000, 'c')).toEqual([]);

      // The writer holding claim-a died: after the timeout its write-backs are claimed again.
      const again = await store.sources.claimWriteBacks(now + 60_000, 10, now + 120_000, 'claim-d');
      expect(again.map((w) => [w.traceId, w.attempts, w.claim])).toEqual([
        [traceId(1), 2, 'claim-d'],
        [traceId(2), 2, 'claim-d'],
        [traceId(3), 2, 'claim-d'],
      ]);
      const [one, two, three] = again;

      // Fenced: the stale claim can neither finish nor retry, nor can the never-claimed token.
      expect(await store.sources.finishWriteBack(one!.id, 'claim-a')).toBe(false);
      expect(await store.sources.retryWriteBack(two!.id, 'claim-a', now)).toBe(false);
      expect(await store.sources.finishWriteBack(one!.id, '')).toBe(false);
      expect(await store.sources.retryWriteBack(one!.id, '', now)).toBe(false);
      expect(await store.sources.finishWriteBack('wb_missing', 'claim-d')).toBe(false);
      expect(await store.sources.finishWriteBack(one!.id, 'claim-d')).toBe(true);
      expect(await store.sources.finishWriteBack(one!.id, 'claim-d')).toBe(false);
      expect(await store.sources.retryWriteBack(one!.id, 'claim-d', now)).toBe(false);

      // Retried: visible again at the given time, not before, with its claims counted.
      expect(await store.sources.retryWriteBack(two!.id, 'claim-d', now + 70_000)).toBe(true);
      expect(await store.sources.claimWriteBacks(now + 69_999, 10, now + 200_000, 'e')).toEqual([]);
      const retried = await store.sources.claimWriteBacks(
        now + 70_000,
        10,
        now + 200_000,
        'claim-e',
      );
      expect(retried).toMatchObject([{ id: two!.id, attempts: 3, claim: 'claim-e' }]);
      // The earlier claim lost it with the new claim.
      expect(await store.sources.finishWriteBack(two!.id, 'claim-d')).toBe(false);
      expect(await store.sources.finishWriteBack(two!.id, 'claim-e')).toBe(true);
      expect(await store.sources.finishWriteBack(three!.id, 'claim-d')).toBe(true);
      expect(await store.sources.claimWriteBacks(now + 1e9, 10, now + 2e9, 'last')).toEqual([]);
    });

    it('never hands one write-back to two concurrent claimers', async () => {
      const other = await target.open(clock);
      try {
        const items = Array.from({ length: 200 }, (_, i) => writeBack(i));
        await store.sources.enqueueWriteBacks(items.slice(0, 100), clock.now());
        await store.sources.enqueueWriteBacks(items.slice(100), clock.now());
        const now = clock.now();
        const claimedBy = async (worker: number): Promise<string[]> => {
          const s = worker % 2 === 0 ? store : other;
          const got: string[] = [];
          for (let round = 0; ; round++) {
            const claim = `w${worker}-${round}`;
            const batch = await s.sources.claimWriteBacks(now, 7, now + 60_000, claim);
            if (batch.length === 0) return got;
            expect(batch.length).toBeLessThanOrEqual(7);
            for (const w of batch) expect(w.claim).toBe(claim);
            got.push(...batch.map((w) => w.id));
          }
        };
        const all = (await Promise.all([0, 1, 2, 3].map(claimedBy))).flat();
        expect(all).toHaveLength(200);
        expect(new Set(all).size).toBe(200);

        // All at once for everything: still each write-back exactly once.
        const later = now + 60_000;
        const batches = await Promise.all(
          [0, 1, 2, 3].map((w) =>
            (w % 2 === 0 ? store : other).sources.claimWriteBacks(
              later,
              200,
              later + 60_000,
              `x${w}`,
            ),
          ),
        );
        const again = batches.flat();
        expect(again).toHaveLength(200);
        expect(new Set(again.map((w) => w.id)).size).toBe(200);
        for (const w of again) expect(w.attempts).toBe(2);

        // Two finishers racing for each one: exactly one wins each.
        const wins = await Promise.all(
          again.flatMap((w) => [
            store.sources.finishWriteBack(w.id, w.claim),
            other.sources.finishWriteBack(w.id, w.claim),
          ]),
        );
        expect(wins.filter(Boolean)).toHaveLength(200);
      } finally {
        await other.close();
      }
    });
  });

  describe('dead letters', () => {
    const failure = (n: number) => ({
      code: 'LANGFUSE_ACCESS_DENIED',
      message: `Langfuse at lf.example.com (POST scores) answered 401 (${n})`,
      at: T0 + n,
    });

    it('moves a claimed write-back out of the queue, counts it, and lists letters newest first', async () => {
      await store.sources.saveState(state({ scored: 2 }));
      await store.sources.enqueueWriteBacks(
        [writeBack(1), writeBack(2), writeBack(3, { source: 'other' })],
        clock.now(),
      );
      const [one, two, three] = await store.sources.claimWriteBacks(
        clock.now(),
        10,
        T0 + 60_000,
        'claim-a',
      );
      // Only the claim that holds it moves it.
      expect(
        await store.sources.deadLetterWriteBack({ ...one!, claim: 'stale' }, failure(1), 10),
      ).toBe(false);
      expect(await store.sources.deadLetterWriteBack({ ...one!, claim: '' }, failure(1), 10)).toBe(
        false,
      );
      expect(await store.sources.deadLetterWriteBack(one!, failure(1), 10)).toBe(true);
      expect(await store.sources.deadLetterWriteBack(one!, failure(1), 10)).toBe(false);
      expect(await store.sources.deadLetterWriteBack(two!, failure(2), 10)).toBe(true);
      // A source without a pull state (deleted meanwhile) still gets its letter.
      expect(await store.sources.deadLetterWriteBack(three!, failure(3), 10)).toBe(true);

      expect(await store.sources.claimWriteBacks(T0 + 1e9, 10, T0 + 2e9, 'later')).toEqual([]);
      expect(await store.sources.getState('p', 'lf')).toMatchObject({ deadLetters: 2, scored: 2 });
      const letters = await store.sources.deadLetters('p', 'lf', 10);
      expect(letters[0]).toStrictEqual({
        id: two!.id,
        project: 'p',
        source: 'lf',
        traceId: traceId(2),
        policy: 'quality',
        metric: 'relevance',
        attempts: 1,
        code: 'LANGFUSE_ACCESS_DENIED',
        message: failure(2).message,
        failedAt: T0 + 2,
      });
      expect(letters.map((l) => l.id)).toEqual([two!.id, one!.id]);
      expect(await store.sources.deadLetters('p', 'lf', 1)).toHaveLength(1);
      expect(await store.sources.deadLetters('p', 'lf', 0)).toEqual([]);
      expect(await store.sources.deadLetters('p', 'other', 10)).toMatchObject([
        { traceId: traceId(3) },
      ]);
      // Saving the state never overwrites the counter.
      await store.sources.saveState(state({ phase: 'tailing' }));
      expect(await store.sources.getState('p', 'lf')).toMatchObject({ deadLetters: 2 });
    });

    it('keeps only the newest letters of a source, and drops them with the source', async () => {
      await store.sources.upsert('p', 'lf', resource('p', 'lf'), clock.now());
      await store.sources.saveState(state());
      await store.sources.enqueueWriteBacks(
        Array.from({ length: 5 }, (_, i) => writeBack(i + 1)),
        clock.now(),
      );
      const rows = await store.sources.claimWriteBacks(clock.now(), 10, T0 + 60_000, 'c');
      for (const [i, row] of rows.entries()) {
        await store.withTransaction((tx) => tx.sources.deadLetterWriteBack(row, failure(i + 1), 3));
      }
      expect((await store.sources.deadLetters('p', 'lf', 10)).map((l) => l.traceId)).toEqual([
        traceId(5),
        traceId(4),
        traceId(3),
      ]);
      expect(await store.sources.getState('p', 'lf')).toMatchObject({ deadLetters: 5 });

      await store.sources.delete('p', 'lf');
      expect(await store.sources.deadLetters('p', 'lf', 10)).toEqual([]);
    });

    it('is all or nothing inside a transaction', async () => {
      await store.sources.saveState(state());
      await store.sources.enqueueWriteBacks([writeBack(1)], clock.now());
      const [row] = await store.sources.claimWriteBacks(clock.now(), 10, T0 + 60_000, 'c');
      await expect(
        store.withTransaction(async (tx) => {
          await tx.sources.deadLetterWriteBack(row!, failure(1), 10);
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      expect(await store.sources.deadLetters('p', 'lf', 10)).toEqual([]);
      expect(await store.sources.getState('p', 'lf')).toMatchObject({ deadLetters: 0 });
      expect(await store.sources.finishWriteBack(row!.id, 'c')).toBe(true);
    });
  });

  describe('ledger', () => {
    it('stores the last write per (source, trace, policy, metric) and replaces it', async () => {
      const entry = {
        project: 'p',
        source: 'lf',
        traceId: traceId(1),
        policy: 'quality',
        metric: 'relevance',
        remoteId: 'score-1',
        valueDigest: 'd1',
      };
      expect(await store.sources.ledger('p', 'lf', traceId(1), 'quality', 'relevance')).toBe(
        undefined,
      );
      await store.sources.saveLedger(entry);
      await store.sources.saveLedger({ ...entry, metric: 'toxicity', remoteId: 'score-2' });
      expect(await store.sources.ledger('p', 'lf', traceId(1), 'quality', 'relevance')).toEqual(
        entry,
      );
      await store.sources.saveLedger({ ...entry, remoteId: 'score-1b', valueDigest: 'd2' });
      expect(
        await store.sources.ledger('p', 'lf', traceId(1), 'quality', 'relevance'),
      ).toStrictEqual({ ...entry, remoteId: 'score-1b', valueDigest: 'd2' });
      expect(
        await store.sources.ledger('p', 'lf', traceId(1), 'quality', 'toxicity'),
      ).toMatchObject({ remoteId: 'score-2', valueDigest: 'd1' });
      const keys: [string, string, string, string, string][] = [
        ['q', 'lf', traceId(1), 'quality', 'relevance'],
        ['p', 'other', traceId(1), 'quality', 'relevance'],
        ['p', 'lf', traceId(2), 'quality', 'relevance'],
        ['p', 'lf', traceId(1), 'other', 'relevance'],
      ];
      for (const key of keys) expect(await store.sources.ledger(...key)).toBeUndefined();
    });
  });

  describe('in transactions', () => {
    it('queues write-backs and counts with the rest of a transaction, or not at all', async () => {
      await store.sources.upsert('p', 'lf', resource('p', 'lf'), clock.now());
      await store.sources.saveState(state());
      await expect(
        store.withTransaction(async (tx) => {
          await tx.sources.enqueueWriteBacks([writeBack(1)], clock.now());
          await tx.sources.count('p', 'lf', 'pulled', 1, clock.now());
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      expect(await store.sources.claimWriteBacks(clock.now(), 10, T0 + 1000, 'a')).toEqual([]);
      expect(await store.sources.getState('p', 'lf')).toMatchObject({ pulled: 0 });

      await store.withTransaction(async (tx) => {
        await tx.sources.enqueueWriteBacks([writeBack(1)], clock.now());
        await tx.sources.count('p', 'lf', 'pulled', 1, clock.now());
        await tx.sources.upsert('p', 'lf', resource('p', 'lf', '1m'), clock.now());
      });
      expect(await store.sources.claimWriteBacks(clock.now(), 10, T0 + 1000, 'b')).toHaveLength(1);
      expect(await store.sources.getState('p', 'lf')).toMatchObject({ pulled: 1 });
      expect(await store.sources.get('p', 'lf')).toMatchObject({ generation: 2 });
    });
  });
}

describe('source store on SQLite', () => {
  sourcesContract(sqliteHarness('touchstone-sources-'));
});

describe.skipIf(PG_URL === undefined || PG_URL === '')('source store on PostgreSQL', () => {
  sourcesContract(pgHarness(PG_URL ?? ''));
});
