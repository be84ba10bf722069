import { AsyncResource } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { type Clock, isTouchstoneError } from '../core/index.js';
import type { HttpClient } from '../net/index.js';
import type { AttemptOutcome, ClaimedDelivery, Store, WebhookRecord } from '../store/index.js';
import { signatureHeader } from './signature.js';

/**
 * Sends the outbox. One replica at a time holds the `webhooks-dispatcher` lease and sends; the
 * others stay idle until it lapses (a replica that dies is replaced within LEASE_TTL_MS).
 *
 * Delivery is at least once. Claiming an attempt is one conditional UPDATE (see
 * WebhookStore.claimDue) that also hides the delivery until the attempt's deadline has surely
 * passed; recording the outcome is conditional on still owning that attempt. So a sender that
 * lost its lease mid-attempt cannot overwrite a newer attempt, and a delivery whose sender died
 * (kill -9) becomes due again and is sent again with the same id, which receivers dedupe on.
 */

export type AttemptResult = 'delivered' | 'retry' | 'failed';

/** Receives one call per finished attempt (metrics). */
export interface WebhookObserver {
  onWebhookAttempt(outcome: AttemptResult): void;
}

export interface DispatcherLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface DispatcherDeps {
  store: Store;
  /** The outbound client, with the webhook outbound guard plugged in. */
  http: HttpClient;
  clock: Clock;
  logger: DispatcherLogger;
  observer?: WebhookObserver;
  /** `webhooks.max_attempts`. */
  maxAttempts: number;
  /** `webhooks.timeout`: deadline of one attempt (connect, answer and body). */
  timeoutMs: number;
  /** `webhooks.retention`: finished deliveries older than this are pruned. */
  retentionMs: number;
  /** Deliveries in flight at once. Default 16. */
  concurrency?: number;
  /** Identifies this replica's dispatcher in the lease table. Default random. */
  holder?: string;
}

/** Waits after failed attempts 1..5; every later attempt waits the last one. */
export const RETRY_DELAYS_MS = [5_000, 30_000, 180_000, 900_000, 3_600_000] as const;

export const LEASE_NAME = 'webhooks-dispatcher';
/** Renewed every poll (1 s), so a leader that stops renewing is replaced within this. */
export const LEASE_TTL_MS = 10_000;
const POLL_MS = 1_000;
/** New rows are looked for this soon after an enqueue (the caller's commit lands meanwhile). */
const WAKE_DELAY_MS = 5;
/** An attempt in flight is presumed lost this long after its deadline (its sender died). */
const LOST_AFTER_MS = 5_000;
/** Bytes of a response read; a longer answer is a failed attempt and is never read whole. */
const RESPONSE_CAP_BYTES = 64 * 1024;
/** Characters of a non-2xx answer kept in `lastError` for whoever debugs the receiver. */
const EXCERPT_CHARS = 200;
const PRUNE_EVERY_MS = 60_000;
/** Free slots are refilled once this many sends finished… */
const REFILL_BATCH = 4;
/** …or at the latest this long after the last claim. */
const REFILL_AFTER_MS = 20;
const PRUNE_BATCH = 1_000;

export function retryDelayMs(attempt: number): number {
  return RETRY_DELAYS_MS[Math.min(attempt, RETRY_DELAYS_MS.length) - 1] as number;
}

/** A short, printable, single-line excerpt of an answer: never the whole body. */
function excerpt(body: Buffer): string {
  const text = body
    .subarray(0, EXCERPT_CHARS * 4)
    .toString('utf8')
    .replace(/[^\x20-\x7e]+/g, ' ')
    .trim();
  return text.length > EXCERPT_CHARS ? `${text.slice(0, EXCERPT_CHARS)}…` : text;
}

/** Deliveries of one run to one webhook go in enqueue order (run.gate_failed after run.finished). */
function inOrderGroups(batch: readonly ClaimedDelivery[]): ClaimedDelivery[][] {
  const groups = new Map<string, ClaimedDelivery[]>();
  for (const d of batch) {
    const key = d.runId === undefined ? d.id : `${d.webhookId}\u0000${d.runId}`;
    const group = groups.get(key);
    if (group === undefined) groups.set(key, [d]);
    else group.push(d);
  }
  return [...groups.values()];
}

