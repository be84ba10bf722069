import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import type { Clock } from '../core/index.js';
import type { EvaluationService } from '../evaluators/index.js';
import type { TraceQueries } from '../ingest/index.js';
import { createOutboundGuard } from '../net/index.js';
import {
  AnnotationService,
  PolicyEngine,
  type PolicyEngineObserver,
  type PolicyEventSink,
  PolicyService,
  type PolicyServiceDeps,
  type ResultSink,
} from '../policies/index.js';
import type { Redactor } from '../redaction/index.js';
import type { Store } from '../store/index.js';
import type { BuildBase } from './base.js';

/** The online scoring engine as configured (`online.*`). */
export function buildPolicyEngine(
  config: Readonly<Config>,
  deps: Omit<BuildBase, 'metrics'> & {
    /** The engine's counters (the main thread's Metrics, or the scoring worker's forwarder). */
    observer: PolicyEngineObserver;
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
    observer: deps.observer,
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

/** The policy resource's service as configured (the server and the CLI's local mode build it). */
export function createPolicyService(
  config: Readonly<Config>,
  deps: {
    store: Store;
    clock: Clock;
    evaluation: EvaluationService;
    logger: Logger;
    onChange?: () => void;
    /** Checks `trace_feedback` sinks (the source service's checkSink); absent: sinks refused. */
    checkSink?: PolicyServiceDeps['checkSink'];
  },
): PolicyService {
  return new PolicyService({
    store: deps.store,
    clock: deps.clock,
    registry: deps.evaluation.registry,
    resolveJudge: (name, path) => deps.evaluation.resolveJudge(name, path),
    // The same checks as webhook URLs: alert webhooks are delivered by the webhook dispatcher.
    guard: createOutboundGuard({
      allowHosts: config.webhooks.allow_hosts,
      requireHttps: false,
      setting: 'webhooks.allow_hosts',
    }),
    logger: deps.logger,
    ...(deps.onChange === undefined ? {} : { onChange: deps.onChange }),
    ...(deps.checkSink === undefined ? {} : { checkSink: deps.checkSink }),
  });
}

/**
 * The online scoring engine (in-process) and the policy service that tells `scoring` (the
 * scoring thread, or the engine itself) when a policy changed on this replica.
 */
export function buildPolicies(
  config: Readonly<Config>,
  deps: BuildBase &
    Omit<Parameters<typeof buildPolicyEngine>[1], 'observer'> & {
      checkSink?: PolicyServiceDeps['checkSink'];
      scoring: () => { invalidate(): void; wake(): void };
    },
): { engine: PolicyEngine; service: PolicyService } {
  const engine = buildPolicyEngine(config, { ...deps, observer: deps.metrics });
  const service = createPolicyService(config, {
    ...deps,
    onChange: () => {
      const scoring = deps.scoring();
      scoring.invalidate();
      scoring.wake();
    },
  });
  return { engine, service };
}
