import { pino } from 'pino';
import type { Config } from '../config/index.js';
import { systemClock } from '../core/index.js';
import type { GuardPolicyService } from '../guardrails/index.js';
import type { PolicyService } from '../policies/index.js';
import { RunService } from '../runs/index.js';
import type { SourceService } from '../sources/index.js';
import type { Store } from '../store/index.js';
import { createWebhooks, WebhookOutbox, type WebhookService } from '../webhooks/index.js';
import { createEvaluationService, createJudgeHttpClient } from './build-evaluation.js';
import { buildGuardrails } from './build-guardrails.js';
import { createPolicyService } from './build-policies.js';
import { createSourceService, scheduledRunCheck } from './build-sources.js';

/**
 * The resource services of the CLI's local mode (commands on a data dir, no server), built as
 * the server builds them, and what each holds open until the command ends.
 */
export interface LocalService<S> {
  service: S;
  close(): Promise<void>;
}

type Env = Record<string, string | undefined>;

const silent = () => pino({ level: 'silent' });

export function localPolicies(config: Config, store: Store, env: Env): LocalService<PolicyService> {
  const logger = silent();
  const http = createJudgeHttpClient(config);
  const evaluation = createEvaluationService(config, { http, env, clock: systemClock, logger });
  const sources = createSourceService(config, { store, clock: systemClock, env, logger });
  return {
    service: createPolicyService(config, {
      store,
      clock: systemClock,
      evaluation,
      logger,
      checkSink: (sink, project, path) => sources.checkSink(sink, project, path),
    }),
    close: () => http.close(),
  };
}

export function localSources(config: Config, store: Store, env: Env): LocalService<SourceService> {
  const logger = silent();
  const http = createJudgeHttpClient(config);
  const evaluation = createEvaluationService(config, { http, env, clock: systemClock, logger });
  // Only checks scheduled sources' run specs: nothing is created or delivered from here.
  const runs = new RunService({
    store,
    clock: systemClock,
    registry: evaluation.registry,
    judgeExists: (name) => evaluation.findJudge(name) !== undefined,
    events: new WebhookOutbox({ clock: systemClock }),
    logger,
  });
  return {
    service: createSourceService(config, {
      store,
      clock: systemClock,
      env,
      logger,
      checkRunSpec: scheduledRunCheck(() => runs),
    }),
    close: () => http.close(),
  };
}

export function localWebhooks(config: Config, store: Store): LocalService<WebhookService> {
  const webhooks = createWebhooks({
    config: config.webhooks,
    store,
    clock: systemClock,
    logger: silent(),
  });
  return { service: webhooks.service, close: () => webhooks.close() };
}

export function localGuardPolicies(
  config: Config,
  store: Store,
  env: Env,
): LocalService<GuardPolicyService> {
  const logger = silent();
  const http = createJudgeHttpClient(config);
  const evaluation = createEvaluationService(config, { http, env, clock: systemClock, logger });
  const { service } = buildGuardrails(config, { store, clock: systemClock, logger, evaluation });
  return { service, close: () => http.close() };
}
