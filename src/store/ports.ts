/**
 * Storage interfaces in domain terms. Domain areas depend on these, never on Kysely or a driver:
 * the same contract suite (store.int.test.ts) runs every implementation on SQLite and PostgreSQL.
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

export const API_KEY_ROLES = ['viewer', 'ingest', 'editor', 'admin', 'owner'] as const;
export type Role = (typeof API_KEY_ROLES)[number];

export type StoreDialect = 'sqlite' | 'postgres';

/** An API key as stored, without its secret. */
export interface ApiKeyRecord {
  /** `key_…` */
  id: string;
  project: string;
  name: string;
  roles: Role[];
  labels: Record<string, string>;
  /** The first characters of the secret, for display (`tsk_AbCd`). */
  prefix: string;
  createdAt: string;
  lastUsedAt?: string;
  revokedAt?: string;
  expiresAt?: string;
}

export interface NewApiKey extends ApiKeyRecord {
  /** Hash of the secret (the secret itself is never stored). Unique across all keys. */
  secretHash: string;
}

export interface PageRequest {
  /** 1..1000; larger values are clamped to 1000. */
  pageSize: number;
  /** Opaque token from a previous page's `nextPageToken`. */
  pageToken?: string;
}

export interface Page<T> {
  items: T[];
  /** Present when more items may follow. */
  nextPageToken?: string;
}

export interface ApiKeyStore {
  /** Stores a new key. Throws ALREADY_EXISTS when the id or the secret hash is taken. */
  create(key: NewApiKey): Promise<ApiKeyRecord>;
  /** The key with this secret hash, revoked and expired ones included (the caller refuses them). */
  getBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined>;
  get(id: string): Promise<ApiKeyRecord | undefined>;
  /**
   * Keys of one project (all projects when `project` is undefined), oldest first, revoked ones
   * included. Throws INVALID_ARGUMENT for a malformed page token.
   */
  list(project: string | undefined, page: PageRequest): Promise<Page<ApiKeyRecord>>;
  /**
   * Marks the key revoked at `at`. Returns false when no key has this id. Revoking twice keeps
   * the first revocation time and returns true.
   */
  revoke(id: string, at: string): Promise<boolean>;
  /**
   * Records a use at `at`. Only moves `lastUsedAt` forward and does nothing for unknown ids; one
   * small UPDATE, so callers may coalesce calls (auth writes at most once a minute per key).
   */
  touch(id: string, at: string): Promise<void>;
}

export interface Lease {
  holder: string;
  /** When the lease lapses unless renewed. May be in the past: an expired lease is free. */
  expiresAt: string;
  /** When the current holder took it (renewals keep it). */
  acquiredAt: string;
}

/**
 * Named leases decide who does singleton work across replicas (a trace source's pull, the webhook
 * dispatcher). Holders are unique per process and task, e.g. `<replica id>/source/<name>`.
 */
export interface LeaseStore {
  /**
   * Takes or renews the lease for `ttlMs` from now, in one conditional statement: succeeds when
   * the lease is free, expired, or already held by `holder`. Returns false while another holder's
   * lease is unexpired.
   */
  acquire(name: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease up if `holder` holds it; otherwise does nothing. */
  release(name: string, holder: string): Promise<void>;
  /** The lease row as stored (possibly expired), or undefined when nobody has taken it. */
  get(name: string): Promise<Lease | undefined>;
}

/**
 * The repositories, each bound to either the store or one transaction. Later areas add theirs
 * here (traces, work items, outbox, …) so one transaction can write all of them.
 */
export interface Repositories {
  readonly dialect: StoreDialect;
  readonly keys: ApiKeyStore;
  readonly leases: LeaseStore;
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
