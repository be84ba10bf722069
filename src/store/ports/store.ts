/**
 * Storage port: the repositories together, and the store that opens transactions over them. The
 * conventions are in ../ports.ts.
 */
import type { AlertStore } from './alerts.js';
import type { AuditStore } from './audit.js';
import type { GuardPolicyStore } from './guard-policies.js';
import type { IdempotencyStore } from './idempotency.js';
import type { ApiKeyStore } from './keys.js';
import type { LeaseStore } from './leases.js';
import type { JudgeBudgetStore, PolicyStore } from './policies.js';
import type { RunStore } from './runs.js';
import type { ResultStore } from './scores.js';
import type { SourceStore } from './sources.js';
import type { TraceStore } from './traces.js';
import type { WebhookStore } from './webhooks.js';
import type { WorkQueue } from './work-queue.js';

export type StoreDialect = 'sqlite' | 'postgres';

/**
 * The repositories, each bound to either the store or one transaction. Later areas add theirs
 * here (traces, work items, outbox, …) so one transaction can write all of them.
 */
export interface Repositories {
  readonly dialect: StoreDialect;
  readonly keys: ApiKeyStore;
  readonly leases: LeaseStore;
  readonly traces: TraceStore;
  readonly webhooks: WebhookStore;
  readonly policies: PolicyStore;
  readonly guardPolicies: GuardPolicyStore;
  readonly work: WorkQueue;
  readonly results: ResultStore;
  readonly alerts: AlertStore;
  readonly budgets: JudgeBudgetStore;
  readonly sources: SourceStore;
  readonly runs: RunStore;
  readonly idempotency: IdempotencyStore;
  readonly audit: AuditStore;
}

/** Repositories bound to one open transaction: every call runs inside it. */
export type StoreTransaction = Repositories;

export interface Store extends Repositories {
  /** Throws STORE_UNAVAILABLE when the database does not answer. */
  ping(): Promise<void>;
  /** True when every migration this build knows is recorded as applied. */
  migrationsApplied(): Promise<boolean>;
  /**
   * Runs `fn` in one database transaction: it commits when `fn` resolves and rolls back when it
   * throws (the error is rethrown). Inside `fn`, use only `tx`: using this store (or starting
   * another transaction) there throws STORE_TRANSACTION_MISUSE instead of deadlocking. Keep
   * transactions short and free of outbound calls; on SQLite they serialize every writer.
   */
  withTransaction<T>(fn: (tx: StoreTransaction) => Promise<T>): Promise<T>;
  /** Closes connections. Safe to call twice; later calls to the store throw STORE_CLOSED. */
  close(): Promise<void>;
}
