import type { Config } from '../config/index.js';
import type { EvaluationService } from '../evaluators/index.js';
import type { TraceQueries } from '../ingest/index.js';
import {
  AnnotationService,
  PolicyEngine,
  type PolicyEventSink,
  type ResultSink,
} from '../policies/index.js';
import type { Redactor } from '../redaction/index.js';
import type { BuildBase } from './base.js';

/** The online scoring engine as configured (`online.*`). */
export function buildPolicyEngine(
  config: Readonly<Config>,
  deps: BuildBase & {
    evaluation: EvaluationService;
    events: PolicyEventSink;
    sinks: readonly ResultSink[];
  },
): PolicyEngine {
  const { evaluation } = deps;
  return new PolicyEngine({
    store: deps.store,
    clock: deps.clock,
    registry: evaluation.registry,
    judge: (name) => evaluation.findJudge(name),
    events: deps.events,
    sinks: deps.sinks,
    observer: deps.metrics,
    logger: deps.logger,
    options: {
      concurrency: config.online.concurrency,
      batchSize: config.online.batch_size,
      visibilityMs: config.online.visibility_timeout,
      pollMs: config.online.poll_interval,
    },
  });
}

/** People's annotations: stored as results, sent to the same sinks (write-back) and events. */
export function buildAnnotations(
  deps: BuildBase & {
    traces: TraceQueries;
    events: PolicyEventSink;
    sinks: readonly ResultSink[];
    redactor: Redactor;
  },
): AnnotationService {
  const { store, clock, traces, events, sinks, redactor } = deps;
  return new AnnotationService({
    store,
    clock,
    traces,
    events,
    sinks,
    redactText: (text) => redactor.redactText(text),
  });
}
