/**
 * Storage interfaces in domain terms. Domain areas depend on these, never on Kysely or a driver:
 * the same contract suite (store.int.test.ts) runs every implementation on SQLite and PostgreSQL.
 *
 * Conventions every port follows:
 * - Times cross the port as RFC 3339 strings in UTC with milliseconds (`Date#toISOString()`).
 * - "Now" comes from the injected Clock (passed to `openStore`) or from an explicit argument,
 *   never from the database, so tests drive time with a FakeClock.
 * - Absent optional values are omitted from returned objects, never set to `undefined`/`null`.
 * - Failures are TouchstoneErrors: `STORE_UNAVAILABLE` (retryable) when the database cannot be
 *   reached, `STORE_CONFLICT` (retryable) on a deadlock or serialization failure, and
 *   `ALREADY_EXISTS` when a unique key is taken.
 */

import type {
  DetachedEvents,
  EvalRecord,
  NormalizedTrace,
  Outcome,
  Result,
  Role,
  Span,
  TraceRoot,
  TraceSummary,
  Usage,
} from '../core/index.js';

export type { Role } from '../core/index.js';
export type * from './ports/resources.js';

export type StoreDialect = 'sqlite' | 'postgres';

/** An API key as stored, without its secret. */
export interface ApiKeyRecord {
  /** `key_…` */
  id: string;
  project: string;
  name: string;
  roles: Role[];
  labels: Record<string, string>;
  /** The first characters of the secret, for display (`tsk_AbCd`). */
  prefix: string;
  createdAt: string;
  lastUsedAt?: string;
  revokedAt?: string;
  expiresAt?: string;
  /** Narrows what the key reads: only these services and/or traces carrying these labels. */
  scope?: KeyScope;
}

export interface KeyScope {
  services?: string[];
  labels?: Record<string, string>;
}

export interface NewApiKey extends ApiKeyRecord {
  /** Hash of the secret (the secret itself is never stored). Unique across all keys. */
  secretHash: string;
}

export interface PageRequest {
  /** 1..1000; larger values are clamped to 1000. */
  pageSize: number;
  /** Opaque token from a previous page's `nextPageToken`. */
  pageToken?: string;
}

export interface Page<T> {
  items: T[];
  /** Present when more items may follow. */
  nextPageToken?: string;
}

export interface ApiKeyStore {
  /** Stores a new key. Throws ALREADY_EXISTS when the id or the secret hash is taken. */
  create(key: NewApiKey): Promise<ApiKeyRecord>;
  /** The key with this secret hash, revoked and expired ones included (the caller refuses them). */
  getBySecretHash(secretHash: string): Promise<ApiKeyRecord | undefined>;
  get(id: string): Promise<ApiKeyRecord | undefined>;
  /**
   * Keys of one project (all projects when `project` is undefined), oldest first, revoked ones
   * included. Throws INVALID_ARGUMENT for a malformed page token.
   */
  list(project: string | undefined, page: PageRequest): Promise<Page<ApiKeyRecord>>;
  /**
   * Marks the key revoked at `at`. Returns false when no key has this id. Revoking twice keeps
   * the first revocation time and returns true.
   */
  revoke(id: string, at: string): Promise<boolean>;
  /**
   * Records a use at `at`. Only moves `lastUsedAt` forward and does nothing for unknown ids; one
   * small UPDATE, so callers may coalesce calls (auth writes at most once a minute per key).
   */
  touch(id: string, at: string): Promise<void>;
}

export interface Lease {
  holder: string;
  /** When the lease lapses unless renewed. May be in the past: an expired lease is free. */
  expiresAt: string;
  /** When the current holder took it (renewals keep it). */
  acquiredAt: string;
}

/**
 * Named leases decide who does singleton work across replicas (a trace source's pull, the webhook
 * dispatcher). Holders are unique per process and task, e.g. `<replica id>/source/<name>`.
 */
