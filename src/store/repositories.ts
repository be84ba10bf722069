import type { Kysely } from 'kysely';
import type { Clock } from '../core/index.js';
import { KyselyAlertStore } from './alerts.js';
import { KyselyApiKeyStore } from './api-keys.js';
import { KyselyAuditStore } from './audit.js';
import { KyselyGuardPolicyStore } from './guard-policies.js';
import { KyselyIdempotencyStore } from './idempotency.js';
import { KyselyJudgeBudgetStore } from './judge-budgets.js';
import { KyselyLeaseStore } from './leases.js';
import { KyselyPolicyStore } from './policies.js';
import type { Repositories, StoreDialect } from './ports.js';
import { KyselyResultStore } from './results.js';
import { KyselyRunStore } from './runs.js';
import type { Database } from './schema.js';
import { KyselySourceStore } from './sources.js';
import { KyselyTraceStore } from './traces.js';
import { KyselyWebhookStore } from './webhooks.js';
import { KyselyWorkQueue } from './work-queue.js';

export interface RepositoryContext {
  dialect: StoreDialect;
  clock: Clock;
}

/**
 * Builds every repository on one executor: the store's pool, or one transaction. A new area adds
 * its repository here and in `Repositories` (ports.ts), and it is then usable in transactions.
 */
export function createRepositories(db: Kysely<Database>, ctx: RepositoryContext): Repositories {
  return {
    dialect: ctx.dialect,
    keys: new KyselyApiKeyStore(db),
    audit: new KyselyAuditStore(db),
    leases: new KyselyLeaseStore(db, ctx.clock),
    traces: new KyselyTraceStore(db, ctx.dialect),
    webhooks: new KyselyWebhookStore(db),
    policies: new KyselyPolicyStore(db),
    guardPolicies: new KyselyGuardPolicyStore(db),
    work: new KyselyWorkQueue(db, ctx.dialect),
    results: new KyselyResultStore(db, ctx.dialect),
    alerts: new KyselyAlertStore(db, ctx.dialect),
    budgets: new KyselyJudgeBudgetStore(db),
    sources: new KyselySourceStore(db, ctx.dialect),
    runs: new KyselyRunStore(db, ctx.dialect),
    idempotency: new KyselyIdempotencyStore(db, ctx.dialect),
  };
}
