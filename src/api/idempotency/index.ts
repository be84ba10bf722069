/**
 * Idempotency-Key handling for retryable writes, REST and RPC alike: the key's scope (principal,
 * operation, key) and request digest, the atomic reservation, stored outcomes (HTTP statuses and
 * bodies) replayed for 24 hours, the per-scope limits (1024 keys, 64 MiB) and their eviction,
 * uncertain outcomes, the limits of keyed write streams, the expiry sweep, and the Fastify hook
 * that applies it to marked routes (hook.ts). An edge concern: domain areas never see a key.
 */
export { IdempotencyErrors } from './error-codes.js';
export { type IdempotentRoute, idempotentRoutes, installIdempotency } from './hook.js';
export {
  IDEMPOTENCY_DEFAULTS,
  type IdempotencyOptions,
  KEYED_STREAM_LIMITS,
  MIB,
  type StreamLimits,
} from './limits.js';
export {
  ERROR_OUTCOME_STATUS,
  errorFromOutcome,
  errorOutcome,
  isOutcomeUnknown,
  isStoredError,
  outcomeUncertain,
  secretNotReplayed,
  withhold,
} from './outcome.js';
export {
  EMPTY_SHA256,
  IDEMPOTENCY_HEADER,
  parseIdempotencyKey,
  REPLAYED_HEADER,
  requestDigest,
  sha256Hex,
} from './request.js';
export {
  type Begun,
  type ExecuteResult,
  HeldKey,
  type IdempotencyLogger,
  IdempotencyService,
  type IdempotencyServiceDeps,
} from './service.js';
export { type KeyedStream, readKeyedStream, unaryDigest } from './stream.js';
