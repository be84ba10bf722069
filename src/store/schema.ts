/**
 * Kysely table types: the database as the query code sees it after every migration. Private to
 * store/ (ports.ts is the public shape).
 *
 * Column conventions, the same on both dialects so one query text serves both:
 * - times are `bigint` epoch milliseconds (`*_at`): comparisons with the injected clock's `now`
 *   are plain integer comparisons, with no time zone or text-format pitfalls; pg's int8 parser is
 *   set to return numbers.
 * - lists and maps (labels, roles) are JSON text.
 */

export interface SchemaMigrationsTable {
  version: number;
  name: string;
  applied_at: number;
}

export interface ApiKeysTable {
  id: string;
  project: string;
  name: string;
  /** JSON array of roles. */
  roles: string;
  /** JSON object of label → value. */
  labels: string;
  prefix: string;
  secret_hash: string;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
  expires_at: number | null;
}

export interface LeasesTable {
  name: string;
  holder: string;
  expires_at: number;
  acquired_at: number;
}

export interface Database {
  schema_migrations: SchemaMigrationsTable;
  api_keys: ApiKeysTable;
  leases: LeasesTable;
}
