/** Storage port: trace sources: their records, pull state, known traces, write-backs and ledger. The conventions are in ../ports.ts. */

import type { SourcePhase } from '../../sources/states.js';
import type { Page, PageRequest } from './paging.js';

/** The area's own word, re-exported for the store's files (areas import it from the area). */
export type { SourcePhase };

/** A TraceSource as stored: the declarative resource as applied, with its bookkeeping. */
export interface SourceRecord {
  project: string;
  name: string;
  resource: Record<string, unknown>;
  generation: number;
  paused: boolean;
  createdAt: string;
  updatedAt: string;
}

/** The pull state of a source, written by the manager (only the lease holder) after each page. */
export interface SourceState {
  project: string;
  name: string;
  /** Epoch ms: every trace that started before it is handled (stored, or skipped with a reason). */
  watermark: number;
  /** Epoch ms: the source is backfilling while the watermark is behind this. */
  backfillUntil: number;
  /** The phase of the last pull (`paused` comes from the source record, not from here). */
  phase: Exclude<SourcePhase, 'paused'>;
  /** Safe text (no secrets, no payloads). */
  lastError?: string;
  /** When the last pull that completed began (lag is measured from it). */
  lastCompleteStartAt?: number;
  lastPullAt?: number;
  /** Earliest time the next pull may start (poll interval, backoff, Retry-After). */
  nextPullAt: number;
  /** Failed pulls in a row (backoff). */
  failures: number;
  /** Traces handed to policies (stored) since the source was created. */
  pulled: number;
  /** Scores written back to the store since the source was created. */
  scored: number;
  /** Records per second over the last pull. */
  recordsPerSecond: number;
  lastWriteBackAt?: number;
  /** Write-backs dead-lettered since the source was created (a counter, as pulled and scored). */
  deadLetters: number;
  /** Scheduled mode's progress; absent for a source that scores online. */
  schedule?: ScheduleState;
}

/** Where a scheduled source stands (re-applying the source keeps it). */
export interface ScheduleState {
  /**
   * Epoch ms: the end of the last window evaluated, found empty or missed; windows ending after
   * it are still to come. Starts at the moment the source was applied.
   */
  cursor: number;
  /** Windows whose starting deadline passed before they could be evaluated. */
  missedWindows: number;
  /** When the last window was evaluated or found empty. */
  lastScheduledAt?: number;
  /** The run of the last window that had traces. */
  lastRunId?: string;
}

/** What a source knows about one trace of its store (digest skip, deferral). */
export interface SourceTrace {
  project: string;
  source: string;
  storeId: string;
  traceId: string;
  startMs: number;
  /** The store's version of the trace last stored ('' while deferred). */
  version: string;
  /** Set while the store reports the trace running: when it was first seen so. */
  deferredSince?: number;
}

/** A score to write back to a source's store, queued in the transaction that stored it. */
export interface NewWriteBack {
  project: string;
  source: string;
  storeId: string;
  traceId: string;
  policy: string;
  metric: string;
  /** JSON of the Score, and whether a judge produced it. */
  score: string;
  judge: boolean;
  createdAt: number;
}

export interface WriteBack extends NewWriteBack {
  id: string;
  attempts: number;
  claim: string;
}

/** A write-back the store refused for good: not retried, kept for the source's status. */
export interface DeadLetter {
  id: string;
  project: string;
  source: string;
  traceId: string;
  policy: string;
  metric: string;
  attempts: number;
  /** The error code of the refusal (`MLFLOW_ACCESS_DENIED`). */
  code: string;
  /** Safe, redacted text. */
  message: string;
  failedAt: number;
}

/** The write-back ledger: what was last written for (source, trace, policy, metric). */
export interface LedgerEntry {
  project: string;
  source: string;
  traceId: string;
  policy: string;
  metric: string;
  remoteId: string;
  /** Digest of the value written, so an unchanged score is not written again. */
  valueDigest: string;
}

export interface SourceStore {
  /** Create or replace by (project, name); generation moves only when the resource differs. */
  upsert(
    project: string,
    name: string,
    resource: Record<string, unknown>,
    now: number,
  ): Promise<{ source: SourceRecord; created: boolean }>;
  get(project: string, name: string): Promise<SourceRecord | undefined>;
  list(project: string | undefined, page: PageRequest): Promise<Page<SourceRecord>>;
  /** Every source of every project (the manager's scan). */
  listAll(): Promise<SourceRecord[]>;
  /** Returns false when there was none. Pulled traces, results and the ledger stay. */
  delete(project: string, name: string): Promise<boolean>;
  setPaused(project: string, name: string, paused: boolean, now: number): Promise<boolean>;

  getState(project: string, name: string): Promise<SourceState | undefined>;
  saveState(state: SourceState): Promise<void>;
  /** Adds to the pulled/scored counters without a read (several writers). */
  count(
    project: string,
    name: string,
    field: 'pulled' | 'scored',
    n: number,
    at: number,
  ): Promise<void>;

  /** The known traces of a source among these store ids. */
  traces(project: string, source: string, storeIds: readonly string[]): Promise<SourceTrace[]>;
  saveTraces(traces: readonly SourceTrace[]): Promise<void>;
  /** The store's id of a trace this source stored (write-back addresses it). */
  storeIdOf(project: string, source: string, traceId: string): Promise<string | undefined>;
  /**
   * The trace id of a trace some source of the project stored under this store id (ids are
   * matched exactly); with several, the first source's by name.
   */
  traceIdOf(project: string, storeId: string): Promise<string | undefined>;
  /** Traces the store still reported running, oldest first. */
  deferred(project: string, source: string, limit: number): Promise<SourceTrace[]>;

  enqueueWriteBacks(items: readonly NewWriteBack[], now: number): Promise<void>;
  claimWriteBacks(
    now: number,
    limit: number,
    hideUntil: number,
    claim: string,
  ): Promise<WriteBack[]>;
  /** Deletes the row if `claim` holds it. */
  finishWriteBack(id: string, claim: string): Promise<boolean>;
  retryWriteBack(id: string, claim: string, visibleAt: number): Promise<boolean>;
  /**
   * Moves a claimed write-back to its source's dead letters (false, and nothing done, if `claim`
   * no longer holds it), counts it in the source's `deadLetters`, and keeps only the newest
   * `keep` dead letters of the source. Run it in a transaction: it is several statements.
   */
  deadLetterWriteBack(
    row: WriteBack,
    failure: { code: string; message: string; at: number },
    keep: number,
  ): Promise<boolean>;
  /** A source's dead letters, newest first. */
  deadLetters(project: string, source: string, limit: number): Promise<DeadLetter[]>;
  ledger(
    project: string,
    source: string,
    traceId: string,
    policy: string,
    metric: string,
  ): Promise<LedgerEntry | undefined>;
  saveLedger(entry: LedgerEntry): Promise<void>;
}
