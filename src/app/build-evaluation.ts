import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import { type Clock, type Component, component, stopAll, systemClock } from '../core/index.js';
import {
  createJudges,
  defaultRegistry,
  type EvaluationObserver,
  EvaluationService,
  type EvaluatorRegistry,
} from '../evaluators/index.js';
import {
  createHttpClient,
  createOutboundGuard,
  type HttpClient,
  proxySettingsFromConfig,
} from '../net/index.js';
import { PluginHost } from '../plugins/index.js';
import type { Metrics } from '../telemetry/index.js';
import { closes } from './lifecycle.js';

/** Direct evaluation as configured: built-in and judge evaluators, the configured judges. */
export function createEvaluationService(
  config: Readonly<Config>,
  deps: {
    http: HttpClient;
    env: Record<string, string | undefined>;
    clock: Clock;
    logger: Logger;
    observer?: EvaluationObserver;
  },
): EvaluationService {
  return new EvaluationService({
    registry: defaultRegistry(),
    judges: createJudges(config.judges, { http: deps.http, env: deps.env, clock: deps.clock }),
    ...(config.default_judge === undefined ? {} : { defaultJudge: config.default_judge }),
    ...(deps.observer === undefined ? {} : { observer: deps.observer }),
    onError: (err, evaluator) => deps.logger.warn({ err, evaluator }, 'evaluator failed'),
    maxRecords: config.limits.max_evaluate_records,
  });
}

/**
 * The HTTP client of judge calls. A judge's own endpoint is named by the operator in server
 * config, so its host is allowed (a self-hosted model on a private address is common); the guard
 * still checks every other target, so a redirect or a rebinding name cannot reach elsewhere.
 */
export function createJudgeHttpClient(
  config: Readonly<Config>,
  userAgent = 'touchstone',
): HttpClient {
  const hosts = Object.values(config.judges).map((j) => new URL(j.endpoint).hostname);
  const guard = createOutboundGuard({
    allowHosts: [...new Set(hosts)],
    requireHttps: false,
    setting: 'judges.<name>.endpoint',
  });
  return createHttpClient({
    userAgent,
    checkTarget: guard.checkTarget,
    wrapConnector: guard.wrapConnector,
    proxy: proxySettingsFromConfig(config.proxy),
  });
}

/** Direct evaluation as the server runs it (reporting to telemetry), and its judge client. */
export function buildEvaluation(
  config: Readonly<Config>,
  deps: { env: Record<string, string | undefined>; clock: Clock; logger: Logger; metrics: Metrics },
): { service: EvaluationService; component: Component } {
  const http = createJudgeHttpClient(config);
  const { env, clock, logger, metrics } = deps;
  return {
    service: createEvaluationService(config, { http, env, clock, logger, observer: metrics }),
    component: closes('judge-http', http),
  };
}

/**
 * The plug-in evaluators of `plugins` in the server config, registered into `registry`. The
 * chain is verified here, so a mismatch refuses startup; later changes are reloaded by the
 * component, and a refused reload keeps the verified plug-ins running.
 */
export async function buildPlugins(
  config: Readonly<Config>,
  deps: { registry: EvaluatorRegistry; logger: Logger },
): Promise<Component[]> {
  if (config.plugins === undefined) return [];
  const { logger } = deps;
  const host = new PluginHost(config.plugins, {
    registry: deps.registry,
    onReload: (event) => {
      if (event.ok)
        logger.info({ index: event.indexSha256, plugins: event.plugins }, 'plug-ins reloaded');
      else
        logger.error(
          { err: event.error },
          'plug-in reload refused; the verified plug-ins keep running',
        );
    },
  });
  await host.load();
  const loaded = host.chain?.plugins.map((p) => ({
    name: p.name,
    version: p.version,
    sha256: p.moduleSha256,
  }));
  logger.info({ plugins: loaded }, 'plug-ins loaded');
  return [component('plugins', { start: () => host.start(), stop: () => host.stop() })];
}

/**
 * Direct evaluation in the CLI's local mode: the configured judges and plug-ins, as a server
 * would have them. `close()` releases the judge client and the plug-in workers.
 */
export async function createLocalEvaluation(
  config: Readonly<Config>,
  deps: { env: Record<string, string | undefined>; logger: Logger },
): Promise<{ service: EvaluationService; close: () => Promise<void> }> {
  const http = createJudgeHttpClient(config, 'touchstone-cli');
  const parts: Component[] = [closes('judge-http', http)];
  try {
    const service = createEvaluationService(config, { http, clock: systemClock, ...deps });
    parts.push(
      ...(await buildPlugins(config, { registry: service.registry, logger: deps.logger })),
    );
    return { service, close: () => stopAll(parts) };
  } catch (err) {
    await stopAll(parts);
    throw err;
  }
}
