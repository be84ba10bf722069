/** Storage port: guard policies as applied. The conventions are in ../ports.ts. */
import type { Page, PageRequest } from './paging.js';
import type { PolicyRecord } from './policies.js';

/** A GuardPolicy as stored: the same bookkeeping as an online policy's. */
export type GuardPolicyRecord = PolicyRecord;

export interface GuardPolicyStore {
  /**
   * Creates the guard policy, or replaces the one with the same (project, name); the generation
   * moves only when the resource differs (key order aside).
   */
  upsert(
    project: string,
    name: string,
    resource: Record<string, unknown>,
    now: number,
  ): Promise<{ policy: GuardPolicyRecord; created: boolean }>;
  get(project: string, name: string): Promise<GuardPolicyRecord | undefined>;
  /** One project's guard policies by name. Throws INVALID_ARGUMENT for a malformed page token. */
  list(project: string, page: PageRequest): Promise<Page<GuardPolicyRecord>>;
  /** Returns false when there was none. */
  delete(project: string, name: string): Promise<boolean>;
}
