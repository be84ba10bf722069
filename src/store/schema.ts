import type { Generated } from 'kysely';

/**
 * Kysely table types: the database as the query code sees it after every migration. Private to
 * store/ (ports.ts is the public shape).
 *
 * Column conventions, the same on both dialects so one query text serves both:
 * - times are `bigint` epoch milliseconds (`*_at`): comparisons with the injected clock's `now`
 *   are plain integer comparisons, with no time zone or text-format pitfalls; pg's int8 parser is
 *   set to return numbers.
 * - lists and maps (labels, roles) are JSON text.
 */

export interface SchemaMigrationsTable {
  version: number;
  name: string;
  applied_at: number;
}

export interface ApiKeysTable {
  id: string;
  project: string;
  name: string;
  /** JSON array of roles. */
  roles: string;
  /** JSON object of label → value. */
  labels: string;
  prefix: string;
  secret_hash: string;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
  expires_at: number | null;
  /** JSON {services?, labels?}: the key's read grant; null = the whole project. */
  scope: string | null;
}

export interface LeasesTable {
  name: string;
  holder: string;
  expires_at: number;
  acquired_at: number;
}

export interface TracesTable {
  project: string;
  trace_id: string;
  source: string;
  /** JSON object: labels from the ingest door (key labels, source labels). */
  ingest_labels: string;
  first_seen_at: number;
  last_span_at: number;
  root_ended_at: number | null;
  /** Null while the trace is open. */
  completed_at: number | null;
  service: Generated<string>;
  name: Generated<string>;
  start_ms: number;
  duration_ms: Generated<number>;
  steps: Generated<number>;
  /** 0 or 1. */
  error: Generated<number>;
  /** JSON object: the trace's labels (attributes + ingest labels). */
  labels: Generated<string>;
  digest: Generated<string>;
  /** JSON: the normalized record; null until first completion. */
  record: Generated<string | null>;
  /** JSON TraceRoot (root span attributes and resource); null when the trace had no root. */
  root: Generated<string | null>;
  /** When results were last stored for the trace (any policy); null until first scored. */
  scored_at: Generated<number | null>;
  /** JSON of the record's token usage (latency left out); null before it was recorded. */
  usage: Generated<string | null>;
  /**
   * The chunk text of the spans a whole trace arrived with (migration 22), read before its
   * `span_chunks` rows; null when its spans are all in `span_chunks`.
   */
  spans: Generated<string | null>;
  /** The format of `spans` (store/chunk-format.ts); null with it. */
  spans_format: Generated<number | null>;
}

/** One label of a completed trace (kept by triggers on `traces`: migration 14). */
export interface TraceLabelsTable {
  project: string;
  key: string;
  value: string;
  trace_id: string;
  /**
   * The trace's start time, for reading a label's traces in the traces list's order (migration 18;
   * kept by triggers); the key's fourth column since migration 21.
   */
  start_ms: number;
}

/**
 * Numeric scores counted and summed per width and bucket (migration 15; kept by triggers, and on
 * SQLite for inserted results by the store: migration 20).
 */
export interface ScoreRollupTable {
  project: string;
  /** The bucket's width: 60,000 or 3,600,000. */
  span_ms: number;
  bucket_start: number;
  policy: string;
  evaluator: string;
  metric: string;
  n: number;
  total: number;
}

export interface SpanChunksTable {
  project: string;
  trace_id: string;
  /** Orders chunks by arrival: `<epoch ms, 13 digits>-<random>`. */
  chunk: string;
  /**
   * The chunk's redacted spans and detached events as JSON (bytes as {"$bytes": base64}), in the
   * format `format` names (store/chunk-format.ts).
   */
  spans: string;
  /**
   * 1: a JSON array of span objects (since migration 11 naming their resource by `resourceRef`,
   * a `span_resources` id); 2 (since migration 17): the compact chunk of chunk-format.ts.
   */
  format: Generated<number>;
}

export interface SpanResourcesTable {
  project: string;
  /** sha256 (hex) of `attributes`. */
  id: string;
  /** JSON object: redacted resource attributes (bytes as {"$bytes": base64}). */
  attributes: string;
}

export interface WebhooksTable {
  id: string;
  project: string;
  name: string;
  url: string;
  /** JSON array of event types (`run.finished`, …); empty = the default set. */
  events: string;
  secret: string;
  /** 0 or 1. */
  disabled: number;
  created_at: number;
  updated_at: number;
}

