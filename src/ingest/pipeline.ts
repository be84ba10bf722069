import { createHash } from 'node:crypto';
import type {
  Attributes,
  Clock,
  DetachedEvents,
  EvalRecord,
  NormalizedTrace,
  Span,
} from '../core/index.js';
import { encodeAppend } from '../store/append-encoding.js';
import type {
  CompletionRules,
  EncodedAppend,
  NewWorkItem,
  PendingTrace,
  SourceTrace,
  SpanBatch,
  Store,
} from '../store/index.js';
import { DEFAULT_SPAN_LIMITS, limitSpans, type SpanLimits } from './limits.js';
import type { DecodedLogs, DecodedSpans, RejectedSpan } from './types.js';

/**
 * The ingest pipeline: decoded spans → limits → redaction → durable write (spans + trace rows, one
 * transaction per request) → acknowledged. A request that brings a whole trace (its root and every
 * span it references, as the SDKs' one-span traces and most exporters' batches do) completes it in
 * that transaction, with its work item. Other traces complete later, from database state, in the
 * TraceCompleter, so a restart loses nothing and re-finds open traces.
 */

/** What the pipeline needs of redaction (src/redaction's Redactor fits it). */
export interface SpanRedactor {
  redactSpans(spans: Span[]): Span[];
  /** What `redactSpans` does to each event's attributes (log events get the same). */
  redactAttributes(attributes: Attributes): Attributes;
  redactSpansInSlices(spans: Span[], pause: () => Promise<void>): Promise<Span[]>;
  redactLabels(labels: Record<string, string>): Record<string, string>;
}

/** Counters the pipeline reports (the HTTP edge turns them into Prometheus metrics). */
export interface IngestObserver {
  onReceived(spans: number, traces: number): void;
  onRejected(reason: string, spans: number): void;
  onStored(spans: number, seconds: number): void;
  onCompleted(traces: number): void;
  /** OTLP log records: GenAI events stored, refused, or accepted and not kept. */
  onLogRecords?(outcome: 'stored' | 'rejected' | 'ignored', records: number): void;
}

export interface IngestTarget {
  project: string;
  /** Labels from the ingest door (API key labels; a source's labels). */
  labels: Record<string, string>;
  /** Source name for pulled traces, '' for pushed ones. */
  source: string;
}

export interface IngestResult {
  accepted: number;
  rejected: number;
  rejectReasons: string[];
  /** Which spans were refused (position and ids), when the decoder listed them. */
  rejectedSpans: RejectedSpan[];
}

export interface IngestDeps {
  store: Store;
  redactor: SpanRedactor;
  clock: Clock;
  observer?: IngestObserver;
  /** `traces.limits`; the defaults when absent. */
  limits?: SpanLimits;
  /**
   * The completer's normalizer: given, whole traces are completed on arrival; absent, every trace
   * waits for the completer.
   */
  normalize?: TraceNormalizer;
  /** After a request completed traces on arrival (wakes the online engine). */
  onCompleted?: (traces: number) => void;
}

/**
 * Milliseconds of normalizing whole traces between two pauses of a request: one bringing
 * thousands of traces, or traces whose spans share a large resource, lets other requests (and
 * health checks) in every few milliseconds.
 */
const NORMALIZE_SLICE_MS = 4;

/**
 * Spans of the largest trace completed on arrival. Normalizing one trace cannot be sliced, and a
 * trace of tens of thousands of spans would hold the thread answering requests (and health
 * checks) for a good part of a second; such rare traces are left to the completer's worker.
 */
export const MAX_WHOLE_SPANS = 1000;

/**
 * Whether a trace's spans in one request are the whole trace: exactly one root, every parent
 * among them, no span id twice (the store keeps the last copy of a span sent twice; the
 * completer is left to read which).
 */
export function isWholeTrace(spans: readonly Span[]): boolean {
  if (spans.length === 1) return spans[0]!.parentSpanId === '';
  const ids = new Set<string>();
  let roots = 0;
  for (const span of spans) {
    if (ids.has(span.spanId)) return false;
    ids.add(span.spanId);
    if (span.parentSpanId === '') roots++;
  }
  if (roots !== 1) return false;
  for (const span of spans) {
    if (span.parentSpanId !== '' && !ids.has(span.parentSpanId)) return false;
  }
  return true;
}

