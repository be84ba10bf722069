import type { Kysely } from 'kysely';
import type { Clock } from '../core/index.js';
import { KyselyApiKeyStore } from './api-keys.js';
import { KyselyLeaseStore } from './leases.js';
import type { Repositories, StoreDialect } from './ports.js';
import type { Database } from './schema.js';
import { KyselyTraceStore } from './traces.js';
import { KyselyWebhookStore } from './webhooks.js';

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
    leases: new KyselyLeaseStore(db, ctx.clock),
    traces: new KyselyTraceStore(db, ctx.dialect),
    webhooks: new KyselyWebhookStore(db),
  };
}