export interface WebhookDeliveriesTable {
  /** `whd_…`, time-ordered. */
  id: string;
  project: string;
  webhook_id: string;
  webhook_name: string;
  event: string;
  /** The JSON body, frozen at enqueue. */
  payload: string;
  /** PENDING, RETRYING, DELIVERED or FAILED. */
  state: string;
  /** Attempts started (a claim counts one). */
  attempts: number;
  /** When the next attempt is due; while one is in flight, when it is presumed lost. */
  next_attempt_at: number;
  last_status: number | null;
  last_error: string | null;
  run_id: string | null;
  trace_id: string | null;
  policy: string | null;
  /** A policy alert's own URL (sent unsigned); null = the webhook's URL. */
  target_url: string | null;
  created_at: number;
  /** Null until DELIVERED or FAILED. */
  finished_at: number | null;
}

export interface PoliciesTable {
  project: string;
  name: string;
  /** JSON of the resource, keys sorted so that equal resources have equal text. */
  resource: string;
  generation: number;
  created_at: number;
  updated_at: number;
}

export interface WorkItemsTable {
  /** `wi_…`, time-ordered. */
  id: string;
  project: string;
  trace_id: string;
  digest: string;
  /** '' = every policy of the project; a name = a rescore of that policy. */
  policy: string;
  /** 0 or 1. */
  replace: number;
  trace_completed_at: number;
  created_at: number;
  /** Claimable at or after; a claim moves it to the end of the visibility timeout. */
  visible_at: number;
  attempts: number;
  /** The latest claim's token; '' before the first claim. */
  claim: string;
  /**
   * The trace's `first_seen_at`, read from its row when the item is queued: the unique key's
   * second column, so new items land at the key's end (migration 23).
   */
  trace_first_seen_at: Generated<number>;
}

export interface ResultsTable {
  project: string;
  trace_id: string;
  policy: string;
  digest: string;
  /** The evaluator instance name (unique within a policy). */
  evaluator: string;
  /** Order of the result within the policy's results. */
  position: number;
  outcome: string;
  /** JSON: the Result. */
  result: string;
  scored_at: number;
}

export interface MetricPointsTable {
  project: string;
  policy: string;
  metric: string;
  at: number;
  value: number;
}

export interface AlertStatesTable {
  project: string;
  policy: string;
  metric: string;
  /** 0 or 1. */
  firing: number;
  mean: number;
  n: number;
  changed_at: number;
}

/** One alert transition (fired or resolved), kept for the scores chart. */
export interface AlertTransitionsTable {
  project: string;
  policy: string;
  metric: string;
  at: number;
  /** 1 = fired, 0 = resolved. */
  firing: number;
  mean: number;
  n: number;
  below: number;
}

export interface JudgeBudgetsTable {
  project: string;
  policy: string;
  /** UTC day, `YYYY-MM-DD`. */
  day: string;
  tokens: number;
}

export interface SourcesTable {
  project: string;
  name: string;
  /** JSON of the resource, keys sorted so that equal resources have equal text. */
  resource: string;
  generation: number;
  /** 0 or 1. */
  paused: number;
  created_at: number;
  updated_at: number;
}

export interface SourceStatesTable {
  project: string;
  name: string;
  /** JSON of SourceState without its key and counters (those are the columns below). */
  state: string;
  /** Counters added to by several writers (`count`), never rewritten by `saveState`. */
  pulled: number;
  scored: number;
  last_write_back_at: number | null;
  /** Write-backs dead-lettered since the source was created. */
  dead_letters: number;
}

export interface SourceTracesTable {
  project: string;
  source: string;
  /** The trace's id in the source's store. */
  store_id: string;
  trace_id: string;
  start_ms: number;
  /** The store's version last stored ('' while deferred). */
  version: string;
  /** When the store was first seen reporting the trace running; null when it is not. */
  deferred_since: number | null;
}

export interface WriteBacksTable {
  /** `wb_…`, time-ordered. */
  id: string;
  project: string;
  source: string;
  store_id: string;
  trace_id: string;
  policy: string;
  metric: string;
  /** JSON of the Score. */
  score: string;
  /** 0 or 1: a judge produced the score. */
  judge: number;
  created_at: number;
  /** Claimable at or after; a claim moves it to the end of the visibility timeout. */
  visible_at: number;
  attempts: number;
  /** The latest claim's token; '' before the first claim. */
  claim: string;
}

