import type { Config } from '../config/index.js';
import type { EvaluationService } from '../evaluators/index.js';
import { PolicyEngine, type PolicyEventSink, type ResultSink } from '../policies/index.js';
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
