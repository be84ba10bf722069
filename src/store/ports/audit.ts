/**
 * The audit trail: one entry per write and per refusal (unauthenticated or permission denied),
 * naming who, what and the outcome; never a payload or a secret.
 */

export type AuditPrincipalKind = 'key' | 'oidc' | 'open' | 'anonymous';
export type AuditOutcome = 'ok' | 'denied' | 'failed';

export interface AuditEntry {
  /** `aud_…` */
  id: string;
  /** RFC 3339. */
  at: string;
  /** Key id, `<issuer>#<subject>`, `open`, or empty when the caller was not authenticated. */
  principal: string;
  principalKind: AuditPrincipalKind;
  /** The operation: method and route (`POST /v1alpha1/policies`, an RPC's path). */
  action: string;
  /** What it acted on: the request path, without the query. */
  resource: string;
  /** The project the request named, or the principal's own; absent when neither is known. */
  project?: string;
  outcome: AuditOutcome;
  /** HTTP status of the answer (200 for gRPC, whose status travels in trailers). */
  status: number;
  /** The stable error code of a refusal or failure. */
  code?: string;
  requestId: string;
}

export interface AuditFilter {
  project?: string;
  /** With `project`: also the entries that name no project (refusals of unknown callers). */
  orNoProject?: boolean;
  principal?: string;
  action?: string;
  outcome?: AuditOutcome;
  /** RFC 3339, inclusive. */
  since?: string;
  /** RFC 3339, exclusive. */
  until?: string;
}

export interface AuditStore {
  append(entries: readonly AuditEntry[]): Promise<void>;
  /** Newest first, keyset-paged. */
  list(
    filter: AuditFilter,
    page: { pageSize: number; pageToken?: string },
  ): Promise<{ items: AuditEntry[]; nextPageToken?: string }>;
  /** Deletes up to `limit` entries older than `before` (ms), oldest first; returns how many. */
  deleteBefore(before: number, limit: number): Promise<number>;
}