/** Lets timers and I/O (other requests, health checks) run before going on. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** What preparing spans to store needs: no store, no clock (a worker thread has its own copy). */
export interface PrepareDeps {
  redactor: SpanRedactor;
  limits: SpanLimits;
  /** As IngestDeps.normalize: given, whole traces are completed on arrival. */
  normalize?: TraceNormalizer;
}

/** A request's spans ready to store: what is left is the statements (`IngestService.store`). */
export interface PreparedSpans {
  result: IngestResult;
  /** Traces the accepted spans belong to. */
  traces: number;
  encoded: EncodedAppend;
}

/**
 * Everything of storing decoded spans but the statements: the limits, redaction, whole traces
 * normalized and digested (as the completer would from their stored chunks, given the same spans
 * and ingest labels), and the rows encoded. With `pause`, awaited every few milliseconds of
 * redacting, normalizing and encoding, so that a large request lets others in (on the thread
 * answering requests); without, run through (a worker thread).
 */
export async function prepareSpans(
  deps: PrepareDeps,
  target: IngestTarget,
  decoded: DecodedSpans,
  pause: (() => Promise<void>) | undefined,
): Promise<PreparedSpans> {
  const result = {
    accepted: decoded.spans.length,
    rejected: decoded.rejected,
    rejectReasons: decoded.rejectReasons,
    rejectedSpans: decoded.rejectedSpans ?? [],
  };
  if (decoded.spans.length === 0) {
    return { result, traces: 0, encoded: { resources: [], chunks: [], traces: [] } };
  }
  // Decoders given the limits dropped what was over the counts already; this cuts the keys and
  // names, and holds spans decoded without limits to them.
  const limited = limitSpans(decoded.spans, deps.limits);
  // In slices: a request of megabytes of text must not hold the event loop while it is scanned.
  const spans =
    pause === undefined
      ? deps.redactor.redactSpans(limited)
      : await deps.redactor.redactSpansInSlices(limited, pause);
  const labels = deps.redactor.redactLabels(target.labels);
  const byTrace = new Map<string, Span[]>();
  for (const span of spans) {
    const list = byTrace.get(span.traceId);
    if (list === undefined) byTrace.set(span.traceId, [span]);
    else list.push(span);
  }
  const batches = await batchesOf(deps.normalize, target, byTrace, labels, pause);
  return { result, traces: byTrace.size, encoded: await encodeAppend(batches, pause) };
}

/** One batch per trace; whole traces normalized and digested. */
async function batchesOf(
  normalize: TraceNormalizer | undefined,
  target: IngestTarget,
  byTrace: Map<string, Span[]>,
  labels: Record<string, string>,
  pause: (() => Promise<void>) | undefined,
): Promise<SpanBatch[]> {
  const out: SpanBatch[] = [];
  let sliceStart = performance.now();
  for (const [traceId, list] of byTrace) {
    const batch: SpanBatch = {
      project: target.project,
      traceId,
      spans: list,
      labels,
      source: target.source,
    };
    if (normalize !== undefined && list.length <= MAX_WHOLE_SPANS && isWholeTrace(list)) {
      const trace = normalize(list, {
        project: target.project,
        traceId,
        // The version stamp of a stored row: nothing is stored yet, and normalizing reads none.
        lastSpanAt: 0,
        labels,
        source: target.source,
      });
      const { json, digest } = serializedRecord(trace.record);
      batch.whole = { trace, digest, recordJson: json };
      if (pause !== undefined && performance.now() - sliceStart >= NORMALIZE_SLICE_MS) {
        await pause();
        sliceStart = performance.now();
      }
    }
    out.push(batch);
  }
  return out;
}

export class IngestService {
  /** `traces.limits`: the OTLP route hands them to the decoders too (see DecodeOptions.limits). */
  readonly limits: SpanLimits;

  constructor(private readonly deps: IngestDeps) {
    this.limits = deps.limits ?? DEFAULT_SPAN_LIMITS;
  }

