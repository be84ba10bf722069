/**
 * Storage interfaces in domain terms, one file per area under ports/; this file gathers them so
 * the store's files import one module. Domain areas depend on these, never on Kysely or a driver:
 * the same contract suite (store.int.test.ts) runs every implementation on SQLite and PostgreSQL.
 * The words of an area's states (a run's status, a source's phase, a delivery's state) belong to
 * the area (its states.ts); a port imports them from there.
 *
 * Conventions every port follows:
 * - Times cross the port as RFC 3339 strings in UTC with milliseconds (`Date#toISOString()`).
 * - "Now" comes from the injected Clock (passed to `openStore`) or from an explicit argument,
 *   never from the database, so tests drive time with a FakeClock.
 * - Absent optional values are omitted from returned objects, never set to `undefined`/`null`.
 * - Failures are TouchstoneErrors: `STORE_UNAVAILABLE` (retryable) when the database cannot be
 *   reached, `STORE_CONFLICT` (retryable) on a deadlock or serialization failure, and
 *   `ALREADY_EXISTS` when a unique key is taken.
 */

export * from './ports/alerts.js';
export * from './ports/audit.js';
export * from './ports/guard-policies.js';
export * from './ports/idempotency.js';
export * from './ports/keys.js';
export * from './ports/leases.js';
export * from './ports/paging.js';
export * from './ports/policies.js';
export type * from './ports/resources.js';
export * from './ports/runs.js';
export * from './ports/scores.js';
export * from './ports/sources.js';
export * from './ports/store.js';
export * from './ports/traces.js';
export * from './ports/webhooks.js';
export * from './ports/work-queue.js';
