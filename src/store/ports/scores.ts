/** Storage port: results of online scoring and human annotations, and their aggregates. The conventions are in ../ports.ts. */

import type { Result } from '../../core/index.js';
import type { Page, PageRequest } from './paging.js';
import type { StoredTrace } from './traces.js';

/** One policy's results for one trace version, stored together. */
export interface PolicyResults {
  project: string;
  traceId: string;
  policy: string;
  digest: string;
  results: readonly Result[];
  scoredAt: number;
}

/** A person's annotation of a trace: one result in the `@human` group, theirs under its name. */
export interface AnnotationResult {
  project: string;
  traceId: string;
  /** The result, its `evaluator` the annotation's name and `annotator` set. */
  result: Result & { annotator: NonNullable<Result['annotator']> };
  annotatedAt: number;
}

export interface ScoreFilter {
  project?: string;
  service?: string;
  /** Restricts to these services (a key's grant). */
  services?: readonly string[];
  policy?: string;
  evaluator?: string;
  /** Epoch ms: traces scored at or after. */
  since?: number;
  labels?: Record<string, string>;
}

/** One trace with its latest results per policy. */
export interface ScoredTrace {
  trace: StoredTrace;
  /** When any policy last stored results for it. */
  scoredAt: string;
  policies: { policy: string; digest: string; scoredAt: string; results: Result[] }[];
}

export interface ResultStore {
  /**
   * Stores one policy's results for a trace version and marks the trace scored (its `scoredAt`
   * only moves forward). With `replace`, results already stored for that (trace, policy, digest)
   * are deleted first; without it they win and nothing is written (returns false): a version is
   * scored once per policy, also when two writers race. An empty `results` stores nothing and
   * returns false; two results with one evaluator name throw INVALID_ARGUMENT.
   */
  insert(results: PolicyResults, replace: boolean): Promise<boolean>;
  /**
   * Stores a human annotation in the `@human` group, replacing the same annotator's earlier one
   * of that name (others' stay), and marks the trace scored. Annotations do not belong to a trace
   * version: they stay when the trace changes, and all of them are the group's latest results.
   */
  annotate(annotation: AnnotationResult): Promise<void>;
  /**
   * `insert` without `replace` for many policy results at once (a scoring batch): a few
   * statements however many there are, with the same rule per (trace, policy, digest) — stored
   * results win, and of two in the batch for one version the first does. One boolean per entry,
   * in order: true when it was stored. Throws INVALID_ARGUMENT as `insert` does.
   */
  insertMany(batch: readonly PolicyResults[]): Promise<boolean[]>;
  /** The policies that already have results for this trace version. */
  scoredPolicies(project: string, traceId: string, digest: string): Promise<Set<string>>;
  /** `scoredPolicies` of several trace versions in one read, in the order asked. */
  scoredPoliciesOf(
    versions: readonly { project: string; traceId: string; digest: string }[],
  ): Promise<Set<string>[]>;
  /**
   * Completed traces with results, most recently scored first, one entry per trace, paged by
   * (scoredAt, project, traceId). `policy` and `evaluator` select traces that have such results
   * (any stored version); the entry still shows every policy's latest results. A trace scored
   * again while a caller pages moves to the front: later pages neither repeat nor show it.
   * Throws INVALID_ARGUMENT for a malformed page token.
   */
  list(filter: ScoreFilter, page: PageRequest): Promise<Page<ScoredTrace>>;
  /**
   * One completed trace's latest results per policy (the digest stored last, per policy);
   * undefined when it has none or is open again (a late span arrived).
   */
  forTrace(project: string, traceId: string): Promise<ScoredTrace | undefined>;
  /** The latest results per policy of each trace (as `forTrace`), in the order asked. */
  latestOf(
    traces: readonly { project: string; traceId: string }[],
  ): Promise<ScoredTrace['policies'][]>;
  /**
   * Numeric scores (pass/fail as 1/0) of results scored in [since, until), counted and summed
   * per policy, evaluator, score name and time bucket (`bucketStart` = scoredAt rounded down to
   * a multiple of `bucketMs`). Skipped and errored results and label scores are left out.
   */
  aggregate(filter: ScoreAggregateFilter): Promise<ScoreBucket[]>;
}

export interface ScoreAggregateFilter {
  project: string;
  policy?: string;
  evaluator?: string;
  /** Every pair must match the trace's labels. */
  labels?: Record<string, string>;
  /** Restricts to traces of these services (a key's grant). */
  services?: readonly string[];
  since: number;
  until: number;
  bucketMs: number;
}

export interface ScoreBucket {
  policy: string;
  evaluator: string;
  /** The score's name (the metric alerts name). */
  metric: string;
  bucketStart: number;
  n: number;
  sum: number;
}
