import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import type { Clock } from '../core/index.js';
import type { EvaluationService, Judge } from '../evaluators/index.js';
import { GuardEngine, GuardPolicyService, TraceRecorder } from '../guardrails/index.js';
import type { IngestService } from '../ingest/index.js';
import type { Store } from '../store/index.js';
import type { Metrics } from '../telemetry/index.js';

export interface Guardrails {
  /** Decides on a gateway's messages or MCP calls by a stored GuardPolicy. */
  engine: GuardEngine;
  service: GuardPolicyService;
}

/** The guard engine over the stored guard policies, with the configured judges and metrics. */
export function buildGuardrails(
  config: Readonly<Config>,
  deps: {
    store: Store;
    clock: Clock;
    logger: Logger;
    metrics?: Metrics;
    evaluation: EvaluationService;
    ingest?: Pick<IngestService, 'ingest'>;
  },
): Guardrails {
  const { store, clock, logger, evaluation, ingest } = deps;
  const judges = new Map<string, Judge>();
  for (const name of Object.keys(config.judges)) {
    const judge = evaluation.findJudge(name);
    if (judge !== undefined) judges.set(name, judge);
  }
  const engine = new GuardEngine({
    policies: store.guardPolicies,
    judges,
    ...(config.default_judge === undefined ? {} : { defaultJudge: config.default_judge }),
    ...(deps.metrics === undefined ? {} : { observer: deps.metrics }),
    ...(ingest === undefined
      ? {}
      : {
          recorder: new TraceRecorder({
            ingest,
            onError: (err) => logger.warn({ err }, 'guard decision trace not stored'),
          }),
        }),
    now: () => clock.now(),
  });
  return { engine, service: new GuardPolicyService({ store, clock, logger, engine }) };
}