export interface WriteBackDeadLettersTable {
  /** The write-back's id. */
  id: string;
  project: string;
  source: string;
  trace_id: string;
  policy: string;
  metric: string;
  attempts: number;
  /** The error code the store's answer became (`LANGFUSE_ACCESS_DENIED`). */
  code: string;
  /** Safe text, redacted. */
  message: string;
  failed_at: number;
}

export interface WriteBackLedgerTable {
  project: string;
  source: string;
  trace_id: string;
  policy: string;
  metric: string;
  remote_id: string;
  value_digest: string;
}

export interface RunsTable {
  /** `run_…` */
  id: string;
  project: string;
  name: string;
  /** JSON object of label → value. */
  labels: string;
  /** 1 when labelled `touchstone.keep: "true"` (never swept by retention). */
  keep: number;
  /** `RUN_STATUS_*`. */
  status: string;
  created_by: string;
  created_at: number;
  started_at: number | null;
  /** Set with a final status. */
  finished_at: number | null;
  /** Records × trials; 0 until the executor has read the dataset. */
  total: number;
  /** Items (record, trial) with stored results. */
  done: number;
  /** JSON arrays, set with a final status. */
  summaries: string | null;
  gates: string | null;
  /** Why the run ended in ERROR (safe text). */
  error: string | null;
  /** 0 or 1: `:cancel` asked the executor holding the run to stop. */
  cancel_requested: number;
  /** The replica executing the run, and until when (null once final or released). */
  lease_holder: string | null;
  lease_expires_at: number | null;
  /** Digest of the records at the first start: an adopted run refuses a changed dataset. */
  dataset_digest: string | null;
}

export interface RunSpecsTable {
  run_id: string;
  /** JSON of the run spec as validated at create (kept apart: the run's row is updated often). */
  spec: string;
}

export interface RunOutputsTable {
  run_id: string;
  record_index: number;
  trial: number;
  record_id: string;
  /** JSON {output, trajectory?, usage?}; null when the target failed. */
  output: string | null;
  error: string | null;
}

export interface RunResultsTable {
  run_id: string;
  record_index: number;
  trial: number;
  evaluator: string;
  position: number;
  record_id: string;
  outcome: string;
  /** JSON: the Result. */
  result: string;
}

export interface IdempotencyKeysTable {
  principal: string;
  operation: string;
  key: string;
  /** sha256 hex of the request (method, path, query, body). */
  digest: string;
  /** `in_flight`, `completed` or `uncertain`. */
  state: string;
  /** The holder's fencing token. */
  token: string;
  created_at: number;
  heartbeat_at: number;
  expires_at: number;
  /** The stored outcome: set when completed. */
  status: number | null;
  /** JSON object of the headers a replay sends. */
  headers: string | null;
  body: Buffer | null;
  /** JSON array of response fields withheld from `body`. */
  withheld: string | null;
  /** What the outcome counts against the scope's byte budget. */
  bytes: number;
}

export interface AuditEntriesTable {
  id: string;
  at: number;
  principal: string;
  principal_kind: string;
  action: string;
  resource: string;
  /** '' when no project is known (an index-friendly equality filter). */
  project: string;
  outcome: string;
  status: number;
  code: string | null;
  request_id: string;
}

export interface Database {
  schema_migrations: SchemaMigrationsTable;
  api_keys: ApiKeysTable;
  audit_entries: AuditEntriesTable;
  leases: LeasesTable;
  traces: TracesTable;
  trace_labels: TraceLabelsTable;
  span_chunks: SpanChunksTable;
  span_resources: SpanResourcesTable;
  webhooks: WebhooksTable;
  webhook_deliveries: WebhookDeliveriesTable;
  policies: PoliciesTable;
  /** Same columns as `policies`: a GuardPolicy document and its generation. */
  guard_policies: PoliciesTable;
  work_items: WorkItemsTable;
  results: ResultsTable;
  score_rollup: ScoreRollupTable;
  metric_points: MetricPointsTable;
  alert_states: AlertStatesTable;
  alert_transitions: AlertTransitionsTable;
  judge_budgets: JudgeBudgetsTable;
  sources: SourcesTable;
  source_states: SourceStatesTable;
  source_traces: SourceTracesTable;
  write_backs: WriteBacksTable;
  write_back_ledger: WriteBackLedgerTable;
  write_back_dead_letters: WriteBackDeadLettersTable;
  runs: RunsTable;
  run_specs: RunSpecsTable;
  run_outputs: RunOutputsTable;
  run_results: RunResultsTable;
  idempotency_keys: IdempotencyKeysTable;
}
