import { randomBytes } from 'node:crypto';
import {
  BackgroundLoop,
  type Clock,
  CoreErrors,
  isError,
  isTouchstoneError,
  type TouchstoneError,
} from '../../core/index.js';
import type {
  IdempotencyOutcome,
  IdempotencyRecord,
  IdempotencyScope,
  Store,
  StoreTransaction,
} from '../../store/index.js';
import { IdempotencyErrors } from './error-codes.js';
import { IDEMPOTENCY_DEFAULTS, type IdempotencyOptions } from './limits.js';
import {
  ERROR_OUTCOME_STATUS,
  errorFromOutcome,
  errorOutcome,
  isOutcomeUnknown,
  isStoredError,
  jsonOutcome,
  outcomeUncertain,
  secretNotReplayed,
} from './outcome.js';

export interface IdempotencyLogger {
  warn(obj: object, msg: string): void;
}

export interface IdempotencyServiceDeps {
  store: Store;
  clock: Clock;
  logger?: IdempotencyLogger;
  options?: Partial<IdempotencyOptions>;
}

/** What `begin` decided: replay a stored outcome, or run the request under a held key. */
export type Begun =
  | { kind: 'replay'; outcome: IdempotencyOutcome }
  | { kind: 'run'; held: HeldKey };

/** What the reservation transaction decided; errors are thrown once it has committed. */
type Decision =
  | { kind: 'replay'; outcome: IdempotencyOutcome }
  | { kind: 'run'; token: string }
  | { kind: 'reused' }
  | { kind: 'in_flight' }
  | { kind: 'stale' }
  | { kind: 'full' };

export interface ExecuteResult {
  status: number;
  body: unknown;
  /** True when this is the stored outcome of an earlier request with the same key. */
  replayed: boolean;
}

function newToken(): string {
  return randomBytes(12).toString('hex');
}

/**
 * A key this process holds while its request runs. The reservation is renewed every
 * `heartbeatMs` until it is settled once: completed (stored for replay), marked uncertain, or
 * released (a retry runs the request again).
 */
export class HeldKey {
  private timer: NodeJS.Timeout | undefined;
  private settled = false;

  constructor(
    private readonly service: IdempotencyService,
    readonly scope: IdempotencyScope,
    readonly token: string,
  ) {
    this.timer = setInterval(() => {
      // A missed renewal only uses up part of the stale bound; the next one may succeed.
      service.renew(this).catch(() => undefined);
    }, service.options.heartbeatMs);
    this.timer.unref();
  }

  private settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    clearInterval(this.timer);
    this.timer = undefined;
    return true;
  }

  /**
   * Stores the outcome for replay (evicting the scope's oldest outcomes past its byte budget).
   * False when the reservation was lost meanwhile (taken over after it went stale, or evicted),
   * or the store failed: the caller still answers with the outcome it has.
   */
  async complete(outcome: IdempotencyOutcome): Promise<boolean> {
    if (!this.settle()) return false;
    try {
      return await this.service.store(this, outcome);
    } catch (err) {
      this.service.warn(err, 'could not store the outcome of a keyed request');
      return false;
    }
  }

  /** Marks the outcome unknown; best effort (a store that fails now leaves it to go stale). */
  async uncertain(): Promise<void> {
    if (!this.settle()) return;
    await this.service
      .markUncertain(this)
      .catch((err) => this.service.warn(err, 'could not mark a keyed request uncertain'));
  }

  /** Gives the key up so a retry runs the request again; best effort, like `uncertain`. */
  async release(): Promise<void> {
    if (!this.settle()) return;
    await this.service
      .release(this)
      .catch((err) => this.service.warn(err, 'could not release an idempotency key'));
  }
}

/**
 * Idempotency-Key handling for every retryable write, REST and RPC alike: reserve the key
 * atomically, run the operation once, store its outcome, replay it for the same caller,
 * operation and key for 24 hours. See docs/idempotency.md for the rules.
 */
export class IdempotencyService {
  readonly options: Readonly<IdempotencyOptions>;
  private readonly sweeper: BackgroundLoop;

  constructor(private readonly deps: IdempotencyServiceDeps) {
    this.options = Object.freeze({ ...IDEMPOTENCY_DEFAULTS, ...deps.options });
    this.sweeper = new BackgroundLoop(
      () => this.sweep(),
      this.options.sweepIntervalMs,
      (err) => this.warn(err, 'idempotency sweep failed'),
    );
  }

