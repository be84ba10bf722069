import type { FastifyInstance } from 'fastify';
import { destination, type Logger, pino } from 'pino';
import { IdempotencyService } from '../api/index.js';
import type { AuditTrail, KeyService } from '../auth/index.js';
import type { Config } from '../config/index.js';
import {
  type Clock,
  type Component,
  component,
  startAll,
  stopAll,
  systemClock,
} from '../core/index.js';
import { createDatasetService, type DatasetService } from '../datasets/index.js';
import type { EvaluationService } from '../evaluators/index.js';
import { type TraceCompleter, TraceQueries } from '../ingest/index.js';
import { proxySettingsFromConfig } from '../net/index.js';
import { type PolicyEngine, type PolicyService, ScoreQueries } from '../policies/index.js';
import type { RunExecutor, RunRetention, RunService } from '../runs/index.js';
import type { SourceManager, SourceService, WriteBackWriter } from '../sources/index.js';
import { openStore, type Store } from '../store/index.js';
import { Metrics, registerStateGauges } from '../telemetry/index.js';
import { createWebhooks, type Webhooks } from '../webhooks/index.js';
import { buildEvaluation, buildPlugins } from './build-evaluation.js';
import { buildExtProc } from './build-ext-proc.js';
import { buildGuardrails, type Guardrails } from './build-guardrails.js';
import { buildIdentity } from './build-identity.js';
import { buildIngest } from './build-ingest.js';
import { buildAnnotations, buildPolicies } from './build-policies.js';
import { buildRunRetention, buildRuns, serverRunTargets } from './build-runs.js';
import { boundAddress, buildHttpServer } from './build-server.js';
import { buildSources } from './build-sources.js';
import { closes, loop } from './lifecycle.js';
import { ScoringThread } from './scoring-thread.js';

export {
  createEvaluationService,
  createJudgeHttpClient,
  createLocalEvaluation,
} from './build-evaluation.js';
export { createPolicyService } from './build-policies.js';
export { authRequired } from './build-server.js';
export { createSourceService } from './build-sources.js';
export { createLocalRuns, type LocalRuns } from './local-runs.js';
export {
  type LocalService,
  localGuardPolicies,
  localPolicies,
  localSources,
  localWebhooks,
} from './local-services.js';

/**
 * @module app
 * Composition root: config → store → services → HTTP edge. Each area's parts are made by a
 * builder (build-*.ts, the create*Service functions) that the CLI's local mode calls too; the
 * running parts are Components, started in list order by `listen()` and stopped in reverse by
 * `close()`. Tests build an App without listening and drive it with `app.server.inject()`.
 */

export interface AppDeps {
  /** The process environment, for credential references (`credential: {env: VAR}`). */
  env: Record<string, string | undefined>;
  clock?: Clock;
  logger?: Logger;
  /** Collect Node process metrics (off in tests that build many apps). */
  processMetrics?: boolean;
}

export interface App {
  readonly config: Readonly<Config>;
  readonly server: FastifyInstance;
  readonly store: Store;
  readonly keys: KeyService;
  /** Writes and refusals (flushed every second once listening; `flush()` in tests). */
  readonly audit: AuditTrail;
  readonly evaluation: EvaluationService;
  readonly logger: Logger;
  /** Completes open traces from database state; started by `listen()`, or driven by tests via `tick()`. */
  readonly completer: TraceCompleter;
  /** Webhook service, event emitter and dispatcher (started by `listen()`, or `tick()` in tests). */
  readonly webhooks: Webhooks;
  /** The online scoring engine (started by `listen()` unless `online.enabled` is false; `tick()` in tests). */
  readonly engine: PolicyEngine;
  readonly policies: PolicyService;
  readonly sources: SourceService;
  /** Pulls trace sources (started by `listen()` with the engine; `tick()` in tests). */
  readonly sourceManager: SourceManager;
  /** Sends queued write-backs to the sources' stores (`tick()` in tests). */
  readonly writeBacks: WriteBackWriter;
  readonly runs: RunService;
  /** Executes runs (started by `listen()`; `drain()` or `tick()` in tests). */
  readonly runExecutor: RunExecutor;
  /** Deletes finished runs past `runs.retention` (hourly once listening; `sweep()` in tests). */
  readonly runRetention: RunRetention;
  /** Idempotency-Key records (its expiry sweep is started by `listen()`; `sweep()` in tests). */
  readonly idempotency: IdempotencyService;
  /** Dataset upload, import and the reader runs use (`read(project, path)`). */
  readonly datasets: DatasetService;
  /** GuardPolicy resources and the guard engine (the prompt-guard webhook, the external processor). */
  readonly guardrails: Guardrails;
  /** What `listen()` starts in this order and `close()` stops in reverse (the server last in). */
  readonly components: readonly Component[];
  /** Starts the components, the server last; resolves to its address (`127.0.0.1:4318`). */
  listen(): Promise<string>;
  /**
   * Stops accepting, drains in-flight requests (bounded), stops the workers, closes the store.
   * Safe twice, and without `listen()`.
   */
  close(): Promise<void>;
}

export async function createApp(config: Readonly<Config>, deps: AppDeps): Promise<App> {
  const clock = deps.clock ?? systemClock;
  // JSON logs on stderr; stdout is for what the CLI prints.
  const logger =
    deps.logger ??
    pino({ level: config.log_level, base: { service: 'touchstone' } }, destination(2));
  const metrics = new Metrics({ processMetrics: deps.processMetrics !== false });
  const store = await openStore(config, { clock, logger, observer: metrics });
  try {
    return await assemble(config, deps, { store, clock, logger, metrics });
  } catch (err) {
    // A half-built app must not leave the database open (or SQLite locked).
    await store.close();
    throw err;
  }
}

