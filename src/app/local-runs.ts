import { resolve } from 'node:path';
import { pino } from 'pino';
import type { Config } from '../config/index.js';
import { type Component, component, stopAll, systemClock } from '../core/index.js';
import { createDatasetService } from '../datasets/index.js';
import { proxySettingsFromConfig } from '../net/index.js';
import type { RunExecutor, RunService } from '../runs/index.js';
import { openStore } from '../store/index.js';
import { WebhookOutbox } from '../webhooks/index.js';
import {
  buildPlugins,
  createEvaluationService,
  createJudgeHttpClient,
} from './build-evaluation.js';
import { buildRuns, localRunTargets } from './build-runs.js';
import { closes } from './lifecycle.js';

/** Runs on the local data dir: the server's own service and executor, in this process. */
export interface LocalRuns {
  /** Where the runs are kept, for messages: `data dir /abs/path` or `PostgreSQL`. */
  readonly location: string;
  readonly service: RunService;
  readonly executor: RunExecutor;
  close(): Promise<void>;
}

/**
 * Opens the local data dir's runs with the server's builders. A spec run here executes on the
 * caller's own machine, so its target gets what the caller has (`localRunTargets`); the executor
 * is driven by its caller (`drain()`), not started.
 */
export async function createLocalRuns(
  config: Readonly<Config>,
  deps: { env: Record<string, string | undefined>; baseDir?: string },
): Promise<LocalRuns> {
  const logger = pino({ level: 'silent' });
  const clock = systemClock;
  const store = await openStore(config, { clock, logger });
  const http = createJudgeHttpClient(config);
  const parts: Component[] = [closes('store', store), closes('judge-http', http)];
  try {
    const evaluation = createEvaluationService(config, { http, env: deps.env, clock, logger });
    parts.push(...(await buildPlugins(config, { registry: evaluation.registry, logger })));
    const proxy = proxySettingsFromConfig(config.proxy);
    const datasets = createDatasetService(config, {
      env: deps.env,
      logger,
      clock,
      ...(proxy === undefined ? {} : { proxy }),
    });
    // A dataset root that fails to close must not fail a command whose run is already stored.
    parts.push(component('datasets', { stop: () => datasets.close().catch(() => undefined) }));
    const runs = buildRuns(config, {
      store,
      clock,
      logger,
      evaluation,
      datasets,
      // Deliveries land in the data dir's outbox; a server started on it sends them.
      events: new WebhookOutbox({ clock }),
      targets: localRunTargets(config, deps),
    });
    parts.push(runs.component);
    let closing: Promise<void> | undefined;
    return {
      location:
        config.store.driver === 'sqlite' ? `data dir ${resolve(config.data_dir)}` : 'PostgreSQL',
      service: runs.service,
      executor: runs.executor,
      close() {
        closing ??= stopAll(parts);
        return closing;
      },
    };
  } catch (err) {
    await stopAll(parts);
    throw err;
  }
}
