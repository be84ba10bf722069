/** Storage port: spans, open and completed traces. The conventions are in ../ports.ts. */
import type {
  DetachedEvents,
  EvalRecord,
  NormalizedTrace,
  Outcome,
  Span,
  TraceRoot,
  TraceSummary,
  Usage,
} from '../../core/index.js';
import type { Page, PageRequest } from './paging.js';

/** Spans of one trace arriving together (one request, or one pulled page). */
export interface AppendOptions {
  /**
   * Awaited between slices of the work (encoding and writing about 1 MiB of span JSON each), so
   * that a request of many megabytes does not hold the event loop while it is stored; the
   * transaction stays open meanwhile. Absent: no pauses.
   */
  pause?: () => Promise<void>;
}

export interface SpansReadOptions {
  /**
   * `traces.limits.max_events_per_span`: detached events (OTLP log records) past it are not added
   * to their span, and are counted in its `droppedEventsCount`. Unlimited when absent.
   */
  maxEventsPerSpan?: number;
}

export interface SpanBatch {
  project: string;
  traceId: string;
  /** Redacted spans; a span id seen again replaces the stored span. */
  spans: Span[];
  /**
   * Redacted events of spans of this trace that arrived apart from them (OTLP log records):
   * stored beside the spans and added to their span's events when the trace is read. They open
   * the trace like spans do, but never count as its root.
   */
  detachedEvents?: DetachedEvents[];
  /** Labels from the ingest door (the API key's labels, a source's traceLabels and `source`). */
  labels: Record<string, string>;
  /** Source name for pulled traces, '' for pushed ones. */
  source: string;
  /**
   * Set when the batch is a whole trace (one root, every parent present, no detached events):
   * its normalized form and digest. A trace with no stored row yet is then stored complete at
   * once; one that has a row (earlier spans, a retry) is re-opened as any batch re-opens it, and
   * the completer completes the union.
   */
  whole?: WholeTrace;
}

/** A whole trace's completion, computed before the transaction that stores its spans. */
export interface WholeTrace {
  trace: NormalizedTrace;
  digest: string;
  /** `JSON.stringify(trace.record)`, when the digest was taken of it: stored as is. */
  recordJson?: string;
}

/**
 * An `appendSpans` call's rows, encoded: the span chunks, resources and trace rows as the
 * statements write them, but for the call's time (`now`) and its chunk keys' stamp, which the
 * write adds. Pure text and numbers, so that a worker thread can encode what the thread holding
 * the store's connection then writes (src/ingest/prepare-worker.ts); see `encodeAppend` in append-encoding.ts.
 */
export interface EncodedAppend {
  /** Distinct resources of the call's spans and of its whole traces' large root resources. */
  resources: { project: string; id: string; attributes: string }[];
  /** `span_chunks` rows; their key is the call's stamp, `-`, then `key`. */
  chunks: EncodedChunk[];
  /** One per trace of the call, in call order. */
  traces: EncodedTrace[];
}

export interface EncodedChunk {
  project: string;
  traceId: string;
  /** The chunk key's part after the call's stamp: the batch's index, and the part's after the first. */
  key: string;
  text: string;
  format: number;
}

export interface EncodedTrace {
  project: string;
  traceId: string;
  source: string;
  /** The ingest labels, JSON. */
  labels: string;
  /** Whether the call brought the trace's root (its `root_ended_at` is then the call's time). */
  rootEnded: boolean;
  /** The earliest start (ms) of its spans, else of its detached events; null: the call's time. */
  startMs: number | null;
  /** A whole trace, inserted complete when it has no row yet. */
  whole?: EncodedWhole;
}

/** The columns `complete` writes for a whole trace (WHOLE_COLUMNS after `completed_at`). */
export interface EncodedWhole {
  /** The summary's start (ms), which the row's `start_ms` takes. */
  startMs: number;
  /** service, name, duration_ms, steps, error, labels, digest, record, root, usage. */
  columns: (string | number | null)[];
  /**
   * Its one chunk, held in the row (migration 22); absent when it took several. `key` is the
   * chunk's key after the stamp, for when the trace has a row already and it becomes a chunk row.
   */
  chunk?: { text: string; format: number; key: string };
}

/** What `appendSpans` did beyond storing spans. */
export interface AppendResult {
  /**
   * Whole traces stored complete on arrival (completed at `now`), in call order; `firstSeenAt`
   * is their rows' `first_seen_at` (the call's `now`: the rows are new).
   */
  completed: { project: string; traceId: string; digest: string; firstSeenAt: number }[];
}

/** When an open trace is complete (DESIGN: completion is recorded in the database). */
export interface CompletionRules {
  /** After the root span ended. */
  graceMs: number;
  /** After the last span arrived. */
  idleMs: number;
  /** After the first span arrived. */
  maxAgeMs: number;
}