export interface LeaseStore {
  /**
   * Takes or renews the lease for `ttlMs` from now, in one conditional statement: succeeds when
   * the lease is free, expired, or already held by `holder`. Returns false while another holder's
   * lease is unexpired.
   */
  acquire(name: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease up if `holder` holds it; otherwise does nothing. */
  release(name: string, holder: string): Promise<void>;
  /** The lease row as stored (possibly expired), or undefined when nobody has taken it. */
  get(name: string): Promise<Lease | undefined>;
}

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
  /** Stores spans and opens (or re-opens) their traces; `now` stamps arrival. */
  appendSpans(batches: readonly SpanBatch[], now: number, options?: AppendOptions): Promise<void>;
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
   * `pending.lastSpanAt`.
   */
  complete(
    pending: PendingTrace,
    trace: NormalizedTrace,
    digest: string,
    now: number,
  ): Promise<CompletionResult>;
  /** Completed traces, newest first. */
  list(filter: TraceFilter, page: PageRequest): Promise<Page<StoredTrace>>;
  /** A completed trace with its record (and its root, what selectors read). */
  get(
    project: string,
    traceId: string,
  ): Promise<{ trace: StoredTrace; record: EvalRecord; root?: TraceRoot } | undefined>;
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

/**
 * A webhook as stored. The secret is stored as is, not hashed, because every attempt is signed
 * with it: the database is the trust boundary for it, as it is for the payloads it signs.
 */
export interface WebhookRecord {
  /**
   * `wh_…`, kept when the webhook is replaced by name. A webhook deleted and created again gets a
   * new id, so deliveries queued for the old one never reach the new one.
   */
  id: string;
  project: string;
  name: string;
  url: string;
  /** Event types (`run.finished`, …); empty = every event except `trace.scored`. */
  events: string[];
  secret: string;
  disabled: boolean;
  createdAt: string;
  updatedAt: string;
}

/** PENDING (no attempt finished yet), RETRYING, DELIVERED, FAILED (gave up). */
export type DeliveryState = 'PENDING' | 'RETRYING' | 'DELIVERED' | 'FAILED';

export interface NewDelivery {
  /** `whd_…`; ids must sort in creation order (the dispatcher sends oldest first). */
  id: string;
  project: string;
  webhookId: string;
  webhookName: string;
  /** `run.finished`, `trace.scored`, `ping`, … */
  event: string;
  /** The JSON body sent on every attempt. */
  payload: string;
  runId?: string;
  traceId?: string;
  policy?: string;
  /**
   * Sends to this URL, unsigned, instead of the webhook's (a policy's own `alerts[].webhook`);
   * `webhookId` then names the policy alert (`policy:<name>`) and no webhook row is read.
   */
  targetUrl?: string;
  /** Also when the first attempt is due. */
  createdAt: string;
}

export interface DeliveryRecord {
  id: string;
  project: string;
  webhookId: string;
  webhookName: string;
  event: string;
  state: DeliveryState;
  /** Attempts started, the one in flight included. */
  attempts: number;
  /** Unfinished deliveries only. */
  nextAttemptAt?: string;
  /** HTTP status of the last answered attempt. */
  lastStatus?: number;
  /** Why the last attempt failed; safe text (no secrets, no payload). */
  lastError?: string;
  runId?: string;
  traceId?: string;
  policy?: string;
  /** A policy alert's own URL (see `NewDelivery.targetUrl`). */
  targetUrl?: string;
  createdAt: string;
  finishedAt?: string;
}

/** A delivery claimed for one attempt. */
export interface ClaimedDelivery extends DeliveryRecord {
  payload: string;
  /** The attempt this claim owns (1-based); the fencing token for `finishAttempt`. */
  attempt: number;
}

export type AttemptOutcome =
  | { state: 'DELIVERED'; status: number }
  | { state: 'FAILED'; status?: number; error: string }
  | { state: 'RETRYING'; status?: number; error: string; nextAttemptAt: number };

/** Caps what one claim takes per webhook, so one slow receiver cannot take every slot. */
export interface PerWebhookLimit {
  /** Deliveries of one webhook in flight at once. */
  max: number;
  /** In flight now, by webhook id. */
  inFlight: ReadonlyMap<string, number>;
}

export interface WebhookStore {
  /**
   * Creates the webhook, or replaces the one with the same (project, name), keeping its id and
   * createdAt. `id` is used only when it is created. Returns the stored webhook.
   */
  upsert(
    webhook: Omit<WebhookRecord, 'createdAt' | 'updatedAt'>,
    now: number,
  ): Promise<{ webhook: WebhookRecord; created: boolean }>;
  get(project: string, name: string): Promise<WebhookRecord | undefined>;
  getByIds(ids: readonly string[]): Promise<WebhookRecord[]>;
  /** Webhooks of one project by name. Throws INVALID_ARGUMENT for a malformed page token. */
  list(project: string, page: PageRequest): Promise<Page<WebhookRecord>>;
  /** Every webhook of a project that is not disabled (what an event is matched against). */
  listEnabled(project: string): Promise<WebhookRecord[]>;
  /** Returns false when there was none. Its deliveries stay (and fail when due). */
  delete(project: string, name: string): Promise<boolean>;

