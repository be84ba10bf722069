import type { Attributes, Score, Span } from '../core/index.js';

/**
 * The connector contract. A connector only talks to one kind of store: it lists traces by start
 * time, fetches their spans, and writes scores back. Everything else — watermark, leases, deferral,
 * digests, rate caps, backoff, status, storing and queueing — is the source manager's, the same for
 * every store. Connectors make every call through the HttpClient they are given (the outbound
 * guard is already in it) and throw TouchstoneErrors: `retryable` ones (429/503/5xx/network, with
 * `retryAfterSeconds` when the store sent one) are backed off by the manager.
 */

/** A trace as the store lists it (no spans). */
export interface TraceHeader {
  /** The store's own id (`tr-6a1f…` on MLflow); what fetch and write-back take. */
  storeId: string;
  /** The OpenTelemetry trace id, 32 lowercase hex: the id the trace gets in Touchstone. */
  traceId: string;
  /** Epoch ms the trace started (what the list is ordered and filtered by). */
  startMs: number;
  /** Epoch ms it ended, when the store says. */
  endMs?: number;
  /** The store reports it as still running. */
  inProgress: boolean;
  /**
   * Trace-level attributes that are not on any span (MLflow tags and metadata as
   * `mlflow.tag.<key>` / `mlflow.metadata.<key>`): added to the resource of every span.
   */
  resource: Attributes;
}

export interface ListQuery {
  /** Inclusive lower bound on the start time, epoch ms. */
  fromMs: number;
  /** Exclusive upper bound on the start time, epoch ms. */
  toMs: number;
  pageSize: number;
  /** From the previous page of the same query. */
  pageToken?: string;
  signal?: AbortSignal;
}

export interface ListPage {
  /** Ascending by start time. */
  traces: TraceHeader[];
  nextPageToken?: string;
}

/** Spans of one fetched trace, or why it could not be read (the manager skips it with the reason). */
export type FetchedTrace = { spans: Span[] } | { missing: string };

/** One metric of one policy's results on one trace, to write back. */
export interface WriteBackItem {
  storeId: string;
  traceId: string;
  policy: string;
  /** Metric name (`tool-errors`, `helpfulness.passed`). */
  metric: string;
  score: Score;
  /** Whether the evaluator behind it asks a judge model (MLflow: source type LLM_JUDGE vs CODE). */
  judge: boolean;
  /**
   * The principal of the person whose annotation this is (MLflow source type HUMAN, Phoenix
   * annotator kind HUMAN, Langfuse source ANNOTATION); absent for a policy's scores. `policy` is
   * then `@human/<principal>`, so each person's score is a remote score of its own.
   */
  annotator?: string;
  /** The id the store gave this (trace, policy, metric) last time, when the ledger has it. */
  remoteId?: string;
}

/**
 * A failed item: `retryable` ones (429, 5xx, timeouts, network) are retried with backoff, after
 * `retryAfterSeconds` when the store sent it; the others (401, 403, the trace gone, a refused
 * value) would fail the same way again, so the writer dead-letters them after this one attempt.
 * `code` is the catalogue code of the error behind it (`MLFLOW_ACCESS_DENIED`).
 */
export type WriteBackOutcome =
  | { status: 'created' | 'updated'; remoteId: string }
  | {
      status: 'failed';
      error: string;
      retryable: boolean;
      code: string;
      retryAfterSeconds?: number;
    };

export interface TraceStoreConnector {
  /** Checks the endpoint and locations (resolves experiment names, …); throws a clear error. */
  check(signal?: AbortSignal): Promise<void>;
  list(query: ListQuery): Promise<ListPage>;
  /** Full spans of these traces, in our span model, keyed by `storeId`. */
  fetch(headers: readonly TraceHeader[], signal?: AbortSignal): Promise<Map<string, FetchedTrace>>;
  /**
   * Writes each item: creates the remote score, or updates the one at `remoteId`; when there is no
   * `remoteId` it first looks for an existing one with the same name and source (a lost ledger
   * must not make duplicates).
   */
  writeBack(items: readonly WriteBackItem[], signal?: AbortSignal): Promise<WriteBackOutcome[]>;
}
