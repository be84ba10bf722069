import type { FailureReason } from '../cel/index.js';
import type { Config } from '../config/index.js';
import { type InProcessLoop, LoopWorker, type Result } from '../core/index.js';
import type { EvaluationObserver } from '../evaluators/index.js';
import type { TraceCompleter } from '../ingest/index.js';
import type { PolicyEngine, PolicyEngineObserver } from '../policies/index.js';
import type { CompletionRules } from '../store/index.js';

/**
 * The worker's heap limits, as the completion worker's (src/ingest/completer-thread.ts): an
 * old-generation limit under 2 GB keeps V8 collecting close to the live size. A batch that needs
 * more ends the worker, and scoring goes on in-process.
 */
const RESOURCE_LIMITS = { maxOldGenerationSizeMb: 1024, maxYoungGenerationSizeMb: 16 };

/** What the scoring worker builds its engine from: the server config and the environment. */
export interface ScoringWorkerData {
  config: Readonly<Config>;
  /** For credential references (`credential: {env: VAR}`) of judges. */
  env: Record<string, string | undefined>;
  /** How often forwarded metrics are sent (default 100 ms). */
  flushMs?: number;
  /**
   * Trace completion runs in this worker too, with these rules, instead of in a worker of its
   * own (one isolate less: see ScoringThreadDeps.completer).
   */
  completion?: {
    rules: CompletionRules;
    /** `traces.limits.max_events_per_span` (see CompleterDeps). */
    maxEventsPerSpan: number;
    intervalMs?: number;
  };
}

/**
 * One observer call, forwarded to the main thread's Metrics. Results travel as their outcomes
 * only: that is all the counters read.
 */
export type ObserverCall =
  | ['selected', string, string]
  | ['sampledOut', string, string]
  | ['scored', string, string, Result['outcome'][]]
  | ['expressionError', string, string, string, FailureReason]
  | ['freshness', number]
  | ['postponed', 'rate_limited' | 'trace_open']
  | ['result', string, Result['outcome'], number];

export type ToScoringWorker = { type: 'wake' } | { type: 'invalidate' } | { type: 'stop' };

export type FromScoringWorker =
  | { type: 'ready' }
  | { type: 'metrics'; calls: ObserverCall[] }
  | { type: 'webhooks-enqueued' }
  | { type: 'completed'; traces: number };

/** What forwarded calls are applied to (the server's Metrics). */
export type ScoringObserver = PolicyEngineObserver & EvaluationObserver;

/** Replays a batch of forwarded calls on the main thread's observer. */
export function applyObserverCalls(
  observer: ScoringObserver,
  calls: readonly ObserverCall[],
): void {
  for (const call of calls) {
    switch (call[0]) {
      case 'selected':
        observer.onSelected(call[1], call[2]);
        break;
      case 'sampledOut':
        observer.onSampledOut(call[1], call[2]);
        break;
      case 'scored':
        observer.onScored(
          call[1],
          call[2],
          call[3].map((outcome) => ({ evaluator: '', outcome, scores: [], durationMs: 0 })),
        );
        break;
      case 'expressionError':
        observer.onExpressionError(call[1], call[2], call[3], call[4]);
        break;
      case 'freshness':
        observer.onFreshness(call[1]);
        break;
      case 'postponed':
        observer.onPostponed(call[1]);
        break;
      case 'result':
        observer.onResult(call[1], call[2], call[3]);
        break;
    }
  }
}

/**
 * Collects observer calls in the worker and sends them in batches (one message per `flushMs`,
 * not one per call): the engine reports a few calls per trace.
 */
export class ForwardingObserver implements ScoringObserver {
  private calls: ObserverCall[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly send: (calls: ObserverCall[]) => void,
    private readonly flushMs = 100,
  ) {}

  private push(call: ObserverCall): void {
    this.calls.push(call);
    if (this.timer === undefined) {
      this.timer = setTimeout(() => this.flush(), this.flushMs);
      this.timer.unref();
    }
  }