  /** Starts the hourly-or-faster sweep of expired records. */
  start(): void {
    this.sweeper.start();
  }

  /** Stops the sweep; safe twice and before `start()`. */
  async shutdown(): Promise<void> {
    await this.sweeper.stop();
  }

  /**
   * Reserves the key for this request, or answers from the record already there. Throws
   * IDEMPOTENCY_KEY_REUSED (another digest), IDEMPOTENCY_REQUEST_IN_FLIGHT (its holder runs),
   * IDEMPOTENCY_OUTCOME_UNCERTAIN (its holder stopped without an outcome; the record becomes
   * uncertain, and the next retry runs the request again), IDEMPOTENCY_SCOPE_FULL.
   */
  async begin(scope: IdempotencyScope, digest: string): Promise<Begun> {
    const decision = await this.decide(scope, digest);
    switch (decision.kind) {
      case 'replay':
        return decision;
      case 'run':
        return { kind: 'run', held: new HeldKey(this, scope, decision.token) };
      case 'reused':
        throw IdempotencyErrors.IDEMPOTENCY_KEY_REUSED(
          `this Idempotency-Key was already used for ${scope.operation} with a different request (method, path, query or body); use a new key for a new request`,
        );
      case 'in_flight':
        throw IdempotencyErrors.IDEMPOTENCY_REQUEST_IN_FLIGHT(
          `a request with this Idempotency-Key is still running; retry to get its outcome`,
          { retryAfterSeconds: 1 },
        );
      case 'stale':
        throw outcomeUncertain('the server that was running it stopped before it finished');
      case 'full':
        throw IdempotencyErrors.IDEMPOTENCY_SCOPE_FULL(
          `${this.options.maxKeysPerScope} keyed ${scope.operation} requests of this caller are running at once; retry later`,
          { retryAfterSeconds: 1 },
        );
    }
  }