/** An open trace the completer should finish now. */
export interface PendingTrace {
  project: string;
  traceId: string;
  /** Version stamp: completion only applies if no span arrived since it was read. */
  lastSpanAt: number;
  labels: Record<string, string>;
  source: string;
  /**
   * The digest stored when this was read ('' before a first completion). When given, completion
   * also requires it to be unchanged, so it needs no read of its own to tell `changed`.
   */
  digest?: string;
}

export interface StoredTrace extends TraceSummary {
  project: string;
  source: string;
  /** Content digest of the record (changes when late spans change the trace). */
  digest: string;
  completedAt: string;
  /** The record's token counts and cost; absent when it has none or was stored before them. */
  usage?: Omit<Usage, 'latencyMs'>;
}

export interface TraceFilter {
  project?: string;
  service?: string;
  name?: string;
  /** RFC 3339, inclusive lower bound on the start time. */
  since?: string;
  /** RFC 3339, exclusive upper bound on the start time. */
  until?: string;
  /** Every pair must match. */
  labels?: Record<string, string>;
  error?: boolean;
  source?: string;
  /** Restricts to these services (a key's grant). */
  services?: readonly string[];
  /**
   * Traces with a stored result (any version) of this policy, evaluator and outcome; given
   * together, one result must match all of them.
   */
  policy?: string;
  evaluator?: string;
  outcome?: Outcome;
}

export interface CompletionResult {
  /** False when a span arrived after `lastSpanAt` (the trace stays open) or it was completed already. */
  completed: boolean;
  /** True when the digest differs from the one stored at a previous completion (or there was none). */
  changed: boolean;
}

export interface TraceStore {
  /**
   * Stores spans and opens (or re-opens) their traces; `now` stamps arrival. A whole batch whose
   * trace has no row yet is stored complete instead (see SpanBatch.whole).
   */
  appendSpans(
    batches: readonly SpanBatch[],
    now: number,
    options?: AppendOptions,
  ): Promise<AppendResult>;
  /**
   * `appendSpans` of batches encoded before (`encodeAppend`), on
   * another thread perhaps: only the statements are left.
   */
  appendEncoded(
    encoded: EncodedAppend,
    now: number,
    options?: AppendOptions,
  ): Promise<AppendResult>;
  /** Open traces whose completion rule has fired at `now`, oldest first. */
  dueForCompletion(now: number, rules: CompletionRules, limit: number): Promise<PendingTrace[]>;
  /** Every stored span of a trace. */
  spans(project: string, traceId: string, options?: SpansReadOptions): Promise<Span[]>;
  /** The spans of several traces in one read, in the order asked (the completer's batch). */
  spansOf(
    traces: readonly { project: string; traceId: string }[],
    options?: SpansReadOptions,
  ): Promise<Span[][]>;
  /**
   * Records a completed trace's summary, record and digest, only if no span arrived since
   * `pending.lastSpanAt`. `recordJson` is `JSON.stringify(trace.record)` when the caller has it
   * (the digest's input), so the record is not serialized twice.
   */
  complete(
    pending: PendingTrace,
    trace: NormalizedTrace,
    digest: string,
    now: number,
    recordJson?: string,
  ): Promise<CompletionResult>;
  /** Completed traces, newest first. */
  list(filter: TraceFilter, page: PageRequest): Promise<Page<StoredTrace>>;
  /** A completed trace with its record (and its root, what selectors read). */
  get(
    project: string,
    traceId: string,
  ): Promise<{ trace: StoredTrace; record: EvalRecord; root?: TraceRoot } | undefined>;
  /**
   * `get` of several traces in a few reads (a scoring batch), in the order asked; undefined for
   * a trace that is open or not stored.
   */
  getMany(
    traces: readonly { project: string; traceId: string }[],
  ): Promise<({ trace: StoredTrace; record: EvalRecord; root?: TraceRoot } | undefined)[]>;
  /**
   * A completed trace with its record as stored (JSON text), for answers that send it on whole:
   * the record of a trace of thousands of steps is not parsed to be written out again.
   */
  getRecordJson(
    project: string,
    traceId: string,
  ): Promise<{ trace: StoredTrace; recordJson: string } | undefined>;
  /** Completed traces started at or after `since` (rescore), oldest first, by (start, id). */
  listVersions(
    project: string,
    since: number,
    after: { startMs: number; traceId: string } | undefined,
    limit: number,
  ): Promise<{ traceId: string; digest: string; startMs: number }[]>;
  /** Traces not yet complete. */
  countOpen(): Promise<number>;
  /** Projects with at least one stored trace, by name. */
  projects(): Promise<string[]>;
}
