/** Storage port: the online scoring queue. The conventions are in ../ports.ts. */

/**
 * A unit of online scoring: one version (digest) of one completed trace. `policy` is empty for
 * the normal case (every policy of the project) and names one policy for a rescore.
 */
export interface NewWorkItem {
  project: string;
  traceId: string;
  digest: string;
  policy: string;
  /** Rescore: replace results stored for this (trace, policy, digest) instead of skipping. */
  replace: boolean;
  /** When the trace version was completed (freshness is measured from here). */
  traceCompletedAt: number;
  /**
   * The trace row's `first_seen_at` (the queue key's second column), when the caller knows it
   * (a trace stored complete on arrival); else `enqueue` reads it from the row.
   */
  traceFirstSeenAt?: number;
}

export interface WorkItem extends NewWorkItem {
  id: string;
  /** Claims so far, this one included. */
  attempts: number;
  /** Fencing token: only the holder of the latest claim can complete or postpone the item. */
  claim: string;
  createdAt: number;
}

export interface WorkQueue {
  /**
   * Queues items; an item with the same (project, trace, digest, policy) already queued is kept
   * as is. Returns how many were added.
   */
  enqueue(items: readonly NewWorkItem[], now: number): Promise<number>;
  /**
   * Claims up to `limit` items visible at `now`, oldest first, hiding them until `hideUntil`
   * (visibility timeout: an item whose worker died is claimed again after it). Each claim gets
   * the token `claim`. One statement (`FOR UPDATE SKIP LOCKED` on PostgreSQL), so two workers
   * never claim the same item at once.
   */
  claim(now: number, limit: number, hideUntil: number, claim: string): Promise<WorkItem[]>;
  /** Deletes the item if `claim` still holds it; false when another worker claimed it since. */
  complete(id: string, claim: string): Promise<boolean>;
  /**
   * Makes the item visible again at `visibleAt` (a rate-limited judge), if `claim` holds it. The
   * claim stays counted in `attempts`.
   */
  postpone(id: string, claim: string, visibleAt: number): Promise<boolean>;
  /**
   * The ids among `items` whose claim still holds. Inside a transaction the rows stay held until
   * it ends (PostgreSQL: `FOR UPDATE`; SQLite: the transaction holds the write lock), so a batch
   * can write the results of exactly these items and complete them.
   */
  holding(items: readonly { id: string; claim: string }[]): Promise<Set<string>>;
  /** Deletes each item its claim still holds; returns the ids deleted. */
  completeAll(items: readonly { id: string; claim: string }[]): Promise<Set<string>>;
  /** Queued items, and when the oldest was queued. */
  stats(): Promise<{ depth: number; oldestCreatedAt?: number }>;
}
