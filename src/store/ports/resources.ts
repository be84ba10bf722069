/** A declarative resource's row as every resource table keys it: by name within a project. */
export interface NamedRecord {
  project: string;
  name: string;
}

/**
 * What the resource kit needs of a resource's table: one by name, a project's by name (paged),
 * and delete. Each resource's store adds its own writes (an upsert's shape is the resource's).
 * The page types are ports.ts's `PageRequest` and `Page` written out: ports.ts re-exports this
 * file, and an import back would be a cycle.
 */
export interface ResourceRows<R extends NamedRecord> {
  get(project: string, name: string): Promise<R | undefined>;
  /** By name. Throws INVALID_ARGUMENT for a malformed page token. */
  list(
    project: string,
    page: { pageSize: number; pageToken?: string },
  ): Promise<{ items: R[]; nextPageToken?: string }>;
  /** Returns false when there was none. */
  delete(project: string, name: string): Promise<boolean>;
}