export class WebhookDispatcher {
  private readonly concurrency: number;
  private readonly holder: string;
  private timer: NodeJS.Timeout | undefined;
  private wakeTimer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private leaseCheckedAt = Number.NEGATIVE_INFINITY;
  private leader = false;
  private prunedAt = Number.NEGATIVE_INFINITY;
  private exhaustedAt = Number.NEGATIVE_INFINITY;
  /** Resolves the current drain's wait so it looks for due rows again. */
  private nudge: () => void = () => {};
  private readonly shutdownSignal = new AbortController();
  /** Sends finished since the last claim. */
  private freed = 0;
  /** Deliveries in flight by webhook id. */
  private readonly perWebhook = new Map<string, number>();
  /** Successful attempts not yet recorded (see flushDelivered). */
  private readonly delivered: { id: string; attempt: number; status: number }[] = [];
  private flushing: Promise<void> = Promise.resolve();
  /**
   * `kick`, run in the context the dispatcher was built in. `wake()` is called from inside the
   * emitter's transaction, whose async context (the store's transaction guard) a timer would
   * otherwise carry into the dispatcher's own queries.
   */
  private readonly kickOutside = AsyncResource.bind(() => this.kick());

  constructor(private readonly deps: DispatcherDeps) {
    this.concurrency = deps.concurrency ?? 16;
    this.holder = deps.holder ?? `dispatcher-${randomBytes(6).toString('hex')}`;
    // Every attempt in flight listens for shutdown.
    setMaxListeners(this.concurrency * 2 + 10, this.shutdownSignal.signal);
  }

  /** Polls every second from now on. Returns at once. */
  start(): void {
    if (this.stopped || this.timer !== undefined) return;
    this.timer = setInterval(() => this.kick(), POLL_MS);
    this.timer.unref();
    this.kick();
  }

  /** New deliveries were written: look soon rather than at the next poll. */
  wake(): void {
    if (this.stopped || this.timer === undefined || this.wakeTimer !== undefined) return;
    this.wakeTimer = setTimeout(() => {
      this.wakeTimer = undefined;
      this.kickOutside();
    }, WAKE_DELAY_MS);
    this.wakeTimer.unref();
  }

