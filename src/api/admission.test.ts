import { describe, expect, it } from 'vitest';
import { isTouchstoneError } from '../core/index.js';
import { type ShedReason, Turnstile, WriteAdmission } from './admission.js';

function admission(maxRequests: number, maxBytes: number) {
  const shed: ShedReason[] = [];
  const a = new WriteAdmission({ maxRequests, maxBytes }, { onShed: (r) => shed.push(r) });
  return { a, shed };
}

function refusal(fn: () => unknown): { code: string; retryAfter?: number } {
  try {
    fn();
  } catch (err) {
    if (!isTouchstoneError(err)) throw err;
    return {
      code: err.code,
      ...(err.retryAfterSeconds === undefined ? {} : { retryAfter: err.retryAfterSeconds }),
    };
  }
  throw new Error('expected a refusal');
}

describe('WriteAdmission', () => {
  it('refuses a write past the request limit with OVERLOADED and Retry-After, and counts it', () => {
    const { a, shed } = admission(2, 1000);
    a.admit(10);
    const second = a.admit(10);
    expect(refusal(() => a.admit(10))).toEqual({ code: 'OVERLOADED', retryAfter: 1 });
    expect(shed).toEqual(['requests']);
    second.responseEnded();
    expect(a.inFlight).toEqual({ requests: 1, bytes: 10 });
    a.admit(10);
  });

  it('refuses a write whose declared body does not fit the byte budget', () => {
    const { a, shed } = admission(10, 1000);
    a.admit(600);
    expect(refusal(() => a.admit(500)).code).toBe('OVERLOADED');
    expect(shed).toEqual(['bytes']);
    expect(a.inFlight).toEqual({ requests: 1, bytes: 600 });
    a.admit(400);
  });

  it('lets one write larger than the whole budget in when it is alone, and nothing beside it', () => {
    const { a } = admission(10, 1000);
    const big = a.admit(5000);
    expect(a.inFlight.bytes).toBe(5000);
    expect(refusal(() => a.admit(1)).code).toBe('OVERLOADED');
    big.responseEnded();
    expect(a.inFlight).toEqual({ requests: 0, bytes: 0 });
  });

  it('grows a reservation as streamed bytes arrive, until the budget refuses', () => {
    const { a } = admission(10, 1000);
    a.admit(300);
    const streamed = a.admit(0);
    expect(streamed.ensure(500)).toBe(true);
    expect(streamed.ensure(400)).toBe(true);
    expect(a.inFlight.bytes).toBe(800);
    expect(streamed.ensure(700)).toBe(true);
    expect(streamed.ensure(701)).toBe(false);
    expect(a.inFlight.bytes).toBe(1000);
  });

  it('keeps the bytes counted until both the answer and the work on them ended, once', () => {
    const { a } = admission(10, 1000);
    const t = a.admit(100);
    const unhold = t.hold();
    t.responseEnded();
    expect(a.inFlight).toEqual({ requests: 1, bytes: 100 });
    unhold();
    unhold();
    t.responseEnded();
    expect(a.inFlight).toEqual({ requests: 0, bytes: 0 });
  });
});

function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

describe('Turnstile', () => {
  it('starts one turn per event-loop iteration, so a due timer runs between two turns', async () => {
    const t = new Turnstile(1, 5000, admission(10, 1000).a);
    const order: string[] = [];
    setTimeout(() => order.push('timer'), 1);
    const turn = async (name: string) => {
      const end = await t.take();
      order.push(name);
      busy(3);
      end();
    };
    await Promise.all([turn('a'), turn('b'), turn('c')]);
    expect(order).toEqual(['a', 'timer', 'b', 'c']);
  });

  it('runs up to its concurrency at once', async () => {
    const t = new Turnstile(2, 5000, admission(10, 1000).a);
    const ends = await Promise.all([t.take(), t.take()]);
    let third = false;
    const pending = t.take().then((end) => {
      third = true;
      end();
    });
    await new Promise((r) => setTimeout(r, 5));
    expect(third).toBe(false);
    ends[0]?.();
    await pending;
    expect(third).toBe(true);
  });

  it('refuses a request that waited past its limit, and one that would wait that long', async () => {
    let now = 0;
    const { a, shed } = admission(10, 1000);
    const t = new Turnstile(1, 5000, a, () => now);
    const first = await t.take();
    now = 1000;
    first();
    t.refuseIfBacklogged();
    const second = await t.take();
    const late = t.take();
    now = 7000;
    second();
    await expect(late).rejects.toMatchObject({ code: 'OVERLOADED' });
    // Turns now take 2 s on average: two waiting make 4 s (let in), three 6 s (refused).
    const waiting = [t.take(), t.take()];
    t.refuseIfBacklogged();
    waiting.push(t.take());
    // Told to come back when the backlog should be gone (6 s), capped at 3 s.
    expect(refusal(() => t.refuseIfBacklogged())).toEqual({ code: 'OVERLOADED', retryAfter: 3 });
    expect(shed).toEqual(['queue', 'queue']);
    for (const w of waiting) (await w)();
  });

  it('drops a waiter whose client hung up, without giving it a turn', async () => {
    const t = new Turnstile(1, 5000, admission(10, 1000).a);
    const first = await t.take();
    const hungUp = new AbortController();
    const gone = t.take(hungUp.signal);
    const next = t.take();
    hungUp.abort();
    await expect(gone).rejects.toMatchObject({ code: 'OVERLOADED' });
    first();
    (await next)();
  });

  it('gives no turn to a request whose client hung up before it asked (while it was prepared)', async () => {
    const t = new Turnstile(1, 5000, admission(10, 1000).a);
    const hungUp = new AbortController();
    hungUp.abort();
    await expect(t.take(hungUp.signal)).rejects.toMatchObject({ code: 'OVERLOADED' });
    // The turn is still free.
    (await t.take())();
  });
});
