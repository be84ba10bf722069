/**
 * The limits of the spec ("Limits": Idempotency) and the timing of reservations. Tests build the
 * service with smaller values; the server uses these.
 */
export interface IdempotencyOptions {
  /** How long a stored outcome is replayed, from when it was stored: 24 h. */
  ttlMs: number;
  /** Keys one (principal, operation) scope holds; the oldest is evicted first. */
  maxKeysPerScope: number;
  /** Bytes of stored responses one scope holds; the oldest are evicted first. */
  maxBytesPerScope: number;
  /** The largest response stored for replay (a larger one is refused). */
  maxResponseBytes: number;
  /** A running request renews its reservation this often. */
  heartbeatMs: number;
  /**
   * A reservation not renewed for this long belongs to a server that stopped: its outcome is
   * uncertain. Several heartbeats long, so a slow database or a long GC pause does not declare a
   * live request dead.
   */
  staleAfterMs: number;
  /** How often expired records are deleted, and how many per statement. */
  sweepIntervalMs: number;
  sweepBatch: number;
}

export const MIB = 1024 * 1024;

export const IDEMPOTENCY_DEFAULTS: Readonly<IdempotencyOptions> = Object.freeze({
  ttlMs: 24 * 60 * 60 * 1000,
  maxKeysPerScope: 1024,
  maxBytesPerScope: 64 * MIB,
  maxResponseBytes: 64 * MIB,
  heartbeatMs: 15_000,
  staleAfterMs: 120_000,
  sweepIntervalMs: 10 * 60 * 1000,
  sweepBatch: 1000,
});

/** Keyed write streams (RPC client streams): bytes and messages, the config message included. */
export interface StreamLimits {
  maxBytes: number;
  maxMessages: number;
}

export const KEYED_STREAM_LIMITS: Readonly<StreamLimits> = Object.freeze({
  maxBytes: 64 * MIB,
  maxMessages: 100_001,
});