  /**
   * One full pass: take or renew the lease, then send every due delivery (and prune when due).
   * Resolves when nothing due is left; tests drive the dispatcher with it and a FakeClock.
   */
  async tick(): Promise<void> {
    while (this.running !== undefined) await this.running;
    this.running = this.drain().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /**
   * Stops polling, interrupts attempts in flight (each is recorded as a failed attempt due again
   * at once, so another replica resends it) and gives the lease up. Safe twice and before start.
   */
  async shutdown(): Promise<void> {
    if (!this.stopped) {
      this.stopped = true;
      clearInterval(this.timer);
      clearTimeout(this.wakeTimer);
      this.shutdownSignal.abort(new Error('the dispatcher is shutting down'));
      this.nudge();
    }
    while (this.running !== undefined) await this.running.catch(() => {});
    if (this.leader) {
      this.leader = false;
      await this.deps.store.leases.release(LEASE_NAME, this.holder).catch(() => {});
    }
  }

  private kick(): void {
    if (this.stopped) return;
    if (this.running !== undefined) {
      this.again = true;
      this.nudge();
      return;
    }
    this.running = this.drain()
      .catch((err: unknown) => this.deps.logger.warn({ err }, 'webhook dispatch pass failed'))
      .finally(() => {
        this.running = undefined;
        if (this.again && !this.stopped) {
          this.again = false;
          this.kick();
        }
      });
  }

  /** Takes or renews the lease at most once a second. */
  private async holdLease(): Promise<boolean> {
    const now = this.deps.clock.now();
    if (now - this.leaseCheckedAt < POLL_MS && this.leader) return true;
    this.leaseCheckedAt = now;
    const was = this.leader;
    this.leader = await this.deps.store.leases.acquire(LEASE_NAME, this.holder, LEASE_TTL_MS);
    if (this.leader !== was) {
      this.deps.logger.info(
        { holder: this.holder },
        this.leader ? 'webhook dispatcher leads' : 'webhook dispatcher lease lost',
      );
    }
    return this.leader;
  }

  private async drain(): Promise<void> {
    if (this.stopped || !(await this.holdLease())) return;
    const inflight = new Set<Promise<void>>();
    let claimedAt = Number.NEGATIVE_INFINITY;
    while (!this.stopped) {
      const free = this.concurrency - inflight.size;
      // Refill in batches, so one claim (and one batched record of successes) serves several
      // sends, unless slots have waited a while: a few slow receivers never hold the rest up.
      const refill =
        free > 0 &&
        (inflight.size === 0 ||
          this.freed >= REFILL_BATCH ||
          performance.now() - claimedAt >= REFILL_AFTER_MS);
      let claimed: ClaimedDelivery[] = [];
      if (refill && (await this.holdLease())) {
        await this.flushDelivered();
        await this.housekeeping();
        claimedAt = performance.now();
        this.freed = 0;
        const now = this.deps.clock.now();
        claimed = await this.deps.store.webhooks.claimDue(
          now,
          free,
          this.deps.maxAttempts,
          now + this.deps.timeoutMs + LOST_AFTER_MS,
          // Half the slots at most per webhook: a receiver that hangs cannot stall the others.
          { max: Math.max(1, Math.ceil(this.concurrency / 2)), inFlight: this.perWebhook },
        );
        for (const d of claimed) {
          this.perWebhook.set(d.webhookId, (this.perWebhook.get(d.webhookId) ?? 0) + 1);
        }
        const hooks = await this.webhooksOf(claimed);
        for (const group of inOrderGroups(claimed)) {
          const sending: Promise<void> = this.sendInOrder(group, hooks).finally(() =>
            inflight.delete(sending),
          );
          inflight.add(sending);
        }
      }
      if (inflight.size === 0 && claimed.length === 0) break;
      if (!refill || claimed.length < free) {
        // Wait for a send to finish, a poll or wake-up, or the refill interval.
        let timer: NodeJS.Timeout | undefined;
        const nudged = new Promise<void>((resolve) => {
          this.nudge = resolve;
          timer = setTimeout(resolve, REFILL_AFTER_MS);
        });
        await Promise.race([...inflight, nudged]);
        clearTimeout(timer);
      }
    }
    await Promise.all(inflight);
    await this.flushDelivered();
  }

  /**
   * Fails deliveries whose last attempt was lost (once a second) and prunes old finished ones
   * (once a minute). Runs inside a pass too, which under steady load may never end.
   */
  private async housekeeping(): Promise<void> {
    const now = this.deps.clock.now();
    if (now - this.exhaustedAt >= POLL_MS) {
      this.exhaustedAt = now;
      const exhausted = await this.deps.store.webhooks.failExhausted(
        now,
        this.deps.maxAttempts,
        `gave up after ${this.deps.maxAttempts} attempts (the last one was interrupted)`,
      );
      for (let i = 0; i < exhausted; i++) this.deps.observer?.onWebhookAttempt('failed');
    }
    if (now - this.prunedAt < PRUNE_EVERY_MS) return;
    this.prunedAt = now;
    const before = now - this.deps.retentionMs;
    while ((await this.deps.store.webhooks.pruneFinished(before, PRUNE_BATCH)) === PRUNE_BATCH) {
      if (this.stopped) break;
    }
  }

  /** The webhooks of a batch, read now: a URL, secret or disabled flag changed meanwhile applies. */
  private async webhooksOf(batch: readonly ClaimedDelivery[]): Promise<Map<string, WebhookRecord>> {
    const hooks = await this.deps.store.webhooks.getByIds(batch.map((d) => d.webhookId));
    return new Map(hooks.map((h) => [h.id, h]));
  }

  private async sendInOrder(
    group: readonly ClaimedDelivery[],
    hooks: ReadonlyMap<string, WebhookRecord>,
  ): Promise<void> {
    for (const delivery of group) {
      try {
        await this.send(delivery, hooks.get(delivery.webhookId));
      } catch (err) {
        // The outcome could not be recorded (database trouble): the claim lapses and it is resent.
        this.deps.logger.warn({ err, delivery: delivery.id }, 'webhook attempt not recorded');
      } finally {
        this.freed++;
        const left = (this.perWebhook.get(delivery.webhookId) ?? 1) - 1;
        if (left > 0) this.perWebhook.set(delivery.webhookId, left);
        else this.perWebhook.delete(delivery.webhookId);
      }
    }
  }

  private async send(d: ClaimedDelivery, hook: WebhookRecord | undefined): Promise<void> {
    // A policy's own alert webhook: a URL without a webhook resource, sent unsigned.
    const url = d.targetUrl ?? hook?.url;
    if (url === undefined || (d.targetUrl === undefined && hook?.disabled === true)) {
      const why = hook === undefined ? 'the webhook was deleted' : 'the webhook is disabled';
      await this.finish(d, { state: 'FAILED', error: `${why} before delivery` }, 'failed');
      return;
    }
    let status: number | undefined;
    let error: string | undefined;
    try {
      const res = await this.deps.http.request({
        method: 'POST',
        url,
        headers: {
          'content-type': 'application/json',
          'touchstone-event': d.event,
          'touchstone-delivery': d.id,
          ...(d.targetUrl === undefined && hook !== undefined
            ? {
                'touchstone-signature': signatureHeader(
                  hook.secret,
                  d.payload,
                  this.deps.clock.now() / 1000,
                ),
              }
            : {}),
        },
        body: d.payload,
        timeoutMs: this.deps.timeoutMs,
        maxResponseBytes: RESPONSE_CAP_BYTES,
        signal: this.shutdownSignal.signal,
      });
      status = res.status;
      if (status < 200 || status >= 300) {
        const redirect = status >= 300 && status < 400 ? ' (redirects are not followed)' : '';
        const text = excerpt(res.body);
        error = `HTTP ${status}${redirect}${text === '' ? '' : `: ${text}`}`;
      }
    } catch (err) {
      if (this.shutdownSignal.signal.aborted) error = 'interrupted by shutdown';
      else if (isTouchstoneError(err)) error = `${err.code}: ${err.message}`;
      else {
        this.deps.logger.warn({ err, delivery: d.id }, 'webhook attempt failed unexpectedly');
        error = 'unexpected error (see the server log)';
      }
    }
    if (error === undefined) {
      this.delivered.push({ id: d.id, attempt: d.attempt, status: status as number });
      return;
    }
    const now = this.deps.clock.now();
    const last = d.attempt >= this.deps.maxAttempts;
    const outcome: AttemptOutcome = last
      ? { state: 'FAILED', error, ...(status === undefined ? {} : { status }) }
      : {
          state: 'RETRYING',
          error,
          nextAttemptAt: this.stopped ? now : now + retryDelayMs(d.attempt),
          ...(status === undefined ? {} : { status }),
        };
    // Neither the URL (its path or query may carry a token) nor the answer is logged.
    this.deps.logger.warn(
      {
        delivery: d.id,
        webhook: d.webhookName,
        project: d.project,
        event: d.event,
        attempt: d.attempt,
        // The answer's excerpt stays in the delivery record; the log gets the status only.
        error: status === undefined ? error : `HTTP ${status}`,
        next: last ? 'failed' : 'retry',
      },
      'webhook attempt failed',
    );
    await this.finish(d, outcome, last ? 'failed' : 'retry');
  }

  /**
   * Records buffered successes in one statement. Successes are the common case and need no
   * per-row decision, so batching them halves the database work per delivery; the cost is that a
   * crash can lose a few milliseconds of them, which are then sent again (at least once anyway).
   */
  private flushDelivered(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      const batch = this.delivered.splice(0);
      if (batch.length === 0) return;
      const recorded = await this.deps.store.webhooks
        .finishDelivered(batch, this.deps.clock.now())
        .catch((err: unknown) => {
          this.deps.logger.warn({ err, deliveries: batch.length }, 'webhook attempts not recorded');
          return [];
        });
      for (let i = 0; i < recorded.length; i++) this.deps.observer?.onWebhookAttempt('delivered');
    });
    return this.flushing;
  }

  private async finish(d: ClaimedDelivery, outcome: AttemptOutcome, result: AttemptResult) {
    const recorded = await this.deps.store.webhooks.finishAttempt(
      d.id,
      d.attempt,
      outcome,
      this.deps.clock.now(),
    );
    if (recorded) this.deps.observer?.onWebhookAttempt(result);
  }
}