  enqueue(deliveries: readonly NewDelivery[]): Promise<void>;
  /**
   * Claims up to `limit` due deliveries (unfinished, `nextAttemptAt <= now`, fewer than
   * `maxAttempts` attempts), oldest first: each gets one more attempt and is hidden until
   * `hideUntil`, after which it is due again (a sender that died mid-attempt). One conditional
   * statement, so two callers never claim the same attempt.
   */
  claimDue(
    now: number,
    limit: number,
    maxAttempts: number,
    hideUntil: number,
    perWebhook?: PerWebhookLimit,
  ): Promise<ClaimedDelivery[]>;
  /**
   * Marks due deliveries that already used `maxAttempts` attempts (the last one was lost with its
   * sender) FAILED. Returns how many.
   */
  failExhausted(now: number, maxAttempts: number, error: string): Promise<number>;
  /**
   * Records the outcome of `attempt`. Returns false, changing nothing, when the delivery is
   * finished or was claimed again since (a stale sender).
   */
  finishAttempt(
    id: string,
    attempt: number,
    outcome: AttemptOutcome,
    now: number,
  ): Promise<boolean>;
  /**
   * Records several successful attempts in one statement (the common case, batched). Returns the
   * ids recorded; the others were finished or claimed again since.
   */
  finishDelivered(
    delivered: readonly { id: string; attempt: number; status: number }[],
    now: number,
  ): Promise<string[]>;
  /** One webhook's deliveries, newest first. */
  listDeliveries(webhookId: string, page: PageRequest): Promise<Page<DeliveryRecord>>;
  /** Deletes up to `limit` deliveries finished before `before`; returns how many. */
  pruneFinished(before: number, limit: number): Promise<number>;
  /** Unfinished deliveries: how many, and when the oldest was enqueued. */
  queueStats(): Promise<{ depth: number; oldestCreatedAt?: string }>;
}

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
  /** Queued items, and when the oldest was queued. */
  stats(): Promise<{ depth: number; oldestCreatedAt?: number }>;
}

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
  /** The policies that already have results for this trace version. */
  scoredPolicies(project: string, traceId: string, digest: string): Promise<Set<string>>;
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

/** A point of a policy metric's window (pass/fail as 1/0, numbers as is). */
export interface MetricPoint {
  project: string;
  policy: string;
  metric: string;
  at: number;
  value: number;
}

export interface AlertState {
  project: string;
  policy: string;
  metric: string;
  firing: boolean;
  /** The window mean and size at the last transition (or evaluation). */
  mean: number;
  n: number;
  /** When `firing` last changed. */
  changedAt: number;
}

/** An alert that fired or resolved, with the window it saw and the threshold then. */
export interface AlertTransition {
  project: string;
  policy: string;
  metric: string;
  at: number;
  firing: boolean;
  mean: number;
  n: number;
  below: number;
}