  /** Redacts and stores decoded spans; resolves only once they are durably written. */
  async ingest(target: IngestTarget, decoded: DecodedSpans): Promise<IngestResult> {
    return this.store(target, await prepareSpans(this.preparing, target, decoded, nextTurn));
  }

  /** What `prepareSpans` needs, as this service has it (the OTLP route's worker threads too). */
  get preparing(): PrepareDeps {
    const { redactor, normalize } = this.deps;
    return { redactor, limits: this.limits, ...(normalize === undefined ? {} : { normalize }) };
  }

  /**
   * Stores spans made ready by `prepareSpans` (here, or in a worker thread): one transaction
   * for the request, with the work items of the traces it completed; resolves only once they are
   * durably written.
   */
  async store(target: IngestTarget, prepared: PreparedSpans): Promise<IngestResult> {
    const { observer } = this.deps;
    const { result } = prepared;
    if (result.rejected > 0) observer?.onRejected('invalid_span', result.rejected);
    if (result.accepted === 0) return result;
    observer?.onReceived(result.accepted, prepared.traces);
    const started = performance.now();
    const completed = await this.deps.store.withTransaction(async (tx) => {
      const now = this.deps.clock.now();
      const done = (await tx.traces.appendEncoded(prepared.encoded, now, { pause: nextTurn }))
        .completed;
      // Each completed trace gets its online-scoring work item in the transaction that stores it,
      // as the completer's do — in projects with a policy: a policy applies to traces completed
      // after it, and one applied before this transaction is seen by it.
      if (
        done.length > 0 &&
        (await tx.policies.projectsWithPolicies([target.project])).has(target.project)
      ) {
        const items: NewWorkItem[] = done.map((d) => ({
          project: d.project,
          traceId: d.traceId,
          digest: d.digest,
          policy: '',
          replace: false,
          traceCompletedAt: now,
          traceFirstSeenAt: d.firstSeenAt,
        }));
        await tx.work.enqueue(items, now);
      }
      return done.length;
    });
    if (completed > 0) {
      observer?.onCompleted(completed);
      this.deps.onCompleted?.(completed);
    }
    observer?.onStored(result.accepted, (performance.now() - started) / 1000);
    return result;
  }

  /**
   * GenAI events from OTLP log records → redaction (the rules span events get) → stored with
   * their traces as detached events, in one transaction, before the answer. They stay apart from
   * the spans until the trace is read: their span may arrive before them, after them, or not yet.
   */
  async ingestLogs(target: IngestTarget, decoded: DecodedLogs): Promise<LogIngestResult> {
    const { observer, redactor, store, clock } = this.deps;
    if (decoded.rejected > 0) observer?.onLogRecords?.('rejected', decoded.rejected);
    if (decoded.ignored > 0) observer?.onLogRecords?.('ignored', decoded.ignored);
    const result = {
      rejected: decoded.rejected,
      rejectReasons: decoded.rejectReasons,
      ignored: decoded.ignored,
    };
    if (decoded.events.length === 0) return result;
    // trace id → span id → its events, in request order.
    const byTrace = new Map<string, Map<string, DetachedEvents>>();
    for (const { traceId, spanId, event } of decoded.events) {
      let spans = byTrace.get(traceId);
      if (spans === undefined) {
        spans = new Map();
        byTrace.set(traceId, spans);
      }
      const redacted = { ...event, attributes: redactor.redactAttributes(event.attributes) };
      const known = spans.get(spanId);
      if (known === undefined) spans.set(spanId, { spanId, events: [redacted] });
      else known.events.push(redacted);
    }
    const labels = redactor.redactLabels(target.labels);
    const batches: SpanBatch[] = [...byTrace].map(([traceId, spans]) => ({
      project: target.project,
      traceId,
      spans: [],
      detachedEvents: [...spans.values()],
      labels,
      source: target.source,
    }));
    await store.withTransaction((tx) => tx.traces.appendSpans(batches, clock.now()));
    observer?.onLogRecords?.('stored', decoded.events.length);
    return result;
  }
}

