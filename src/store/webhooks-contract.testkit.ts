import { expect, it } from 'vitest';
import type { FakeClock } from '../core/index.js';
import type { NewDelivery, Store } from './index.js';

/**
 * The webhook store's part of the store contract (store.int.test.ts runs it on SQLite and
 * PostgreSQL). `ctx()` returns the store and clock of the current test.
 */

const T0 = Date.parse('2026-01-01T00:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();

function hook(n: number, overrides: Partial<Parameters<Store['webhooks']['upsert']>[0]> = {}) {
  return {
    id: `wh_${n}`,
    project: 'alpha',
    name: `hook-${n}`,
    url: `https://example.com/${n}`,
    events: [] as string[],
    secret: `whsec_${'s'.repeat(20)}${n}`,
    disabled: false,
    ...overrides,
  };
}

function delivery(n: number, overrides: Partial<NewDelivery> = {}): NewDelivery {
  return {
    // Time-ordered like real ids: zero-padded so string order is creation order.
    id: `whd_${String(n).padStart(6, '0')}`,
    project: 'alpha',
    webhookId: 'wh_1',
    webhookName: 'hook-1',
    event: 'run.finished',
    payload: JSON.stringify({ n }),
    runId: `run_${n}`,
    createdAt: iso(T0 + n),
    ...overrides,
  };
}

export function webhookStoreContract(ctx: () => { store: Store; clock: FakeClock }): void {
  it('creates a webhook, replaces it by name keeping id and createdAt, and deletes it', async () => {
    const { store, clock } = ctx();
    const first = await store.webhooks.upsert(hook(1), clock.now());
    expect(first.created).toBe(true);
    expect(first.webhook).toStrictEqual({
      ...hook(1),
      createdAt: iso(T0),
      updatedAt: iso(T0),
    });
    clock.advance(5_000);
    const replaced = await store.webhooks.upsert(
      hook(1, {
        id: 'wh_other',
        url: 'https://example.com/new',
        events: ['trace.scored'],
        disabled: true,
      }),
      clock.now(),
    );
    expect(replaced.created).toBe(false);
    expect(replaced.webhook).toMatchObject({
      id: 'wh_1',
      url: 'https://example.com/new',
      events: ['trace.scored'],
      disabled: true,
      createdAt: iso(T0),
      updatedAt: iso(T0 + 5_000),
    });
    expect(await store.webhooks.get('alpha', 'hook-1')).toStrictEqual(replaced.webhook);
    expect(await store.webhooks.get('beta', 'hook-1')).toBeUndefined();
    expect(await store.webhooks.delete('alpha', 'hook-1')).toBe(true);
    expect(await store.webhooks.delete('alpha', 'hook-1')).toBe(false);
    expect(await store.webhooks.get('alpha', 'hook-1')).toBeUndefined();
  });

  it('lists a project by name page by page; listEnabled skips disabled ones', async () => {
    const { store, clock } = ctx();
    for (const n of [3, 1, 2, 4]) {
      await store.webhooks.upsert(hook(n, { disabled: n === 2 }), clock.now());
    }
    await store.webhooks.upsert(hook(9, { project: 'beta' }), clock.now());
    const p1 = await store.webhooks.list('alpha', { pageSize: 3 });
    expect(p1.items.map((w) => w.name)).toEqual(['hook-1', 'hook-2', 'hook-3']);
    expect(p1.nextPageToken).toBeDefined();
    const p2 = await store.webhooks.list('alpha', { pageSize: 3, pageToken: p1.nextPageToken });
    expect(p2.items.map((w) => w.name)).toEqual(['hook-4']);
    expect(p2.nextPageToken).toBeUndefined();
    expect((await store.webhooks.listEnabled('alpha')).map((w) => w.name)).toEqual([
      'hook-1',
      'hook-3',
      'hook-4',
    ]);
    expect(
      (await store.webhooks.getByIds(['wh_4', 'wh_9', 'wh_4', 'nope'])).map((w) => w.id).sort(),
    ).toEqual(['wh_4', 'wh_9']);
  });

  it('claims due deliveries oldest first, once each, hiding them while in flight', async () => {
    const { store, clock } = ctx();
    await store.webhooks.enqueue([delivery(3), delivery(1), delivery(2)]);
    await store.webhooks.enqueue([delivery(4, { createdAt: iso(T0 + 60_000) })]);
    clock.set(T0 + 10);
    const claimed = await store.webhooks.claimDue(clock.now(), 2, 6, clock.now() + 15_000);
    expect(claimed.map((d) => [d.id, d.attempt, d.attempts])).toEqual([
      ['whd_000001', 1, 1],
      ['whd_000002', 1, 1],
    ]);
    expect(claimed[0]).toMatchObject({
      state: 'PENDING',
      payload: '{"n":1}',
      runId: 'run_1',
      event: 'run.finished',
      nextAttemptAt: iso(T0 + 15_010),
    });
    // In flight: hidden. Not yet due: skipped.
    const more = await store.webhooks.claimDue(clock.now(), 10, 6, clock.now() + 15_000);
    expect(more.map((d) => d.id)).toEqual(['whd_000003']);
    expect(await store.webhooks.claimDue(clock.now(), 10, 6, clock.now() + 15_000)).toEqual([]);
  });

  it('keeps each webhook under its in-flight limit when asked to', async () => {
    const { store, clock } = ctx();
    await store.webhooks.enqueue([
      ...Array.from({ length: 6 }, (_, i) => delivery(i)),
      delivery(10, { webhookId: 'wh_2', webhookName: 'hook-2' }),
      delivery(11, { webhookId: 'wh_2', webhookName: 'hook-2' }),
    ]);
    clock.set(T0 + 100);
    const claim = (inFlight: Map<string, number>) =>
      store.webhooks.claimDue(clock.now(), 5, 6, clock.now() + 1_000, { max: 2, inFlight });
    const first = await claim(new Map([['wh_1', 1]]));
    expect(first.map((d) => d.id)).toEqual(['whd_000000', 'whd_000010', 'whd_000011']);
    const second = await claim(new Map([['wh_1', 2]]));
    expect(second).toEqual([]);
    const third = await claim(new Map());
    expect(third.map((d) => d.id)).toEqual(['whd_000001', 'whd_000002']);
  });

  it('never hands one attempt to two concurrent claimers', async () => {
    const { store, clock } = ctx();
    await store.webhooks.enqueue(Array.from({ length: 60 }, (_, i) => delivery(i)));
    clock.set(T0 + 1_000);
    const claim = () => store.webhooks.claimDue(clock.now(), 15, 6, clock.now() + 60_000);
    const ids = (await Promise.all(Array.from({ length: 6 }, claim))).flat().map((d) => d.id);
    expect(new Set(ids).size).toBe(ids.length);
    // Claimers that read the same ids lose them to the first; the rest stays due.
    for (let batch = await claim(); batch.length > 0; batch = await claim()) {
      ids.push(...batch.map((d) => d.id));
    }
    expect(new Set(ids).size).toBe(60);
    expect(ids).toHaveLength(60);
  });

  it('records outcomes only for the attempt a sender owns', async () => {
    const { store, clock } = ctx();
    await store.webhooks.enqueue([delivery(1)]);
    clock.set(T0 + 1);
    const [first] = await store.webhooks.claimDue(clock.now(), 1, 6, clock.now() + 15_000);
    expect(first?.attempt).toBe(1);
    expect(
      await store.webhooks.finishAttempt(
        'whd_000001',
        1,
        { state: 'RETRYING', status: 500, error: 'HTTP 500', nextAttemptAt: clock.now() + 5_000 },
        clock.now(),
      ),
    ).toBe(true);
    let [row] = (await store.webhooks.listDeliveries('wh_1', { pageSize: 10 })).items;
    expect(row).toStrictEqual({
      id: 'whd_000001',
      project: 'alpha',
      webhookId: 'wh_1',
      webhookName: 'hook-1',
      event: 'run.finished',
      state: 'RETRYING',
      attempts: 1,
      nextAttemptAt: iso(T0 + 5_001),
      lastStatus: 500,
      lastError: 'HTTP 500',
      runId: 'run_1',
      createdAt: iso(T0 + 1),
    });

    // The sender of attempt 2 is presumed dead once hidden time passes; attempt 3 takes over and
    // the stale sender can no longer record anything.
    clock.advance(5_000);
    const [second] = await store.webhooks.claimDue(clock.now(), 1, 6, clock.now() + 15_000);
    expect(second?.attempt).toBe(2);
    clock.advance(15_000);
    const [third] = await store.webhooks.claimDue(clock.now(), 1, 6, clock.now() + 15_000);
    expect(third?.attempt).toBe(3);
    expect(
      await store.webhooks.finishAttempt(
        'whd_000001',
        2,
        { state: 'DELIVERED', status: 200 },
        clock.now(),
      ),
    ).toBe(false);
    expect(
      await store.webhooks.finishAttempt(
        'whd_000001',
        3,
        { state: 'DELIVERED', status: 204 },
        clock.now(),
      ),
    ).toBe(true);
    [row] = (await store.webhooks.listDeliveries('wh_1', { pageSize: 10 })).items;
    expect(row).toMatchObject({
      state: 'DELIVERED',
      attempts: 3,
      lastStatus: 204,
      finishedAt: iso(clock.now()),
    });
    expect(row?.lastError).toBeUndefined();
    expect(row?.nextAttemptAt).toBeUndefined();
    // Finished: nothing more is recorded or claimed.
    expect(
      await store.webhooks.finishAttempt(
        'whd_000001',
        3,
        { state: 'FAILED', error: 'x' },
        clock.now(),
      ),
    ).toBe(false);
    clock.advance(3_600_000);
    expect(await store.webhooks.claimDue(clock.now(), 10, 6, clock.now() + 1)).toEqual([]);
  });

  it('records a batch of successes in one call, skipping attempts it no longer owns', async () => {
    const { store, clock } = ctx();
    await store.webhooks.enqueue([delivery(1), delivery(2), delivery(3)]);
    clock.set(T0 + 10);
    const claimed = await store.webhooks.claimDue(clock.now(), 3, 6, clock.now() + 1_000);
    expect(claimed).toHaveLength(3);
    const recorded = await store.webhooks.finishDelivered(
      [
        { id: 'whd_000001', attempt: 1, status: 200 },
        { id: 'whd_000002', attempt: 1, status: 204 },
        { id: 'whd_000003', attempt: 2, status: 200 },
      ],
      clock.now(),
    );
    expect(recorded.sort()).toEqual(['whd_000001', 'whd_000002']);
    const rows = (await store.webhooks.listDeliveries('wh_1', { pageSize: 10 })).items;
    expect(rows.map((d) => [d.id, d.state, d.lastStatus])).toEqual([
      ['whd_000003', 'PENDING', undefined],
      ['whd_000002', 'DELIVERED', 204],
      ['whd_000001', 'DELIVERED', 200],
    ]);
    expect(
      await store.webhooks.finishDelivered([{ id: 'whd_000001', attempt: 1, status: 200 }], 0),
    ).toEqual([]);
  });

  it('fails deliveries whose last allowed attempt was lost, and never claims them again', async () => {
    const { store, clock } = ctx();
    await store.webhooks.enqueue([delivery(1), delivery(2)]);
    clock.set(T0 + 10);
    expect(await store.webhooks.claimDue(clock.now(), 1, 1, clock.now() + 1_000)).toHaveLength(1);
    expect(await store.webhooks.failExhausted(clock.now(), 1, 'lost')).toBe(0);
    clock.advance(1_000);
    expect(await store.webhooks.failExhausted(clock.now(), 1, 'interrupted')).toBe(1);
    const claimed = await store.webhooks.claimDue(clock.now(), 10, 1, clock.now() + 1_000);
    expect(claimed.map((d) => d.id)).toEqual(['whd_000002']);
    const rows = (await store.webhooks.listDeliveries('wh_1', { pageSize: 10 })).items;
    expect(rows.find((d) => d.id === 'whd_000001')).toMatchObject({
      state: 'FAILED',
      attempts: 1,
      lastError: 'interrupted',
    });
  });

  it('lists one webhook’s deliveries newest first, paged', async () => {
    const { store } = ctx();
    await store.webhooks.enqueue([
      ...Array.from({ length: 5 }, (_, i) => delivery(i)),
      delivery(9, {
        webhookId: 'wh_2',
        webhookName: 'hook-2',
        traceId: 't1',
        policy: 'p',
        runId: undefined,
      }),
    ]);
    const p1 = await store.webhooks.listDeliveries('wh_1', { pageSize: 3 });
    expect(p1.items.map((d) => d.id)).toEqual(['whd_000004', 'whd_000003', 'whd_000002']);
    const p2 = await store.webhooks.listDeliveries('wh_1', {
      pageSize: 3,
      pageToken: p1.nextPageToken,
    });
    expect(p2.items.map((d) => d.id)).toEqual(['whd_000001', 'whd_000000']);
    expect(p2.nextPageToken).toBeUndefined();
    const other = await store.webhooks.listDeliveries('wh_2', { pageSize: 3 });
    expect(other.items).toHaveLength(1);
    expect(other.items[0]).toMatchObject({
      traceId: 't1',
      policy: 'p',
      state: 'PENDING',
      attempts: 0,
    });
    expect(other.items[0]?.runId).toBeUndefined();
  });

  it('reports queue depth and the oldest unfinished delivery; prunes finished ones by age', async () => {
    const { store, clock } = ctx();
    expect(await store.webhooks.queueStats()).toStrictEqual({ depth: 0 });
    await store.webhooks.enqueue([delivery(1), delivery(2), delivery(3)]);
    clock.set(T0 + 100);
    const claimed = await store.webhooks.claimDue(clock.now(), 2, 6, clock.now() + 1_000);
    for (const d of claimed) {
      await store.webhooks.finishAttempt(
        d.id,
        d.attempt,
        { state: 'DELIVERED', status: 200 },
        clock.now(),
      );
    }
    expect(await store.webhooks.queueStats()).toStrictEqual({
      depth: 1,
      oldestCreatedAt: iso(T0 + 3),
    });
    expect(await store.webhooks.pruneFinished(T0 + 100, 10)).toBe(0);
    expect(await store.webhooks.pruneFinished(T0 + 101, 1)).toBe(1);
    expect(await store.webhooks.pruneFinished(T0 + 101, 10)).toBe(1);
    expect(
      (await store.webhooks.listDeliveries('wh_1', { pageSize: 10 })).items.map((d) => d.id),
    ).toEqual(['whd_000003']);
  });

  it('enqueues inside a transaction and rolls back with it', async () => {
    const { store } = ctx();
    await expect(
      store.withTransaction(async (tx) => {
        await tx.webhooks.upsert(hook(1), 0);
        await tx.webhooks.enqueue([delivery(1)]);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await store.webhooks.get('alpha', 'hook-1')).toBeUndefined();
    expect(await store.webhooks.queueStats()).toStrictEqual({ depth: 0 });
    await store.withTransaction(async (tx) => {
      await tx.webhooks.enqueue([delivery(1)]);
    });
    expect((await store.webhooks.queueStats()).depth).toBe(1);
  });
}
