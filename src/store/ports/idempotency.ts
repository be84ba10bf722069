/** Storage port: idempotency-Key records of the API edge: what a replay answers. The conventions are in ../ports.ts. */

/** Where an Idempotency-Key applies: one caller, one operation, one key. */
export interface IdempotencyScope {
  /** The API key id, `<kind>:<subject>` for other identities, or `anonymous` without auth. */
  principal: string;
  /** A stable operation name (`runs.create`, `webhooks.apply`, …). */
  operation: string;
  /** The Idempotency-Key as sent. */
  key: string;
}

/**
 * `in_flight`: a request holds the key and runs; `completed`: its outcome is stored for replay;
 * `uncertain`: the request ended without anyone knowing whether its write happened.
 */
export type IdempotencyState = 'in_flight' | 'completed' | 'uncertain';

/** A stored outcome: what a replay answers. */
export interface IdempotencyOutcome {
  /** HTTP status; 0 marks a stored error (body: `{code, message, details}`) of a non-HTTP caller. */
  status: number;
  /** Only what a replay needs (`content-type`). */
  headers: Record<string, string>;
  body: Uint8Array;
  /** Top-level response fields left out of `body` because they are returned only once. */
  withheld?: string[];
}

/** A new in-flight reservation. Times are epoch ms. */
export interface IdempotencyReservation extends IdempotencyScope {
  /** Digest of the request (method, path, query, body): a changed payload has another. */
  digest: string;
  /** Fencing token: only its holder may complete, release or renew the reservation. */
  token: string;
  createdAt: number;
  expiresAt: number;
}

export interface IdempotencyRecord extends IdempotencyReservation {
  state: IdempotencyState;
  /** The holder's last sign of life (in flight); a holder that stops renewing it died. */
  heartbeatAt: number;
  /** Completed records only. */
  outcome?: IdempotencyOutcome;
}

/** Keys held by a (principal, operation) scope and the bytes of their stored outcomes. */
export interface IdempotencyUsage {
  keys: number;
  bytes: number;
}

export interface IdempotencyEviction {
  maxKeys: number;
  maxBytes: number;
  /** In-flight records renewed at or after this (epoch ms) are live and never evicted. */
  liveSince: number;
  /** A key never evicted (the one just completed). */
  keep?: string;
}

/**
 * Idempotency-Key records. Methods that read then write (`lockScope`, `get`, `insert`,
 * `evict`) are meant to run in one transaction; the conditional updates are single statements
 * fenced by the reservation's token.
 */
export interface IdempotencyStore {
  /**
   * Serializes writers of one (principal, operation) scope until the transaction ends (an
   * advisory lock on PostgreSQL; SQLite transactions are serialized already), so eviction and
   * reservation under concurrency see each other. Call inside `withTransaction`.
   */
  lockScope(principal: string, operation: string): Promise<void>;
  get(scope: IdempotencyScope): Promise<IdempotencyRecord | undefined>;
  /** Inserts an in-flight record. Throws ALREADY_EXISTS when the key is taken. */
  insert(reservation: IdempotencyReservation): Promise<void>;
  /**
   * Stores the outcome and its new expiry if `token` still holds the in-flight record; false
   * (nothing written) when it was taken over, evicted or expired meanwhile.
   */
  complete(
    scope: IdempotencyScope,
    token: string,
    outcome: IdempotencyOutcome,
    expiresAt: number,
  ): Promise<boolean>;
  /** In flight under `token` → uncertain. */
  markUncertain(scope: IdempotencyScope, token: string): Promise<boolean>;
  /** In flight or uncertain under `fromToken` → in flight under `toToken`, renewed at `now`. */
  takeOver(
    scope: IdempotencyScope,
    fromToken: string,
    toToken: string,
    now: number,
  ): Promise<boolean>;
  heartbeat(scope: IdempotencyScope, token: string, now: number): Promise<boolean>;
  /** Deletes the in-flight record held by `token` (a retry may then run the request again). */
  release(scope: IdempotencyScope, token: string): Promise<boolean>;
  /** Deletes the record whatever its state (an expired one). */
  delete(scope: IdempotencyScope): Promise<boolean>;
  usage(principal: string, operation: string): Promise<IdempotencyUsage>;
  /**
   * Deletes a scope's oldest records (by creation) until it holds at most `maxKeys` keys and
   * `maxBytes` of outcomes, skipping live in-flight records and `keep`. Returns what remains.
   */
  evict(
    principal: string,
    operation: string,
    limits: IdempotencyEviction,
  ): Promise<IdempotencyUsage & { evicted: number }>;
  /** Deletes up to `limit` records expired at `now`, oldest expiry first; returns how many. */
  deleteExpired(now: number, limit: number): Promise<number>;
}
