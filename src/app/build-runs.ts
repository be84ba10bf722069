import type { Logger } from 'pino';
import type { Config } from '../config/index.js';
import { type Clock, type Component, component } from '../core/index.js';
import type { DatasetService } from '../datasets/index.js';
import type { EvaluationObserver, EvaluationService } from '../evaluators/index.js';
import type { CredentialResolver } from '../net/index.js';
import { proxySettingsFromConfig } from '../net/index.js';
import {
  preflightTarget,
  type RunEventSink,
  RunExecutor,
  RunRetention,
  RunService,
  SWEEP_INTERVAL_MS,
  type TargetDeps,
} from '../runs/index.js';
import type { Store } from '../store/index.js';

export type RunTargets = Omit<TargetDeps, 'project'>;

/** Targets run under the server's rules: granted variables only, no command targets, private
 * hosts only when allow-listed. */
export function serverRunTargets(
  config: Readonly<Config>,
  deps: { env: Record<string, string | undefined>; grants: CredentialResolver; clock: Clock },
): RunTargets {
  return {
    env: deps.env,
    grants: deps.grants,
    allowCommand: false,
    outbound: {
      allowHosts: config.runs.allow_hosts,
      proxy: proxySettingsFromConfig(config.proxy),
    },
    clock: deps.clock,
  };
}

/**
 * Targets of a run executed on the caller's own machine (the CLI without a server): every
 * variable of the environment, command targets, and its own host even on loopback or a private
 * network (docs/runs.md, "Where a target may run").
 */
export function localRunTargets(
  config: Readonly<Config>,
  deps: { env: Record<string, string | undefined>; baseDir?: string },
): RunTargets {
  const proxy = proxySettingsFromConfig(config.proxy);
  return {
    env: deps.env,
    grants: 'all',
    allowCommand: true,
    outbound: { allowOwnHost: true, ...(proxy === undefined ? {} : { proxy }) },
    ...(deps.baseDir === undefined ? {} : { baseDir: deps.baseDir }),
  };
}

export interface RunsParts {
  readonly service: RunService;
  readonly executor: RunExecutor;
  /** The executor's loop: started with the others, stopped before what it writes to. */
  readonly component: Component;
}

/** The run service and the executor that runs what it creates (the server and the CLI build it). */
export function buildRuns(
  config: Readonly<Config>,
  deps: {
    store: Store;
    clock: Clock;
    logger: Logger;
    evaluation: EvaluationService;
    datasets: DatasetService;
    events: RunEventSink;
    targets: RunTargets;
    observer?: EvaluationObserver;
  },
): RunsParts {
  const { store, clock, logger, evaluation, datasets, events, targets } = deps;
  const executor = new RunExecutor({
    store,
    clock,
    registry: evaluation.registry,
    judge: (name) => evaluation.findJudge(name),
    events,
    targets,
    datasets,
    ...(deps.observer === undefined ? {} : { evaluation: deps.observer }),
    logger,
    options: {
      maxConcurrentRuns: config.runs.max_concurrent,
      leaseMs: config.runs.lease_timeout,
    },
  });
  const service = new RunService({
    store,
    clock,
    registry: evaluation.registry,
    judgeExists: (name) => evaluation.findJudge(name) !== undefined,
    events,
    datasets,
    logger,
    preflightTarget: (spec, project) =>
      preflightTarget(spec.target, spec.environment, { ...targets, project }),
    onCreated: () => executor.wake(),
  });
  return {
    service,
    executor,
    component: component('run-executor', {
      start: () => executor.start(),
      stop: () => executor.shutdown(),
    }),
  };
}

/** Deletes finished runs past `runs.retention` (hourly once started). */
export function buildRunRetention(
  config: Readonly<Config>,
  deps: { store: Store; clock: Clock; logger: Logger },
): RunRetention {
  return new RunRetention({
    ...deps,
    options: {
      retentionMs: config.runs.retention,
      projectRetentionMs: config.runs.project_retention,
      intervalMs: SWEEP_INTERVAL_MS,
    },
  });
}
