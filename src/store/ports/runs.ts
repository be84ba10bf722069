/** Storage port: offline runs, their outputs and results. The conventions are in ../ports.ts. */

import type { Result } from '../../core/index.js';
import type { RunStatus } from '../../runs/states.js';
import type { Page, PageRequest } from './paging.js';

/** The area's own word, re-exported for the store's files (areas import it from the area). */
export type { RunStatus };

/** An offline run as stored. */
export interface RunRecord {
  /** `run_…` */
  id: string;
  project: string;
  name: string;
  labels: Record<string, string>;
  status: RunStatus;
  /** The spec as validated at create; absent in list pages (it may hold inline records). */
  spec?: Record<string, unknown>;
  /** The principal that created it (key id, or `open`). */
  createdBy: string;
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  /** Items (records × trials); 0 until the executor has read the dataset. */
  total: number;
  /** Items with stored results. */
  done: number;
  /** Set with a final status. */
  summaries?: unknown[];
  gates?: unknown[];
  /** Why the run ended in ERROR; safe text. */
  error?: string;
  cancelRequested: boolean;
  /** The replica executing the run and until when; absent once final or released. */
  leaseHolder?: string;
  leaseExpiresAt?: string;
  /** Digest of the records when the run first started. */
  datasetDigest?: string;
}

export interface NewRun {
  id: string;
  project: string;
  name: string;
  labels: Record<string, string>;
  /** `touchstone.keep: "true"`: never swept by retention. */
  keep: boolean;
  spec: Record<string, unknown>;
  createdBy: string;
  createdAt: number;
}

/** What a target produced for one item (record, trial), or why it failed. */
export interface RunOutput {
  recordIndex: number;
  /** 0-based. */
  trial: number;
  recordId: string;
  /** JSON text of {output, trajectory?, usage?}; absent when the target failed. */
  output?: string;
  /** Safe text. */
  error?: string;
}

/** One evaluator's result for one item. */
export interface RunResult {
  recordIndex: number;
  trial: number;
  recordId: string;
  /** Order within the item's results. */
  position: number;
  result: Result;
}

/** One item's results (the results list). */
export interface RunItemResults {
  recordIndex: number;
  trial: number;
  recordId: string;
  /** The target's output JSON (runs with a target). */
  output?: string;
  error?: string;
  results: Result[];
}

/** A batch of finished work, written by the lease holder in one transaction. */
export interface RunProgress {
  /** Items whose results are in `results` (each counted once). */
  done: number;
  outputs: readonly RunOutput[];
  results: readonly RunResult[];
}

export interface RunFinish {
  status: RunStatus;
  summaries: unknown[];
  gates: unknown[];
  error?: string;
  finishedAt: number;
}

export interface RunStore {
  /** Stores a pending run and its spec; call inside a transaction (two rows). */
  create(run: NewRun): Promise<RunRecord>;
  /** The run, with its spec unless `spec: false` (progress polls skip a large spec). */
  get(id: string, options?: { spec?: boolean }): Promise<RunRecord | undefined>;
  /**
   * Runs of one project (all projects when undefined), newest first, without their spec. Throws
   * INVALID_ARGUMENT for a malformed page token.
   */
  list(project: string | undefined, page: PageRequest): Promise<Page<RunRecord>>;
  /**
   * Takes the oldest run that is pending, or running with no live lease (its executor died or
   * let it go), for `holder` until `now + leaseMs`; it becomes RUNNING (`startedAt` kept when
   * set). One statement (`FOR UPDATE SKIP LOCKED` on PostgreSQL): two replicas never take one run.
   */
  claim(holder: string, now: number, leaseMs: number): Promise<RunRecord | undefined>;
  /** Extends the lease; undefined when `holder` no longer holds it (or the run is final). */
  renew(
    id: string,
    holder: string,
    now: number,
    leaseMs: number,
  ): Promise<{ cancelRequested: boolean } | undefined>;
  /** Gives the lease up (the run stays RUNNING and is adopted at once). */
  release(id: string, holder: string): Promise<void>;
  /** Records the item count, the dataset digest and the items already done; fenced by the lease. */
  prepare(
    id: string,
    holder: string,
    fields: { total: number; done: number; datasetDigest: string },
  ): Promise<boolean>;
  /**
   * Writes a batch if `holder` still holds the lease of the running run (and renews it): adds
   * `done`, inserts outputs and results, keeping any already stored for the same key. Returns
   * false, writing nothing, when the lease is lost. Call inside a transaction.
   */
  record(
    id: string,
    holder: string,
    now: number,
    leaseMs: number,
    progress: RunProgress,
  ): Promise<boolean>;
  /** Items (record, trial) that have results. */
  finishedItems(id: string): Promise<{ recordIndex: number; trial: number }[]>;
  /** Every stored output of a run. */
  outputs(id: string): Promise<RunOutput[]>;
  /** Every stored result of a run, by (record, trial, position). */
  allResults(id: string): Promise<RunResult[]>;
  /** Results grouped by item, by (record, trial). Throws INVALID_ARGUMENT for a bad token. */
  results(id: string, page: PageRequest): Promise<Page<RunItemResults>>;
  /**
   * Sets a final status and clears the lease. With `holder`, only if it holds the lease of the
   * running run; with undefined, only if the run is not final and no live lease holds it.
   * Returns the run as finished, or undefined when the condition failed.
   */
  finish(
    id: string,
    holder: string | undefined,
    now: number,
    finish: RunFinish,
  ): Promise<RunRecord | undefined>;
  /** Asks the executor of a running run to stop; false when the run is not running. */
  requestCancel(id: string): Promise<boolean>;
  /**
   * Deletes a final run without a live lease, with its outputs and results. Call inside a
   * transaction. `not_finished` when it is pending, running or leased.
   */
  delete(id: string, now: number): Promise<'deleted' | 'not_found' | 'not_finished'>;
  /**
   * Up to `limit` finished runs not labelled keep, finished before `finishedBefore`, oldest
   * first; limited to `projects`, or excluding `exceptProjects`.
   */
  expired(
    filter: {
      finishedBefore: number;
      projects?: readonly string[];
      exceptProjects?: readonly string[];
    },
    limit: number,
  ): Promise<{ id: string; project: string }[]>;
}