export interface LogIngestResult {
  rejected: number;
  rejectReasons: string[];
  /** Log records that are not GenAI events: accepted, not kept. */
  ignored: number;
}

/** A whole trace read from an external store (a trace source), stored as complete at once. */
export interface PulledTrace {
  project: string;
  traceId: string;
  /** The source's name (label `source`) and its `traceLabels`. */
  source: string;
  labels: Record<string, string>;
  /** Every span of the trace as the store holds it (not yet redacted). */
  spans: Span[];
  /**
   * The trace's row in the source's index (its store id and version), saved in the transaction
   * that stores the trace: whoever scores the trace next (another turn of this event loop, or
   * another replica) finds the store id to write its scores back to.
   */
  index?: SourceTrace;
}

/**
 * Stores pulled traces: the ingest limits and redaction first, then — in one transaction — the spans, the completed
 * trace (normalized, with the source's overrides applied) and, when its content changed, its
 * work item. Unlike pushed spans there is nothing to wait for: the store said the trace ended.
 */
export class PulledTraceWriter {
  constructor(
    private readonly deps: {
      store: Store;
      redactor: SpanRedactor;
      clock: Clock;
      normalize: TraceNormalizer;
      observer?: IngestObserver;
      /** `traces.limits`; the defaults when absent. */
      limits?: SpanLimits;
    },
  ) {}

  /** Returns whether the trace's content changed (queued for scoring when its project has a policy). */
  async write(
    trace: PulledTrace,
    adjust?: (normalized: NormalizedTrace) => NormalizedTrace,
  ): Promise<boolean> {
    const { store, observer } = this.deps;
    const { spans, labels, pending, normalized } = await this.prepare(trace, adjust);
    const now = pending.lastSpanAt;
    const { json, digest } = serializedRecord(normalized.record);
    observer?.onReceived(spans.length, 1);
    const changed = await store.withTransaction(async (tx) => {
      await tx.traces.appendSpans(
        [{ project: trace.project, traceId: trace.traceId, spans, labels, source: trace.source }],
        now,
        { pause: nextTurn },
      );
      const result = await tx.traces.complete(pending, normalized, digest, now, json);
      if (trace.index !== undefined) await tx.sources.saveTraces([trace.index]);
      const queue =
        result.changed &&
        (await tx.policies.projectsWithPolicies([trace.project])).has(trace.project);
      if (queue) {
        await tx.work.enqueue(
          [
            {
              project: trace.project,
              traceId: trace.traceId,
              digest,
              policy: '',
              replace: false,
              traceCompletedAt: now,
            },
          ],
          now,
        );
      }
      return result.changed;
    });
    observer?.onStored(spans.length, 0);
    return changed;
  }

  /**
   * The trace's record as it would be stored (limits, redaction, normalization, overrides), and
   * nothing stored: a scheduled source's window snapshot.
   */
  async snapshot(
    trace: PulledTrace,
    adjust?: (normalized: NormalizedTrace) => NormalizedTrace,
  ): Promise<EvalRecord> {
    return (await this.prepare(trace, adjust)).normalized.record;
  }

  private async prepare(
    trace: PulledTrace,
    adjust?: (normalized: NormalizedTrace) => NormalizedTrace,
  ) {
    const { redactor, clock } = this.deps;
    const limited = limitSpans(trace.spans, this.deps.limits ?? DEFAULT_SPAN_LIMITS);
    // In slices, as pushed spans are: a pulled trace of megabytes of text must not hold the event
    // loop (health checks, requests) while it is scanned.
    const spans = await redactor.redactSpansInSlices(limited, nextTurn);
    const labels = redactor.redactLabels({ ...trace.labels, source: trace.source });
    const pending: PendingTrace = {
      project: trace.project,
      traceId: trace.traceId,
      lastSpanAt: clock.now(),
      labels,
      source: trace.source,
    };
    let normalized = this.deps.normalize(spans, pending);
    if (adjust !== undefined) normalized = adjust(normalized);
    return { spans, labels, pending, normalized };
  }
}

/**
 * A record's JSON, as the store keeps it, and its sha256 digest, taken of that JSON (equal
 * records, equal digests: late duplicate spans change nothing). One serialization for both: each
 * record used to be serialized twice, once for its digest and once to store.
 */
