import type { Clock } from '../../core/index.js';

/** Waits `ms`, or rejects with the signal's reason when it aborts first. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

export const realSleep: Sleep = (ms, signal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });

/**
 * Token bucket: `rate` tokens per second, holding at most `burst`. Each take reserves a token
 * (the balance may go negative) and waits until its reservation is covered, which keeps waiters
 * in order without polling.
 */
export class TokenBucket {
  private tokens: number;
  private updatedAt: number;

  constructor(
    private readonly rate: number,
    private readonly burst: number,
    private readonly clock: Clock,
    private readonly sleep: Sleep,
  ) {
    this.tokens = burst;
    this.updatedAt = clock.now();
  }

  async take(signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    const now = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.updatedAt) / 1000) * this.rate);
    this.updatedAt = now;
    this.tokens -= 1;
    if (this.tokens >= 0) return;
    const waitMs = Math.ceil((-this.tokens / this.rate) * 1000);
    try {
      await this.sleep(waitMs, signal);
    } catch (err) {
      // Give the reservation back so an abandoned wait does not slow everyone behind it.
      this.tokens += 1;
      throw err;
    }
  }
}