export interface AlertStore {
  addPoints(points: readonly MetricPoint[]): Promise<void>;
  /** Mean and count of a metric's points at or after `since` (mean 0 when there are none). */
  window(
    project: string,
    policy: string,
    metric: string,
    since: number,
  ): Promise<{ mean: number; n: number }>;
  /**
   * The alert's state, locked for the rest of the transaction (row lock on PostgreSQL), so two
   * replicas adding points at once decide the transition once. Undefined before the first one.
   */
  lockState(project: string, policy: string, metric: string): Promise<AlertState | undefined>;
  saveState(state: AlertState): Promise<void>;
  /** Every alert state (the gauges). */
  states(): Promise<AlertState[]>;
  /** One project's alert states, by policy and metric. */
  statesOf(project: string): Promise<AlertState[]>;
  /** Records a transition (call in the transaction that saved the new state). */
  addTransition(transition: AlertTransition): Promise<void>;
  /** A project's transitions in [since, until), oldest first, at most `limit`. */
  transitions(
    project: string,
    filter: { policy?: string; since: number; until: number },
    limit: number,
  ): Promise<AlertTransition[]>;
  /**
   * Deletes one metric's points older than `before` (its window's start), so the table holds
   * only what windows can still read. Returns how many.
   */
  trimWindow(project: string, policy: string, metric: string, before: number): Promise<number>;
}

/** Judge tokens spent per policy and UTC day (the optional daily budget). */
export interface JudgeBudgetStore {
  add(project: string, policy: string, day: string, tokens: number): Promise<void>;
  used(project: string, policy: string, day: string): Promise<number>;
}

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

export type SourcePhase = 'backfilling' | 'tailing' | 'paused' | 'error';

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

/** A run's status: pending → running → one of the four final ones (DECISIONS "States"). */
export type RunStatus =
  | 'RUN_STATUS_PENDING'
  | 'RUN_STATUS_RUNNING'
  | 'RUN_STATUS_SUCCEEDED'
  | 'RUN_STATUS_FAILED'
  | 'RUN_STATUS_ERROR'
  | 'RUN_STATUS_CANCELLED';

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

/** Where an Idempotency-Key applies: one caller, one operation, one key. */
export interface IdempotencyScope {
  /** The API key id, `<kind>:<subject>` for other identities, or `anonymous` without auth. */
  principal: string;
  /** A stable operation name (`runs.create`, `webhooks.apply`, …). */
  operation: string;
  /** The Idempotency-Key as sent. */
  key: string;
}

/**
 * `in_flight`: a request holds the key and runs; `completed`: its outcome is stored for replay;
 * `uncertain`: the request ended without anyone knowing whether its write happened.
 */
export type IdempotencyState = 'in_flight' | 'completed' | 'uncertain';

/** A stored outcome: what a replay answers. */
export interface IdempotencyOutcome {
  /** HTTP status; 0 marks a stored error (body: `{code, message, details}`) of a non-HTTP caller. */
  status: number;
  /** Only what a replay needs (`content-type`). */
  headers: Record<string, string>;
  body: Uint8Array;
  /** Top-level response fields left out of `body` because they are returned only once. */
  withheld?: string[];
}

/** A new in-flight reservation. Times are epoch ms. */
export interface IdempotencyReservation extends IdempotencyScope {
  /** Digest of the request (method, path, query, body): a changed payload has another. */
  digest: string;
  /** Fencing token: only its holder may complete, release or renew the reservation. */
  token: string;
  createdAt: number;
  expiresAt: number;
}

export interface IdempotencyRecord extends IdempotencyReservation {
  state: IdempotencyState;
  /** The holder's last sign of life (in flight); a holder that stops renewing it died. */
  heartbeatAt: number;
  /** Completed records only. */
  outcome?: IdempotencyOutcome;
}

/** Keys held by a (principal, operation) scope and the bytes of their stored outcomes. */
export interface IdempotencyUsage {
  keys: number;
  bytes: number;
}

export interface IdempotencyEviction {
  maxKeys: number;
  maxBytes: number;
  /** In-flight records renewed at or after this (epoch ms) are live and never evicted. */
  liveSince: number;
  /** A key never evicted (the one just completed). */
  keep?: string;
}