async function assemble(
  config: Readonly<Config>,
  deps: AppDeps,
  {
    store,
    clock,
    logger,
    metrics,
  }: { store: Store; clock: Clock; logger: Logger; metrics: Metrics },
): Promise<App> {
  const { env } = deps;
  const base = { store, clock, logger, metrics };
  const proxy = proxySettingsFromConfig(config.proxy);
  const identity = buildIdentity(config, { store, clock, logger, proxy });
  const { keys, audit } = identity;
  const judging = buildEvaluation(config, { env, clock, logger, metrics });
  const evaluation = judging.service;
  const plugins = await buildPlugins(config, { registry: evaluation.registry, logger });
  // With `online.worker` (the default), listen() scores in a worker thread (its own store
  // connection, judge client, outbox and sinks) so scoring does not take CPU from the thread
  // answering requests, and that thread completes traces too (no completion worker of its own:
  // one isolate less). An injected clock (tests) keeps both in-process, driven by tick(). The
  // engine and the completer are the worker's fallback, and what runs with `online.worker: false`
  // (the worker's isolate costs memory: docs/performance.md#heap-growth-issue-24).
  const scoringWorker = clock === systemClock && config.online.worker && config.online.enabled;
  const ingest = buildIngest(config, {
    ...base,
    onCompleted: () => scoring.wake(),
    completesInScoringWorker: scoringWorker,
  });
  const { redactor, limits, completer } = ingest;
  const webhooks = createWebhooks({ config: config.webhooks, ...base, observer: metrics, proxy });
  const events = webhooks.emitter;
  const sourcing = buildSources(config, {
    ...base,
    env,
    redactor,
    limits,
    runs: () => runs,
  });
  const { sinks, manager: sourceManager, writeBacks, service: sources } = sourcing;
  const { engine, service: policies } = buildPolicies(config, {
    ...base,
    checkSink: (sink, project, path) => sources.checkSink(sink, project, path),
    evaluation,
    events,
    sinks,
    scoring: () => scoring,
  });
  const scoring = scoringWorker
    ? new ScoringThread({
        data: {
          config,
          env,
          completion: { rules: ingest.rules, maxEventsPerSpan: limits.maxEventsPerSpan },
        },
        fallback: engine,
        completer,
        observer: metrics,
        onWebhooksEnqueued: () => webhooks.dispatcher.wake(),
        onCompleted: (traces) => metrics.onCompleted(traces),
        logger,
      })
    : engine;
  registerStateGauges(metrics, { store, clock, webhooks: webhooks.service, sources });
  const idempotency = new IdempotencyService({ store, clock, logger });
  const datasets = createDatasetService(config, { env, logger, clock, proxy });
  const targets = serverRunTargets(config, { env, grants: sourcing.credentials, clock });
  const runs = buildRuns(config, {
    ...base,
    evaluation,
    datasets,
    events,
    targets,
    observer: metrics,
  });
  const runRetention = buildRunRetention(config, { store, clock, logger });
  const traces = new TraceQueries(store);
  const guardrails = buildGuardrails(config, { ...base, evaluation, ingest: ingest.service });
  const http = await buildHttpServer(config, {
    store,
    logger,
    services: {
      keys,
      bearer: identity.bearer,
      signIn: identity.signIn,
      audit,
      evaluation,
      metrics,
      ingest: ingest.service,
      ingestThreads: ingest.threads,
      traces,
      webhooks: webhooks.service,
      policies,
      scores: new ScoreQueries(store),
      annotations: buildAnnotations({ ...base, traces, events, sinks, redactor }),
      sources,
      runs: runs.service,
      idempotency,
      datasets,
      guardrails,
    },
  });
  const extProc = await buildExtProc(config, { guard: guardrails.engine, bearer: identity.bearer });
  // Started in this order, stopped in reverse: the server stops accepting and drains first, then
  // each worker stops before what it feeds or writes to; the store closes last.
  const components = [
    closes('store', store),
    closes('datasets', datasets),
    sourcing.component,
    identity.providerHttp,
    judging.component,
    ...plugins,
    // After every emitter, before the store: interrupted attempts are recorded so another replica
    // resends them.
    component('webhooks', {
      start: () => webhooks.dispatcher.start(),
      stop: () => webhooks.close(),
    }),
    identity.trail,
    loop('idempotency-sweep', idempotency),
    loop('run-retention', runRetention),
    runs.component,
    loop('write-backs', writeBacks),
    // Only replicas that run the engine pull, so a source is never read twice at once.
    loop('source-manager', sourceManager, config.online.enabled),
    loop('policy-engine', scoring, config.online.enabled),
    ingest.component,
    ...(extProc === undefined ? [] : [extProc]),
    http.component,
  ];
  let closing: Promise<void> | undefined;
  return {
    config,
    server: http.server,
    store,
    keys,
    audit,
    evaluation,
    logger,
    completer,
    webhooks,
    engine,
    policies,
    sources,
    sourceManager,
    writeBacks,
    runs: runs.service,
    runExecutor: runs.executor,
    runRetention,
    idempotency,
    datasets,
    guardrails,
    components,
    async listen() {
      await startAll(components);
      return boundAddress(http.server, config.listen);
    },
    close() {
      closing ??= stopAll(components);
      return closing;
    },
  };
}
