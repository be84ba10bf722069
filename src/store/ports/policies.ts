/** Storage port: online evaluation policies as applied, and their judge-token budgets. The conventions are in ../ports.ts. */
import type { Page, PageRequest } from './paging.js';

/** An OnlineEvalPolicy as stored: the declarative resource as applied, with its bookkeeping. */
export interface PolicyRecord {
  project: string;
  name: string;
  /** The resource (`apiVersion`, `kind`, `metadata`, `spec`) as validated at apply. */
  resource: Record<string, unknown>;
  /** 1 on create, +1 on every apply that changes the resource; compiled forms cache by it. */
  generation: number;
  createdAt: string;
  updatedAt: string;
}

export interface PolicyStore {
  /**
   * Creates the policy, or replaces the one with the same (project, name); the generation moves
   * only when the resource differs from the stored one (key order aside: the resource is stored
   * with its keys sorted). Applying an unchanged resource changes nothing, `updatedAt` included.
   */
  upsert(
    project: string,
    name: string,
    resource: Record<string, unknown>,
    now: number,
  ): Promise<{ policy: PolicyRecord; created: boolean }>;
  get(project: string, name: string): Promise<PolicyRecord | undefined>;
  /** One project's policies by name. Throws INVALID_ARGUMENT for a malformed page token. */
  list(project: string, page: PageRequest): Promise<Page<PolicyRecord>>;
  /** Every policy of a project (what the engine runs), by name. */
  listAll(project: string): Promise<PolicyRecord[]>;
  /** Every policy's (project, name, generation): the engine's cheap check that its cache is current. */
  versions(): Promise<{ project: string; name: string; generation: number }[]>;
  /**
   * Which of these projects have at least one policy. Completion queues a trace for online
   * scoring only in those: policy changes apply to traces completed after them.
   */
  projectsWithPolicies(projects: readonly string[]): Promise<Set<string>>;
  /** Returns false when there was none. Stored results, windows and alert states stay. */
  delete(project: string, name: string): Promise<boolean>;
}

/** Judge tokens spent per policy and UTC day (the optional daily budget). */
export interface JudgeBudgetStore {
  add(project: string, policy: string, day: string, tokens: number): Promise<void>;
  used(project: string, policy: string, day: string): Promise<number>;
}
