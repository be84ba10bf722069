import { AsyncLocalStorage } from 'node:async_hooks';
import {
  type Kysely,
  type KyselyPlugin,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  sql,
  type UnknownRow,
} from 'kysely';
import type { Clock } from '../core/index.js';
import type { StoreBackend } from './backend.js';
import { StoreErrors } from './error-codes.js';
import { type Migration, migrationsApplied } from './migrate.js';
import type {
  AlertStore,
  ApiKeyStore,
  AuditStore,
  GuardPolicyStore,
  IdempotencyStore,
  JudgeBudgetStore,
  LeaseStore,
  PolicyStore,
  ResultStore,
  RunStore,
  SourceStore,
  Store,
  StoreDialect,
  StoreTransaction,
  TraceStore,
  WebhookStore,
  WorkQueue,
} from './ports.js';
import { createRepositories } from './repositories.js';
import type { Database } from './schema.js';

interface TransactionScope {
  store: KyselyStore;
  active: boolean;
}

/** Marks the async context of a `withTransaction` callback. */
const transactionScope = new AsyncLocalStorage<TransactionScope>();

/**
 * Runs before every query issued through the store itself (not through a transaction). Inside a
 * transaction callback such a query would run outside the transaction, and on SQLite (one
 * connection) it would wait forever for the connection the transaction holds.
 */
class GuardPlugin implements KyselyPlugin {
  constructor(private readonly check: () => void) {}

  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    this.check();
    return args.node;
  }

  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return args.result;
  }
}

export interface KyselyStoreOptions {
  clock: Clock;
  migrations: readonly Migration[];
}

/** The Store on either dialect: repositories over Kysely plus lifecycle and transactions. */
export class KyselyStore implements Store {
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
  private readonly guarded: Kysely<Database>;
  private closing: Promise<void> | undefined;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly backend: StoreBackend,
    private readonly options: KyselyStoreOptions,
  ) {
    this.dialect = backend.dialect;
    this.guarded = db.withPlugin(new GuardPlugin(() => this.checkUsable()));
    const repositories = createRepositories(this.guarded, {
      dialect: this.dialect,
      clock: options.clock,
    });
    this.keys = repositories.keys;
    this.leases = repositories.leases;
    this.traces = repositories.traces;
    this.webhooks = repositories.webhooks;
    this.policies = repositories.policies;
    this.guardPolicies = repositories.guardPolicies;
    this.work = repositories.work;
    this.results = repositories.results;
    this.alerts = repositories.alerts;
    this.budgets = repositories.budgets;
    this.sources = repositories.sources;
    this.runs = repositories.runs;
    this.idempotency = repositories.idempotency;
    this.audit = repositories.audit;
  }

  private checkUsable(): void {
    if (this.closing !== undefined) throw StoreErrors.STORE_CLOSED('the store is closed');
    const scope = transactionScope.getStore();
    if (scope?.active === true && scope.store === this) {
      throw StoreErrors.STORE_TRANSACTION_MISUSE(
        'the store was used inside withTransaction; use the transaction passed to the callback',
      );
    }
  }

  async ping(): Promise<void> {
    await sql`select 1`.execute(this.guarded);
  }

  migrationsApplied(): Promise<boolean> {
    return migrationsApplied(this.guarded, this.backend, this.options.migrations);
  }

  async withTransaction<T>(fn: (tx: StoreTransaction) => Promise<T>): Promise<T> {
    this.checkUsable();
    const scope: TransactionScope = { store: this, active: true };
    try {
      return await this.db
        .transaction()
        .execute((trx) =>
          transactionScope.run(scope, () =>
            fn(createRepositories(trx, { dialect: this.dialect, clock: this.options.clock })),
          ),
        );
    } finally {
      // Work the callback left running must not be refused once the transaction is over.
      scope.active = false;
    }
  }

  close(): Promise<void> {
    this.closing ??= this.db.destroy();
    return this.closing;
  }
}
