import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type StoreTarget, storeVariants, variantTarget } from '../../../test/support/stores.js';
import { CoreErrors, FakeClock, type TouchstoneError } from '../../core/index.js';
import { type IdempotencyScope, type Store, StoreErrors } from '../../store/index.js';
import { IDEMPOTENCY_DEFAULTS, type IdempotencyOptions } from './limits.js';
import { IdempotencyService } from './service.js';

/**
 * The service's rules on a real database, SQLite always and PostgreSQL when TOUCHSTONE_TEST_PG
 * is set: replay, conflict, in flight, uncertain outcomes, eviction, expiry, concurrency.
 */

const T0 = Date.parse('2026-01-01T00:00:00Z');
const DAY = 24 * 60 * 60 * 1000;

const scope = (key: string, principal = 'key_a', operation = 'runs.create'): IdempotencyScope => ({
  principal,
  operation,
  key,
});

async function failure(op: Promise<unknown>): Promise<TouchstoneError> {
  try {
    await op;
  } catch (err) {
    return err as TouchstoneError;
  }
  throw new Error('expected a failure');
}

function deferred<T>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

for (const variant of storeVariants()) {
  describe(`idempotency service on ${variant.name}`, () => {
    let clock: FakeClock;
    let store: Store;
    let target: StoreTarget;
    let dispose: () => Promise<void>;
    const services: IdempotencyService[] = [];

    const open = () => target.open(clock);

    function service(options: Partial<IdempotencyOptions> = {}, on: Store = store) {
      const s = new IdempotencyService({ store: on, clock, options });
      services.push(s);
      return s;
    }

    beforeEach(async () => {
      clock = new FakeClock(T0);
      target = await variantTarget(variant, 'touchstone-idem-');
      store = await open();
      dispose = async () => {
        for (const s of services.splice(0)) await s.shutdown();
        await store.close();
        await target.cleanup();
      };
    });
    afterEach(async () => dispose());

    it('runs once and replays the same status and body, marked as a replay', async () => {
      const idem = service();
      let runs = 0;
      const fn = async () => {
        runs += 1;
        return { status: 201, body: { id: 'run_1', labels: { a: 'é' }, n: [1, 2.5] } };
      };
      const first = await idem.execute(scope('k1'), 'd1', fn);
      const second = await idem.execute(scope('k1'), 'd1', fn);
      expect(runs).toBe(1);
      expect(first).toEqual({ status: 201, body: first.body, replayed: false });
      expect(second).toEqual({ ...first, replayed: true });
      // Another principal or operation with the same key is another scope: it runs.
      await idem.execute(scope('k1', 'key_b'), 'd1', fn);
      await idem.execute(scope('k1', 'key_a', 'runs.delete'), 'd1', fn);
      expect(runs).toBe(3);
    });

    it('refuses the same key with a changed payload (409), whatever the record state', async () => {
      const idem = service();
      await idem.execute(scope('k1'), 'd1', async () => ({ status: 200, body: {} }));
      const err = await failure(
        idem.execute(scope('k1'), 'd2', async () => ({ status: 200, body: {} })),
      );
      expect(err).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', kind: 'already_exists' });

      const gate = deferred<void>();
      const running = idem.execute(scope('k2'), 'd1', async () => {
        await gate.promise;
        return { status: 200, body: {} };
      });
      await waitFor(async () => (await store.idempotency.get(scope('k2'))) !== undefined);
      expect(
        await failure(idem.execute(scope('k2'), 'other', async () => ({ status: 200, body: 1 }))),
      ).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });
      gate.resolve();
      await running;
    });

    it('answers a request whose twin is still running with 409 in flight and a retry hint', async () => {
      const idem = service();
      const gate = deferred<void>();
      let runs = 0;
      const fn = async () => {
        runs += 1;
        await gate.promise;
        return { status: 200, body: { done: true } };
      };
      const first = idem.execute(scope('k1'), 'd1', fn);
      await waitFor(async () => (await store.idempotency.get(scope('k1'))) !== undefined);
      const err = await failure(idem.execute(scope('k1'), 'd1', fn));
      expect(err).toMatchObject({
        code: 'IDEMPOTENCY_REQUEST_IN_FLIGHT',
        kind: 'aborted',
        retryable: true,
        retryAfterSeconds: 1,
      });
      gate.resolve();
      expect(await first).toMatchObject({ replayed: false });
      expect(await idem.execute(scope('k1'), 'd1', fn)).toEqual({
        status: 200,
        body: { done: true },
        replayed: true,
      });
      expect(runs).toBe(1);
    });

    it('lets exactly one of many concurrent first requests run, also across replicas', async () => {
      const second = variant.name === 'sqlite' ? store : await open();
      try {
        const replicas = [service(), service({}, second)];
        const attempts = 12;
        let runs = 0;
        let refused = 0;
        const othersRefused = Promise.withResolvers<void>();
        // The run holds its key until every other request was answered: on a slow machine a
        // request arriving after the run finished would be a (correct) replay instead.
        const fn = async () => {
          runs += 1;
          await othersRefused.promise;
          return { status: 200, body: { runs } };
        };
        const settled = await Promise.allSettled(
          Array.from({ length: attempts }, (_, i) =>
            (replicas[i % 2] as IdempotencyService)
              .execute(scope('race'), 'd', fn)
              .catch((err: unknown) => {
                if (++refused === attempts - 1) othersRefused.resolve();
                throw err;
              }),
          ),
        );
        expect(runs).toBe(1);
        const ok = settled.filter((s) => s.status === 'fulfilled');
        expect(ok).toHaveLength(1);
        for (const s of settled) {
          if (s.status === 'rejected') {
            expect(s.reason).toMatchObject({ code: 'IDEMPOTENCY_REQUEST_IN_FLIGHT' });
          }
        }
      } finally {
        if (second !== store) await second.close();
      }
    });

    it('turns a crashed holder’s reservation into an uncertain outcome, then runs the retry', async () => {
      const idem = service();
      // A replica that reserved the key and died: its record stays in flight, never renewed.
      await store.idempotency.insert({
        ...scope('k1'),
        digest: 'd1',
        token: 'dead',
        createdAt: T0,
        expiresAt: T0 + DAY,
      });
      let runs = 0;
      const fn = async () => {
        runs += 1;
        return { status: 200, body: { attempt: runs } };
      };
      clock.advance(IDEMPOTENCY_DEFAULTS.staleAfterMs - 1);
      expect(await failure(idem.execute(scope('k1'), 'd1', fn))).toMatchObject({
        code: 'IDEMPOTENCY_REQUEST_IN_FLIGHT',
      });
      clock.advance(2);
      const err = await failure(idem.execute(scope('k1'), 'd1', fn));
      expect(err).toMatchObject({
        code: 'IDEMPOTENCY_OUTCOME_UNCERTAIN',
        kind: 'unavailable',
        retryable: true,
      });
      expect(err.message).toMatch(/same Idempotency-Key/);
      expect((await store.idempotency.get(scope('k1')))?.state).toBe('uncertain');
      // A changed payload is still a conflict, not a way around the uncertain record.
      expect(await failure(idem.execute(scope('k1'), 'd2', fn))).toMatchObject({
        code: 'IDEMPOTENCY_KEY_REUSED',
      });
      expect(runs).toBe(0);
      // The caller reconciled and retries with the same key: it runs once, and is then replayed.
      expect(await idem.execute(scope('k1'), 'd1', fn)).toEqual({
        status: 200,
        body: { attempt: 1 },
        replayed: false,
      });
      expect(await idem.execute(scope('k1'), 'd1', fn)).toMatchObject({ replayed: true });
      expect(runs).toBe(1);
    });

    it('answers a store failure after the write was sent as uncertain (503), never as done', async () => {
      const idem = service();
      let runs = 0;
      const failing = async (): Promise<{ status: number; body: unknown }> => {
        runs += 1;
        throw StoreErrors.STORE_OUTCOME_UNKNOWN('connection lost during COMMIT');
      };
      const err = await failure(idem.execute(scope('k1'), 'd1', failing));
      expect(err).toMatchObject({ code: 'IDEMPOTENCY_OUTCOME_UNCERTAIN', retryAfterSeconds: 1 });
      expect(err.message).toMatch(/never a new one/);
      expect((await store.idempotency.get(scope('k1')))?.state).toBe('uncertain');
      const ok = async () => {
        runs += 1;
        return { status: 200, body: { ok: true } };
      };
      expect(await idem.execute(scope('k1'), 'd1', ok)).toMatchObject({ replayed: false });
      expect(await idem.execute(scope('k1'), 'd1', ok)).toMatchObject({ replayed: true });
      expect(runs).toBe(2);
    });

    it('stores the request’s own errors and replays them; retryable failures release the key', async () => {
      const idem = service();
      let runs = 0;
      const notFound = async (): Promise<{ status: number; body: unknown }> => {
        runs += 1;
        throw CoreErrors.NOT_FOUND('no run "r1" in project "p"', {
          details: [{ path: 'id', message: 'unknown' }],
        });
      };
      const first = await failure(idem.execute(scope('k1'), 'd1', notFound));
      const again = await failure(idem.execute(scope('k1'), 'd1', notFound));
      expect(runs).toBe(1);
      expect(again).toMatchObject({
        code: 'NOT_FOUND',
        kind: 'not_found',
        message: first.message,
        details: first.details,
      });

      const unavailable = async (): Promise<{ status: number; body: unknown }> => {
        runs += 1;
        throw StoreErrors.STORE_UNAVAILABLE('database down');
      };
      await failure(idem.execute(scope('k2'), 'd1', unavailable));
      await failure(idem.execute(scope('k2'), 'd1', unavailable));
      expect(runs).toBe(3);
      expect(await store.idempotency.get(scope('k2'))).toBeUndefined();

      const serverError = async () => {
        runs += 1;
        return { status: 503, body: { busy: true } };
      };
      await idem.execute(scope('k3'), 'd1', serverError);
      expect(await idem.execute(scope('k3'), 'd1', serverError)).toMatchObject({ replayed: false });
      expect(runs).toBe(5);

      const bug = async (): Promise<{ status: number; body: unknown }> => {
        runs += 1;
        throw new TypeError('x is undefined');
      };
      await failure(idem.execute(scope('k4'), 'd1', bug));
      await failure(idem.execute(scope('k4'), 'd1', bug));
      expect(runs).toBe(7);
    });

    it('evicts the oldest keys past 1024-like limits by count and by bytes, per scope', async () => {
      const idem = service({ maxKeysPerScope: 3 });
      const body = (n: number) => async () => ({ status: 200, body: { n } });
      for (let i = 1; i <= 4; i++) {
        clock.advance(1);
        await idem.execute(scope(`k${i}`), 'd', body(i));
      }
      await idem.execute(scope('k1', 'key_b'), 'd', body(0));
      // k1 was the oldest: evicted, so a new request with that key runs instead of conflicting.
      expect(await idem.execute(scope('k1'), 'changed', body(9))).toMatchObject({
        replayed: false,
      });
      expect(await idem.execute(scope('k3'), 'd', body(0))).toMatchObject({
        replayed: true,
        body: { n: 3 },
      });
      expect(await store.idempotency.usage('key_a', 'runs.create')).toMatchObject({ keys: 3 });
      expect(await store.idempotency.usage('key_b', 'runs.create')).toMatchObject({ keys: 1 });

      const big = service({ maxBytesPerScope: 2500 });
      // About 1 KiB per stored outcome (two-character strings repeated 500 times, plus headers).
      const kib = (c: string) => async () => ({ status: 200, body: c.repeat(500) });
      for (const k of ['b1', 'b2', 'b3']) {
        clock.advance(1);
        await big.execute(scope(k, 'key_c'), 'd', kib(k));
      }
      expect(await store.idempotency.get(scope('b1', 'key_c'))).toBeUndefined();
      expect(await big.execute(scope('b2', 'key_c'), 'd', kib('x'))).toMatchObject({
        replayed: true,
        body: 'b2'.repeat(500),
      });
      expect((await store.idempotency.usage('key_c', 'runs.create')).bytes).toBeLessThanOrEqual(
        2500,
      );
    });

    it('refuses a new key when the scope is full of live requests, and never evicts them', async () => {
      const idem = service({ maxKeysPerScope: 2 });
      const a = await idem.begin(scope('a'), 'd');
      const b = await idem.begin(scope('b'), 'd');
      expect(await failure(idem.begin(scope('c'), 'd'))).toMatchObject({
        code: 'IDEMPOTENCY_SCOPE_FULL',
        kind: 'resource_exhausted',
        retryable: true,
      });
      if (a.kind !== 'run' || b.kind !== 'run') throw new Error('expected reservations');
      await a.held.complete({ status: 200, headers: {}, body: Buffer.from('{}') });
      // Now `a` is a stored outcome and may go.
      const c = await idem.begin(scope('c'), 'd');
      expect(c.kind).toBe('run');
      expect(await store.idempotency.get(scope('a'))).toBeUndefined();
      await b.held.release();
      if (c.kind === 'run') await c.held.release();
    });

    it('refuses a response over the limit and stores that refusal', async () => {
      const idem = service({ maxResponseBytes: 100 });
      let runs = 0;
      const fn = async () => {
        runs += 1;
        return { status: 200, body: 'x'.repeat(200) };
      };
      expect(await failure(idem.execute(scope('k1'), 'd', fn))).toMatchObject({
        code: 'IDEMPOTENCY_RESPONSE_TOO_LARGE',
      });
      expect(await failure(idem.execute(scope('k1'), 'd', fn))).toMatchObject({
        code: 'IDEMPOTENCY_RESPONSE_TOO_LARGE',
      });
      expect(runs).toBe(1);
    });

    it('forgets outcomes 24 hours after they were stored, lazily and by the sweep', async () => {
      const idem = service();
      let runs = 0;
      const fn = async () => {
        runs += 1;
        return { status: 200, body: { runs } };
      };
      await idem.execute(scope('k1'), 'd1', fn);
      await idem.execute(scope('k2'), 'd1', fn);
      clock.advance(DAY - 1);
      expect(await idem.execute(scope('k1'), 'd1', fn)).toMatchObject({ replayed: true });
      expect(await idem.sweep()).toBe(0);
      clock.advance(1);
      // Expired: the key is free again (even for another payload), and it runs.
      expect(await idem.execute(scope('k1'), 'd2', fn)).toMatchObject({ replayed: false });
      expect(runs).toBe(3);
      expect(await idem.sweep()).toBe(1);
      expect(await store.idempotency.get(scope('k2'))).toBeUndefined();
      expect(await store.idempotency.get(scope('k1'))).toBeDefined();
    });

    it('renews a running request’s reservation, so it never looks crashed', async () => {
      const idem = service({ heartbeatMs: 10 });
      const begun = await idem.begin(scope('k1'), 'd');
      if (begun.kind !== 'run') throw new Error('expected a reservation');
      clock.advance(IDEMPOTENCY_DEFAULTS.staleAfterMs * 2);
      await waitFor(
        async () => (await store.idempotency.get(scope('k1')))?.heartbeatAt === clock.now(),
      );
      expect(await failure(idem.begin(scope('k1'), 'd'))).toMatchObject({
        code: 'IDEMPOTENCY_REQUEST_IN_FLIGHT',
      });
      await begun.held.release();
      expect(await store.idempotency.get(scope('k1'))).toBeUndefined();
    });
  });
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 3000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