  private async decide(scope: IdempotencyScope, digest: string): Promise<Decision> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.deps.store.withTransaction((tx) => this.decideIn(tx, scope, digest));
      } catch (err) {
        // The scope lock makes a lost insert race impossible on PostgreSQL and SQLite alike;
        // should one happen anyway, the next round reads the winner's record.
        if (attempt === 0 && isError(err, CoreErrors.ALREADY_EXISTS)) continue;
        throw err;
      }
    }
  }

  private async decideIn(
    tx: StoreTransaction,
    scope: IdempotencyScope,
    digest: string,
  ): Promise<Decision> {
    const repo = tx.idempotency;
    const now = this.deps.clock.now();
    await repo.lockScope(scope.principal, scope.operation);
    let record: IdempotencyRecord | undefined = await repo.get(scope);
    if (record !== undefined && record.expiresAt <= now) {
      await repo.delete(scope);
      record = undefined;
    }
    if (record !== undefined) {
      if (record.digest !== digest) return { kind: 'reused' };
      if (record.state === 'completed' && record.outcome !== undefined) {
        return { kind: 'replay', outcome: record.outcome };
      }
      if (record.state === 'in_flight') {
        if (record.heartbeatAt > now - this.options.staleAfterMs) return { kind: 'in_flight' };
        await repo.markUncertain(scope, record.token);
        return { kind: 'stale' };
      }
      // Uncertain: the caller was told to reconcile and retry with this key; this is that retry.
      const token = newToken();
      await repo.takeOver(scope, record.token, token, now);
      return { kind: 'run', token };
    }
    const usage = await repo.evict(scope.principal, scope.operation, {
      maxKeys: this.options.maxKeysPerScope - 1,
      maxBytes: this.options.maxBytesPerScope,
      liveSince: now - this.options.staleAfterMs,
    });
    if (usage.keys >= this.options.maxKeysPerScope) return { kind: 'full' };
    const token = newToken();
    await repo.insert({
      ...scope,
      digest,
      token,
      createdAt: now,
      expiresAt: now + this.options.ttlMs,
    });
    return { kind: 'run', token };
  }

  /** @internal HeldKey's renewal. */
  async renew(held: HeldKey): Promise<void> {
    await this.deps.store.idempotency.heartbeat(held.scope, held.token, this.deps.clock.now());
  }

  /** @internal HeldKey's completion: the outcome and the byte-budget eviction in one transaction. */
  async store(held: HeldKey, outcome: IdempotencyOutcome): Promise<boolean> {
    const { scope, token } = held;
    return this.deps.store.withTransaction(async (tx) => {
      const now = this.deps.clock.now();
      await tx.idempotency.lockScope(scope.principal, scope.operation);
      const stored = await tx.idempotency.complete(scope, token, outcome, now + this.options.ttlMs);
      if (!stored) return false;
      await tx.idempotency.evict(scope.principal, scope.operation, {
        maxKeys: this.options.maxKeysPerScope,
        maxBytes: this.options.maxBytesPerScope,
        liveSince: now - this.options.staleAfterMs,
        keep: scope.key,
      });
      return true;
    });
  }

  /** @internal */
  async markUncertain(held: HeldKey): Promise<void> {
    await this.deps.store.idempotency.markUncertain(held.scope, held.token);
  }

  /** @internal */
  async release(held: HeldKey): Promise<void> {
    await this.deps.store.idempotency.release(held.scope, held.token);
  }

  /** @internal */
  warn(err: unknown, msg: string): void {
    this.deps.logger?.warn(
      {
        code: isTouchstoneError(err) ? err.code : undefined,
        err: isTouchstoneError(err) ? undefined : err,
      },
      msg,
    );
  }

  /**
   * Runs `fn` at most once per (principal, operation, key) and request digest, for callers
   * without an HTTP response to store (RPC handlers): the result's JSON is stored and replayed
   * (`replayed: true`). A TouchstoneError that is the request's own answer (invalid argument, not
   * found, …) is stored and thrown again on replay; a retryable or internal failure releases the
   * key; a database failure after the write was sent answers IDEMPOTENCY_OUTCOME_UNCERTAIN.
   * Results over 64 MiB are refused with IDEMPOTENCY_RESPONSE_TOO_LARGE (stored as the outcome).
   */
  async execute(
    scope: IdempotencyScope,
    requestDigest: string,
    fn: () => Promise<{ status: number; body: unknown }>,
  ): Promise<ExecuteResult> {
    const begun = await this.begin(scope, requestDigest);
    if (begun.kind === 'replay') return replay(begun.outcome);
    const held = begun.held;
    let result: { status: number; body: unknown };
    try {
      result = await fn();
    } catch (err) {
      throw await this.settleFailure(held, err);
    }
    if (result.status >= 500) {
      await held.release();
      return { ...result, replayed: false };
    }
    const outcome = jsonOutcome(result.status, result.body);
    if (outcome.body.byteLength > this.options.maxResponseBytes) {
      const err = this.responseTooLarge(outcome.body.byteLength);
      await held.complete(errorOutcome(err));
      throw err;
    }
    await held.complete(outcome);
    return { ...result, replayed: false };
  }

  /** Settles a held key after its operation threw, and returns what to throw. */
  async settleFailure(held: HeldKey, err: unknown): Promise<unknown> {
    if (isOutcomeUnknown(err)) {
      await held.uncertain();
      return outcomeUncertain('the database failed after the write was sent');
    }
    if (isStoredError(err)) {
      await held.complete(errorOutcome(err));
      return err;
    }
    await held.release();
    return err;
  }

  responseTooLarge(bytes: number): TouchstoneError {
    return IdempotencyErrors.IDEMPOTENCY_RESPONSE_TOO_LARGE(
      `the response is ${bytes} bytes; keyed requests are answered with at most ${this.options.maxResponseBytes} bytes, the most stored for replay`,
    );
  }

  /** Deletes expired records (the loop's pass); returns how many. */
  async sweep(): Promise<number> {
    let total = 0;
    for (;;) {
      const n = await this.deps.store.idempotency.deleteExpired(
        this.deps.clock.now(),
        this.options.sweepBatch,
      );
      total += n;
      if (n < this.options.sweepBatch || this.sweeper.stopped) return total;
    }
  }
}

function replay(outcome: IdempotencyOutcome): ExecuteResult {
  if (outcome.status === ERROR_OUTCOME_STATUS) throw errorFromOutcome(outcome);
  if ((outcome.withheld ?? []).length > 0) throw secretNotReplayed(outcome);
  return {
    status: outcome.status,
    body: JSON.parse(Buffer.from(outcome.body).toString('utf8')),
    replayed: true,
  };
}