  /** Sends what is pending now (the worker calls it before it stops). */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.calls.length === 0) return;
    const calls = this.calls;
    this.calls = [];
    this.send(calls);
  }

  onSelected(project: string, policy: string): void {
    this.push(['selected', project, policy]);
  }
  onSampledOut(project: string, policy: string): void {
    this.push(['sampledOut', project, policy]);
  }
  onScored(project: string, policy: string, results: readonly Result[]): void {
    this.push(['scored', project, policy, results.map((r) => r.outcome)]);
  }
  onExpressionError(project: string, policy: string, field: string, reason: FailureReason): void {
    this.push(['expressionError', project, policy, field, reason]);
  }
  onFreshness(seconds: number): void {
    this.push(['freshness', seconds]);
  }
  onPostponed(reason: 'rate_limited' | 'trace_open'): void {
    this.push(['postponed', reason]);
  }
  onResult(type: string, outcome: Result['outcome'], durationMs: number): void {
    this.push(['result', type, outcome, durationMs]);
  }
}

export interface ScoringThreadDeps {
  data: ScoringWorkerData;
  /** The in-process engine, used when the worker cannot start or dies. */
  fallback: PolicyEngine;
  /** Where the worker's engine and evaluation metrics go (the server's Metrics). */
  observer: ScoringObserver;
  /** The worker wrote webhook deliveries (wakes this thread's dispatcher). */
  onWebhooksEnqueued?: () => void;
  /**
   * With `data.completion`: the in-process completer, which takes over with the engine when the
   * worker cannot start or dies.
   */
  completer?: TraceCompleter;
  /** The worker completed traces (its engine is woken there). */
  onCompleted?: (traces: number) => void;
  logger?: { warn(obj: object, msg: string): void };
}

/** Both in-process loops, started and stopped together. */
function together(a: InProcessLoop, b: InProcessLoop | undefined): InProcessLoop {
  if (b === undefined) return a;
  return {
    start() {
      a.start();
      b.start();
    },
    async shutdown() {
      await Promise.all([a.shutdown(), b.shutdown()]);
    },
  };
}

/**
 * Runs online scoring in a worker thread with its own store connection, judge client, webhook
 * outbox and source sinks, so CEL, evaluators and the results transactions do not take CPU from
 * the thread that answers requests. Claims are fenced in the database and results keyed by
 * (trace, policy, digest), so where the engine runs changes nothing else: a worker that dies
 * leaves its claimed items to be claimed again once their visibility timeout passes, by the
 * in-process engine that takes over. On `stop` the batch in progress finishes (judge calls
 * included); a wedged worker is ended.
 *
 * With `data.completion` the worker also completes traces (the completion loop, with its rules),
 * so a server scoring in a worker runs one background isolate rather than two: the completion
 * worker's isolate is mostly idle when whole traces complete on arrival, and each isolate costs
 * tens of MB (docs/performance.md#one-background-thread).
 */
export class ScoringThread extends LoopWorker<ToScoringWorker, FromScoringWorker> {
  private wakePending = false;

  constructor(private readonly deps: ScoringThreadDeps) {
    super({
      entry: new URL('./scoring-worker.js', import.meta.url),
      workerData: deps.data,
      resourceLimits: RESOURCE_LIMITS,
      fallback: together(deps.fallback, deps.completer),
      work: deps.completer === undefined ? 'online scoring' : 'online scoring and trace completion',
      doing: deps.completer === undefined ? 'scoring' : 'scoring and completing',
      logger: deps.logger,
      onMessage: (msg) => {
        if (msg.type === 'metrics') applyObserverCalls(deps.observer, msg.calls);
        else if (msg.type === 'webhooks-enqueued') deps.onWebhooksEnqueued?.();
        else if (msg.type === 'completed') deps.onCompleted?.(msg.traces);
      },
    });
  }

  /** New work items were queued: at most one message per turn of the event loop. */
  wake(): void {
    if (!this.running) {
      this.deps.fallback.wake();
      return;
    }
    if (this.wakePending) return;
    this.wakePending = true;
    setImmediate(() => {
      this.wakePending = false;
      if (!this.post({ type: 'wake' })) this.deps.fallback.wake();
    });
  }

  /** A policy changed on this replica: the engine that runs reloads before its next item. */
  invalidate(): void {
    this.deps.fallback.invalidate();
    this.post({ type: 'invalidate' });
  }
}