/**
 * Idempotency-Key records. Methods that read then write (`lockScope`, `get`, `insert`,
 * `evict`) are meant to run in one transaction; the conditional updates are single statements
 * fenced by the reservation's token.
 */
export interface IdempotencyStore {
  /**
   * Serializes writers of one (principal, operation) scope until the transaction ends (an
   * advisory lock on PostgreSQL; SQLite transactions are serialized already), so eviction and
   * reservation under concurrency see each other. Call inside `withTransaction`.
   */
  lockScope(principal: string, operation: string): Promise<void>;
  get(scope: IdempotencyScope): Promise<IdempotencyRecord | undefined>;
  /** Inserts an in-flight record. Throws ALREADY_EXISTS when the key is taken. */
  insert(reservation: IdempotencyReservation): Promise<void>;
  /**
   * Stores the outcome and its new expiry if `token` still holds the in-flight record; false
   * (nothing written) when it was taken over, evicted or expired meanwhile.
   */
  complete(
    scope: IdempotencyScope,
    token: string,
    outcome: IdempotencyOutcome,
    expiresAt: number,
  ): Promise<boolean>;
  /** In flight under `token` → uncertain. */
  markUncertain(scope: IdempotencyScope, token: string): Promise<boolean>;
  /** In flight or uncertain under `fromToken` → in flight under `toToken`, renewed at `now`. */
  takeOver(
    scope: IdempotencyScope,
    fromToken: string,
    toToken: string,
    now: number,
  ): Promise<boolean>;
  heartbeat(scope: IdempotencyScope, token: string, now: number): Promise<boolean>;
  /** Deletes the in-flight record held by `token` (a retry may then run the request again). */
  release(scope: IdempotencyScope, token: string): Promise<boolean>;
  /** Deletes the record whatever its state (an expired one). */
  delete(scope: IdempotencyScope): Promise<boolean>;
  usage(principal: string, operation: string): Promise<IdempotencyUsage>;
  /**
   * Deletes a scope's oldest records (by creation) until it holds at most `maxKeys` keys and
   * `maxBytes` of outcomes, skipping live in-flight records and `keep`. Returns what remains.
   */
  evict(
    principal: string,
    operation: string,
    limits: IdempotencyEviction,
  ): Promise<IdempotencyUsage & { evicted: number }>;
  /** Deletes up to `limit` records expired at `now`, oldest expiry first; returns how many. */
  deleteExpired(now: number, limit: number): Promise<number>;
}

/**
 * The repositories, each bound to either the store or one transaction. Later areas add theirs
 * here (traces, work items, outbox, …) so one transaction can write all of them.
 */
export interface Repositories {
  readonly dialect: StoreDialect;
  readonly keys: ApiKeyStore;
  readonly leases: LeaseStore;
  readonly traces: TraceStore;
  readonly webhooks: WebhookStore;
  readonly policies: PolicyStore;
  readonly work: WorkQueue;
  readonly results: ResultStore;
  readonly alerts: AlertStore;
  readonly budgets: JudgeBudgetStore;
  readonly sources: SourceStore;
  readonly runs: RunStore;
  readonly idempotency: IdempotencyStore;
}

/** Repositories bound to one open transaction: every call runs inside it. */
export type StoreTransaction = Repositories;

export interface Store extends Repositories {
  /** Throws STORE_UNAVAILABLE when the database does not answer. */
  ping(): Promise<void>;
  /** True when every migration this build knows is recorded as applied. */
  migrationsApplied(): Promise<boolean>;
  /**
   * Runs `fn` in one database transaction: it commits when `fn` resolves and rolls back when it
   * throws (the error is rethrown). Inside `fn`, use only `tx`: using this store (or starting
   * another transaction) there throws STORE_TRANSACTION_MISUSE instead of deadlocking. Keep
   * transactions short and free of outbound calls; on SQLite they serialize every writer.
   */
  withTransaction<T>(fn: (tx: StoreTransaction) => Promise<T>): Promise<T>;
  /** Closes connections. Safe to call twice; later calls to the store throw STORE_CLOSED. */
  close(): Promise<void>;
}
