import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Result } from '../core/index.js';
import type { EvaluationObserver } from '../evaluators/index.js';
import type { GuardDecisionEvent, GuardObserver } from '../guardrails/index.js';
import type { IngestObserver } from '../ingest/index.js';
import type { PolicyEngineObserver } from '../policies/index.js';
import type { SourceObserver, WriteBackObserver } from '../sources/index.js';
import type { StoreObserver } from '../store/index.js';
import type { AttemptResult, WebhookObserver } from '../webhooks/index.js';

/**
 * Prometheus metrics: process metrics, HTTP requests by route and status, evaluator outcomes and
 * durations. One registry per app so tests can build several apps in one process. It implements
 * the observer interfaces the areas declare, so no area imports telemetry.
 */
export class Metrics
  implements
    EvaluationObserver,
    IngestObserver,
    WebhookObserver,
    PolicyEngineObserver,
    SourceObserver,
    WriteBackObserver,
    GuardObserver,
    StoreObserver
{
  readonly registry = new Registry();
  private readonly httpRequests: Counter<'method' | 'route' | 'status'>;
  private readonly httpDuration: Histogram<'method' | 'route' | 'status'>;
  private readonly evalResults: Counter<'evaluator' | 'outcome'>;
  private readonly evalDuration: Histogram<'evaluator'>;
  private readonly spansReceived: Counter;
  private readonly tracesReceived: Counter;
  private readonly spansRejected: Counter<'reason'>;
  private readonly spansStored: Counter;
  private readonly storeDuration: Histogram;
  private readonly tracesCompleted: Counter;
  private readonly webhookAttempts: Counter<'outcome'>;
  private readonly logRecords = this.counter(
    'touchstone_log_records_total',
    'OTLP log records received on /v1/logs, by outcome: stored (GenAI events), rejected (GenAI events without valid ids) or ignored (not GenAI events; accepted, not kept).',
    ['outcome'],
  );
  private readonly policySelected = this.counter(
    'touchstone_policy_traces_selected_total',
    'Traces a policy selector matched (before sampling).',
    ['project', 'policy'],
  );
  private readonly policySampledOut = this.counter(
    'touchstone_policy_traces_sampled_out_total',
    'Selected traces left out by sampling.',
    ['project', 'policy'],
  );
  private readonly policyScored = this.counter(
    'touchstone_policy_traces_scored_total',
    'Trace versions a policy stored results for.',
    ['project', 'policy'],
  );
  private readonly policyResults = this.counter(
    'touchstone_policy_results_total',
    'Evaluator results stored by online policies, by outcome.',
    ['project', 'policy', 'outcome'],
  );
  private readonly policyExpressionErrors = this.counter(
    'touchstone_policy_expression_errors_total',
    'CEL evaluations that failed (counted as "does not select" or "stage skipped"), by field and reason: cost (ran out of its budget) or error.',
    ['project', 'policy', 'field', 'reason'],
  );
  private readonly sourceOverrideErrors = this.counter(
    'touchstone_source_override_errors_total',
    'Source overrides whose CEL failed on a pulled trace (the field is left as it was), by field and reason: cost (ran out of its budget) or error.',
    ['project', 'source', 'field', 'reason'],
  );
  private readonly onlinePostponed = this.counter(
    'touchstone_online_postponed_total',
    'Work items put back for later: rate_limited (a judge asked to wait) or trace_open.',
    ['reason'],
  );
  private readonly sourcePulled = this.counter(
    'touchstone_source_traces_pulled_total',
    'Traces a source stored and handed to policies.',
    ['project', 'source'],
  );
  private readonly sourceSkipped = this.counter(
    'touchstone_source_traces_skipped_total',
    'Traces a source did not store: unchanged since the last read, or missing in the store.',
    ['project', 'source', 'reason'],
  );
  private readonly sourcePullFailures = this.counter(
    'touchstone_source_pull_failures_total',
    'Source pulls that failed (the source backs off).',
    ['project', 'source'],
  );
  private readonly sourceScoresWritten = this.counter(
    'touchstone_source_scores_written_total',
    'Write-backs to a source store by outcome: created, updated, unchanged (skipped) or failed (retried).',
    ['project', 'source', 'outcome'],
  );
  private readonly sourceScoresSkipped = this.counter(
    'touchstone_source_scores_skipped_total',
    "Scores a sink did not write because its store never received the pushed trace (reason trace_not_in_store, after the sink's wait).",
    ['project', 'source', 'reason'],
  );
  private readonly sourceDeadLetters = this.counter(
    'touchstone_source_write_back_dead_letters_total',
    'Write-backs a source store refused for good (401, 403, the trace gone, a refused value): not retried, kept in the source status.',
    ['project', 'source'],
  );
  private readonly requestsShed = this.counter(
    'touchstone_requests_shed_total',
    'Write requests refused with 503 to shed load, by the limit reached: requests or bytes in flight, or queue (waited too long for a turn to store).',
    ['reason'],
  );
  private readonly storeLockWait = this.counter(
    'touchstone_store_lock_wait_seconds_total',
    "Seconds statements of the thread answering requests waited for SQLite's write lock held by another connection (the scoring or completion worker's, another process's): write contention on SQLite. Always 0 on PostgreSQL.",
    [],
  );
  private readonly guardDecisions = this.counter(
    'touchstone_guard_decisions_total',
    'Guard decisions (prompt-guard webhook, external processor) by project, policy, phase, action (allow, mask, reject) and outcome: decided, fail_open (a check could not decide and the policy fails open) or cannot_decide (blocked for it).',
    ['project', 'policy', 'phase', 'action', 'outcome'],
  );
  private readonly guardDuration = new Histogram({
    name: 'touchstone_guard_decision_seconds',
    help: 'Time one guard decision took, by phase (request, response).',
    labelNames: ['phase'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  private readonly onlineFreshness = new Histogram({
    name: 'touchstone_online_freshness_seconds',
    help: 'Time from a trace version being complete to its online results being stored.',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300],
    registers: [this.registry],
  });

  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics !== false) collectDefaultMetrics({ register: this.registry });
    this.httpRequests = new Counter({
      name: 'touchstone_http_requests_total',
      help: 'HTTP requests by method, route template and status code.',
      labelNames: ['method', 'route', 'status'],
      registers: [this.registry],
    });
    this.httpDuration = new Histogram({
      name: 'touchstone_http_request_duration_seconds',
      help: 'HTTP request duration by method, route template and status code.',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [this.registry],
    });
    this.evalResults = new Counter({
      name: 'touchstone_evaluator_results_total',
      help: 'Evaluator results by evaluator type and outcome.',
      labelNames: ['evaluator', 'outcome'],
      registers: [this.registry],
    });
    this.evalDuration = new Histogram({
      name: 'touchstone_evaluator_duration_seconds',
      help: 'Time one evaluator took on one record, by evaluator type.',
      labelNames: ['evaluator'],
      buckets: [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
      registers: [this.registry],
    });
    this.spansReceived = new Counter({
      name: 'touchstone_spans_received_total',
      help: 'Spans received over OTLP and accepted for storage (after validation).',
      registers: [this.registry],
    });
    this.tracesReceived = new Counter({
      name: 'touchstone_traces_received_total',
      help: 'Traces touched by received spans (one per trace per request).',
      registers: [this.registry],
    });
    this.spansRejected = new Counter({
      name: 'touchstone_spans_rejected_total',
      help: 'Spans refused one by one (partial success), by reason.',
      labelNames: ['reason'],
      registers: [this.registry],
    });
    this.spansStored = new Counter({
      name: 'touchstone_spans_stored_total',
      help: 'Spans durably stored.',
      registers: [this.registry],
    });
    this.storeDuration = new Histogram({
      name: 'touchstone_ingest_store_duration_seconds',
      help: 'Time to store the spans of one ingest request (the transaction).',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [this.registry],
    });
    this.tracesCompleted = new Counter({
      name: 'touchstone_traces_completed_total',
      help: 'Traces completed (root ended + grace, idle timeout or max age).',
      registers: [this.registry],
    });
    this.webhookAttempts = new Counter({
      name: 'touchstone_webhook_attempts_total',
      help: 'Webhook delivery attempts by outcome: delivered, retry (another is due) or failed (gave up).',
      labelNames: ['outcome'],
      registers: [this.registry],
    });
    // Zero series from the start, so rate() and alerts see every outcome before it first happens.
    for (const outcome of ['delivered', 'retry', 'failed'])
      this.webhookAttempts.inc({ outcome }, 0);
    for (const reason of ['requests', 'bytes', 'queue']) this.requestsShed.inc({ reason }, 0);
  }

  /** A statement waited for SQLite's write lock (the store's main-thread connection). */
  onLockWait(seconds: number): void {
    this.storeLockWait.inc(seconds);
  }

  /** A write request refused to shed load (the edge's admission control). */
  onShed(reason: 'requests' | 'bytes' | 'queue'): void {
    this.requestsShed.inc({ reason });
  }

  onReceived(spans: number, traces: number): void {
    this.spansReceived.inc(spans);
    this.tracesReceived.inc(traces);
  }

  onRejected(reason: string, spans: number): void {
    this.spansRejected.inc({ reason }, spans);
  }

  onStored(spans: number, seconds: number): void {
    this.spansStored.inc(spans);
    this.storeDuration.observe(seconds);
  }

  onCompleted(traces: number): void {
    this.tracesCompleted.inc(traces);
  }

  onLogRecords(outcome: 'stored' | 'rejected' | 'ignored', records: number): void {
    this.logRecords.inc({ outcome }, records);
  }

  onWebhookAttempt(outcome: AttemptResult): void {
    this.webhookAttempts.inc({ outcome });
  }

  private counter<L extends string>(name: string, help: string, labelNames: readonly L[]) {
    return new Counter<L>({ name, help, labelNames, registers: [this.registry] });
  }

  onOverrideError(project: string, source: string, field: string, reason: string): void {
    this.sourceOverrideErrors.inc({ project, source, field, reason });
  }

  onPulled(project: string, source: string, traces: number): void {
    this.sourcePulled.inc({ project, source }, traces);
  }

  onSkipped(project: string, source: string, reason: 'missing' | 'unchanged'): void {
    this.sourceSkipped.inc({ project, source, reason });
  }

  onPullFailed(project: string, source: string): void {
    this.sourcePullFailures.inc({ project, source });
  }

  onWritten(
    project: string,
    source: string,
    outcome: 'created' | 'updated' | 'unchanged' | 'failed',
  ): void {
    this.sourceScoresWritten.inc({ project, source, outcome });
  }

  onDeadLettered(project: string, source: string): void {
    this.sourceDeadLetters.inc({ project, source });
  }

  onWriteSkipped(project: string, source: string, reason: 'trace_not_in_store'): void {
    this.sourceScoresSkipped.inc({ project, source, reason });
  }

  onSelected(project: string, policy: string): void {
    this.policySelected.inc({ project, policy });
  }

  onSampledOut(project: string, policy: string): void {
    this.policySampledOut.inc({ project, policy });
  }

  onScored(project: string, policy: string, results: readonly Result[]): void {
    this.policyScored.inc({ project, policy });
    for (const r of results) this.policyResults.inc({ project, policy, outcome: r.outcome });
  }

  onExpressionError(project: string, policy: string, field: string, reason: string): void {
    this.policyExpressionErrors.inc({ project, policy, field, reason });
  }

  onFreshness(seconds: number): void {
    this.onlineFreshness.observe(seconds);
  }

  onPostponed(reason: 'rate_limited' | 'trace_open'): void {
    this.onlinePostponed.inc({ reason });
  }

  /** A gauge read from the database at scrape time, so every replica reports the same value. */
  gauge(name: string, help: string, read: () => Promise<number>): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      async collect() {
        this.set(await read());
      },
    });
  }

  /** A labelled gauge read at scrape time; series not returned by `read` are dropped. */
  labelledGauge<L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    read: () => Promise<{ labels: Record<L, string>; value: number }[]>,
  ): void {
    new Gauge<L>({
      name,
      help,
      labelNames,
      registers: [this.registry],
      async collect() {
        const series = await read();
        this.reset();
        for (const s of series) this.set(s.labels as Partial<Record<L, string>>, s.value);
      },
    });
  }

  onGuardDecision(e: GuardDecisionEvent): void {
    const { project, policy, phase, action, outcome } = e;
    this.guardDecisions.inc({ project, policy, phase, action, outcome });
    this.guardDuration.observe({ phase }, e.seconds);
  }

  onResult(type: string, outcome: string, durationMs: number): void {
    this.evalResults.inc({ evaluator: type, outcome });
    this.evalDuration.observe({ evaluator: type }, durationMs / 1000);
  }

  /** One HTTP response, under its route template (never the raw URL: bounded label values). */
  onHttpResponse(method: string, route: string, status: number, seconds: number): void {
    const labels = { method, route, status: String(status) };
    this.httpRequests.inc(labels);
    this.httpDuration.observe(labels, seconds);
  }
}