export function serializedRecord(record: EvalRecord): { json: string; digest: string } {
  const json = JSON.stringify(record);
  return { json, digest: createHash('sha256').update(json).digest('hex') };
}

/** Turns a completed trace's spans into its Record and summary (src/ingest/conventions). */
export type TraceNormalizer = (spans: Span[], pending: PendingTrace) => NormalizedTrace;

export interface CompleterDeps {
  store: Store;
  clock: Clock;
  rules: CompletionRules;
  normalize: TraceNormalizer;
  observer?: IngestObserver;
  logger?: { warn(obj: object, msg: string): void };
  /**
   * `traces.limits.max_events_per_span`, which also caps the events (OTLP log records) joined to a
   * span when it is read; the default limit when absent.
   */
  maxEventsPerSpan?: number;
  /** Poll interval; default 250 ms. */
  intervalMs?: number;
  /**
   * Traces per completion transaction; default 50. On SQLite the transaction holds the one write
   * lock that ingest requests wait for: 200 made the server store 22–28k spans/s, 50 made it
   * 24–32k (docs/performance.md), 25 paid more per transaction than it saved in waiting.
   */
  batchSize?: number;
}

/**
 * Finishes open traces when a completion rule fires (root ended + grace, idle, max age). Runs on
 * every replica: completion is a conditional update, so two completers never both apply stale data.
 */
export class TraceCompleter {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly deps: CompleterDeps) {}

  start(): void {
    if (this.stopped || this.timer !== undefined) return;
    const interval = this.deps.intervalMs ?? 250;
    this.timer = setInterval(() => {
      if (this.running === undefined) {
        this.running = this.tick()
          .then(() => undefined)
          .catch((err: unknown) =>
            this.deps.logger?.warn({ err }, 'trace completion failed; retrying'),
          )
          .finally(() => {
            this.running = undefined;
          });
      }
    }, interval);
    this.timer.unref();
  }

  /** Stops the loop and waits for a pass in progress. Safe twice and before start. */
  async shutdown(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /**
   * Completes every trace that is due now; returns how many were completed. Works in batches: one
   * read for the spans of a batch, one transaction for its completions, and a yield to the event
   * loop between batches so ingest requests are not starved.
   */
  async tick(): Promise<number> {
    const { store, clock, rules } = this.deps;
    const size = this.deps.batchSize ?? 50;
    let total = 0;
    for (;;) {
      const due = await store.traces.dueForCompletion(clock.now(), rules, size);
      if (due.length === 0 || this.stopped) return total;
      const spans = await store.traces.spansOf(due, {
        maxEventsPerSpan: this.deps.maxEventsPerSpan ?? DEFAULT_SPAN_LIMITS.maxEventsPerSpan,
      });
      const done = due.map((pending, i) => {
        const normalized = this.deps.normalize(spans[i] ?? [], pending);
        const { json, digest } = serializedRecord(normalized.record);
        return { pending, normalized, digest, json };
      });
      // A changed version gets its online-scoring work item in the transaction that stores it, so
      // a stored trace is never left unqueued (DESIGN §1) — in projects that have a policy: with
      // none, nothing would score it (policies apply to traces completed after them).
      const progressed = await store.withTransaction(async (tx) => {
        const now = clock.now();
        const scored = await tx.policies.projectsWithPolicies(due.map((d) => d.project));
        const items: NewWorkItem[] = [];
        let completed = 0;
        for (const d of done) {
          const result = await tx.traces.complete(d.pending, d.normalized, d.digest, now, d.json);
          if (!result.completed) continue;
          completed++;
          if (result.changed && scored.has(d.pending.project)) {
            items.push({
              project: d.pending.project,
              traceId: d.pending.traceId,
              digest: d.digest,
              policy: '',
              replace: false,
              traceCompletedAt: now,
            });
          }
        }
        if (items.length > 0) await tx.work.enqueue(items, now);
        return completed;
      });
      total += progressed;
      this.deps.observer?.onCompleted(progressed);
      if (due.length < size || progressed === 0) return total;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
}
