import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { destination, type Logger, pino } from 'pino';
import { buildServer, DEFAULT_UI_DIR, Metrics } from './api/index.js';
import { AuditTrail, createBearerAuthenticator, KeyService } from './auth/index.js';
import { type Config, isLoopbackListen, splitListen } from './config/index.js';
import { type Clock, systemClock } from './core/index.js';
import { createDatasetService, type DatasetService } from './datasets/index.js';
import {
  createJudges,
  defaultRegistry,
  type EvaluationObserver,
  EvaluationService,
} from './evaluators/index.js';
import { IdempotencyService } from './idempotency/index.js';
import { CompleterThread } from './ingest/completer-thread.js';
import {
  IngestService,
  normalizeStoredTrace,
  PulledTraceWriter,
  spanLimitsFromConfig,
  TraceCompleter,
  TraceQueries,
} from './ingest/index.js';
import {
  type CredentialResolver,
  createCredentialResolver,
  createHttpClient,
  createOutboundGuard,
  type HttpClient,
  proxySettingsFromConfig,
} from './net/index.js';
import { AnnotationService, PolicyEngine, PolicyService, ScoreQueries } from './policies/index.js';
import { compileRedaction } from './redaction/index.js';
import {
  preflightTarget,
  RunExecutor,
  RunRetention,
  RunService,
  SWEEP_INTERVAL_MS,
  type TargetDeps,
} from './runs/index.js';
import {
  compileOverrides,
  findConnector,
  type ParsedSource,
  SourceDirectory,
  SourceErrors,
  SourceManager,
  SourceResultSink,
  SourceService,
  type SourceStatus,
  type TraceStoreConnector,
  WriteBackWriter,
} from './sources/index.js';
import { openStore, type Store } from './store/index.js';
import { createWebhooks, type Webhooks } from './webhooks/index.js';

/**
 * Composition root: config → store → services → HTTP edge. Tests build an App without listening
 * and drive it with `app.server.inject()`.
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
  /** Starts listening; resolves to the bound address (`127.0.0.1:4318`). */
  listen(): Promise<string>;
  /** Stops accepting, drains in-flight requests (bounded), closes the store. Safe twice. */
  close(): Promise<void>;
}

export function authRequired(config: Config): boolean {
  if (config.no_auth) return false;
  return config.auth !== undefined || !isLoopbackListen(config.listen);
}

/**
 * OTLP requests stored at once: SQLite writes one transaction at a time, so more would only queue
 * ahead of reads on its one connection; PostgreSQL gets half its pool, the rest stays for reads
 * and background work.
 */
function ingestConcurrency(config: Config): number {
  return config.store.driver === 'sqlite' ? 1 : Math.max(1, Math.floor(config.store.pool_size / 2));
}

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

/** The policy resource's service as configured (the server and the CLI's local mode build it). */
export function createPolicyService(
  config: Readonly<Config>,
  deps: {
    store: Store;
    clock: Clock;
    evaluation: EvaluationService;
    logger: Logger;
    onChange?: () => void;
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

/** The outbound rules of trace-source endpoints: https to public names unless allow-listed. */
function sourceGuard(config: Readonly<Config>) {
  return createOutboundGuard({
    allowHosts: config.sources.allow_hosts,
    requireHttps: true,
    setting: 'sources.allow_hosts',
  });
}

function credentialResolver(config: Readonly<Config>, env: Record<string, string | undefined>) {
  return createCredentialResolver({
    env,
    dir: config.sources.dir ?? join(config.data_dir, 'secrets'),
    grants: config.credentials.grants,
  });
}

/** The source resource's service as configured (the server and the CLI's local mode build it). */
export function createSourceService(
  config: Readonly<Config>,
  deps: {
    store: Store;
    clock: Clock;
    env: Record<string, string | undefined>;
    logger: Logger;
    onChange?: () => void;
  },
): SourceService {
  const credentials = credentialResolver(config, deps.env);
  return new SourceService({
    store: deps.store,
    clock: deps.clock,
    guard: sourceGuard(config),
    grants: { check: (ref, project, host) => credentials.checkGrant(ref, project, host) },
    supported: (connector, variant) => findConnector(connector, variant) !== undefined,
    logger: deps.logger,
    ...(deps.onChange === undefined ? {} : { onChange: deps.onChange }),
  });
}

/** Builds a source's connector with its credential resolved now (rotation applies at once). */
function connectorFactory(
  http: HttpClient,
  credentials: CredentialResolver,
): (source: ParsedSource, project: string) => Promise<TraceStoreConnector> {
  return async (source, project) => {
    const manifest = findConnector(source.spec.connector, source.spec.variant);
    if (manifest === undefined) {
      throw SourceErrors.SOURCE_NOT_SUPPORTED_YET(
        `connector "${source.spec.connector}" is not supported by this version`,
      );
    }
    const host = new URL(source.spec.endpoint).hostname;
    const credential =
      source.spec.credentials === undefined
        ? undefined
        : await credentials.resolveGranted(source.spec.credentials, project, host);
    return manifest.create(source, { http, ...(credential === undefined ? {} : { credential }) });
  };
}

export async function createApp(config: Readonly<Config>, deps: AppDeps): Promise<App> {
  const clock = deps.clock ?? systemClock;
  // JSON logs on stderr; stdout is for what the CLI prints.
  const logger =
    deps.logger ??
    pino({ level: config.log_level, base: { service: 'touchstone' } }, destination(2));
  const store = await openStore(config, { clock, logger });
  try {
    return await assemble(config, deps, { store, clock, logger });
  } catch (err) {
    // A half-built app must not leave the database open (or SQLite locked).
    await store.close();
    throw err;
  }
}

async function assemble(
  config: Readonly<Config>,
  deps: AppDeps,
  { store, clock, logger }: { store: Store; clock: Clock; logger: Logger },
): Promise<App> {
  const http = createJudgeHttpClient(config);
  const metrics = new Metrics({ processMetrics: deps.processMetrics !== false });
  const keys = new KeyService({ keys: store.keys, clock });
  const audit = new AuditTrail({
    store: store.audit,
    clock,
    retentionMs: config.audit.retention,
    logger,
  });
  const auth = createBearerAuthenticator(config, {
    keys,
    clock,
    proxy: proxySettingsFromConfig(config.proxy),
  });
  const evaluation = createEvaluationService(config, {
    http,
    env: deps.env,
    clock,
    logger,
    observer: metrics,
  });
  const redactor = compileRedaction(config.traces.redaction);
  const limits = spanLimitsFromConfig(config.traces.limits);
  const ingest = new IngestService({ store, redactor, clock, observer: metrics, limits });
  const rules = {
    graceMs: config.traces.completion_grace,
    idleMs: config.traces.idle_timeout,
    maxAgeMs: config.traces.max_age,
  };
  const completer = new TraceCompleter({
    store,
    clock,
    rules,
    maxEventsPerSpan: limits.maxEventsPerSpan,
    normalize: normalizeStoredTrace,
    observer: metrics,
    logger,
  });
  // listen() completes traces in a worker thread (its own store connection) so normalizing does not
  // take CPU from ingest; an injected clock (tests) keeps completion in-process, driven by tick().
  const completion =
    clock === systemClock
      ? new CompleterThread({
          data: {
            store: config.store,
            dataDir: config.data_dir,
            rules,
            maxEventsPerSpan: limits.maxEventsPerSpan,
          },
          fallback: completer,
          onCompleted: (n) => {
            metrics.onCompleted(n);
            engine.wake();
          },
          logger,
        })
      : completer;
  metrics.gauge('touchstone_open_traces', 'Traces received but not yet complete.', () =>
    store.traces.countOpen(),
  );
  const webhooks = createWebhooks({
    config: config.webhooks,
    store,
    clock,
    logger,
    observer: metrics,
    proxy: proxySettingsFromConfig(config.proxy),
  });
  metrics.gauge(
    'touchstone_webhook_queue_depth',
    'Webhook deliveries not yet delivered or failed (PENDING or RETRYING).',
    async () => (await webhooks.service.queueStats()).depth,
  );
  metrics.gauge(
    'touchstone_webhook_oldest_pending_age_seconds',
    'Age of the oldest webhook delivery not yet delivered or failed; 0 when none.',
    async () => (await webhooks.service.queueStats()).oldestAgeSeconds,
  );
  const directory = new SourceDirectory({ store, clock });
  const resultSinks = [new SourceResultSink({ directory, clock })];
  const engine = new PolicyEngine({
    store,
    clock,
    registry: evaluation.registry,
    judge: (name) => evaluation.findJudge(name),
    events: webhooks.emitter,
    sinks: resultSinks,
    observer: metrics,
    logger,
    options: {
      concurrency: config.online.concurrency,
      batchSize: config.online.batch_size,
      visibilityMs: config.online.visibility_timeout,
      pollMs: config.online.poll_interval,
    },
  });
  const policies = createPolicyService(config, {
    store,
    clock,
    evaluation,
    logger,
    onChange: () => {
      engine.invalidate();
      engine.wake();
    },
  });
  const sourceHttp = createHttpClient({
    userAgent: 'touchstone-sources',
    ...sourceGuard(config),
    clock,
    maxRedirects: 5,
    proxy: proxySettingsFromConfig(config.proxy),
  });
  const credentials = credentialResolver(config, deps.env);
  const connector = connectorFactory(sourceHttp, credentials);
  const pulled = new PulledTraceWriter({
    store,
    redactor,
    clock,
    normalize: normalizeStoredTrace,
    observer: metrics,
    limits,
  });
  const sourceManager = new SourceManager({
    store,
    clock,
    connector,
    write: (trace, adjust) => pulled.write(trace, adjust),
    overrides: (source) => {
      const project = source.project ?? 'default';
      return compileOverrides(source, project, (field, reason) =>
        metrics.onOverrideError(project, source.name, field, reason),
      );
    },
    observer: metrics,
    logger,
    redactText: (text) => redactor.redactText(text),
    options: { maxRecordsPerSecond: config.sources.max_records_per_second },
  });
  const writeBacks = new WriteBackWriter({
    store,
    clock,
    directory,
    connector,
    observer: metrics,
    logger,
    redactText: (text) => redactor.redactText(text),
  });
  const sources = createSourceService(config, {
    store,
    clock,
    env: deps.env,
    logger,
    onChange: () => {
      directory.invalidate();
      sourceManager.wake();
    },
  });
  const sourceGauge = (name: string, help: string, value: (s: SourceStatus) => number) =>
    metrics.labelledGauge(name, help, ['project', 'source'], async () => {
      const out = [];
      for (const record of await store.sources.listAll()) {
        const view = (await sources.view(record)) as { status: SourceStatus };
        out.push({
          labels: { project: record.project, source: record.name },
          value: value(view.status),
        });
      }
      return out;
    });
  sourceGauge(
    'touchstone_source_lag_seconds',
    'Seconds since the last complete pull of a source began.',
    (s) => s.lagSeconds ?? 0,
  );
  sourceGauge(
    'touchstone_source_watermark_age_seconds',
    'Seconds the watermark trails real time (healthy: about maxTraceDuration).',
    (s) => Math.max(0, (clock.now() - Date.parse(s.watermark)) / 1000),
  );
  sourceGauge('touchstone_source_failing', '1 while a source is in phase error.', (s) =>
    s.phase === 'error' ? 1 : 0,
  );
  sourceGauge(
    'touchstone_source_deferred_traces',
    'Traces the store still reports running.',
    (s) => s.deferred,
  );
  metrics.gauge(
    'touchstone_online_queue_depth',
    'Trace versions waiting for online scoring (work items).',
    async () => (await store.work.stats()).depth,
  );
  metrics.gauge(
    'touchstone_online_oldest_item_age_seconds',
    'Age of the oldest work item waiting for online scoring; 0 when none.',
    async () => {
      const { oldestCreatedAt } = await store.work.stats();
      return oldestCreatedAt === undefined
        ? 0
        : Math.max(0, (clock.now() - oldestCreatedAt) / 1000);
    },
  );
  metrics.labelledGauge(
    'touchstone_policy_alert_firing',
    'Policy alerts: 1 while firing, 0 otherwise.',
    ['project', 'policy', 'metric'],
    async () =>
      (await store.alerts.states()).map((s) => ({
        labels: { project: s.project, policy: s.policy, metric: s.metric },
        value: s.firing ? 1 : 0,
      })),
  );
  const idempotency = new IdempotencyService({ store, clock, logger });
  const datasets = createDatasetService(config, {
    env: deps.env,
    logger,
    clock,
    proxy: proxySettingsFromConfig(config.proxy),
  });
  // Targets run under the server's rules: granted variables only, no command targets, private
  // hosts only when allow-listed.
  const runTargets: Omit<TargetDeps, 'project'> = {
    env: deps.env,
    grants: credentials,
    allowCommand: false,
    outbound: {
      allowHosts: config.runs.allow_hosts,
      proxy: proxySettingsFromConfig(config.proxy),
    },
    clock,
  };
  const runExecutor = new RunExecutor({
    store,
    clock,
    registry: evaluation.registry,
    judge: (name) => evaluation.findJudge(name),
    events: webhooks.emitter,
    targets: runTargets,
    datasets,
    evaluation: metrics,
    logger,
    options: {
      maxConcurrentRuns: config.runs.max_concurrent,
      leaseMs: config.runs.lease_timeout,
    },
  });
  const runs = new RunService({
    store,
    clock,
    registry: evaluation.registry,
    judgeExists: (name) => evaluation.findJudge(name) !== undefined,
    events: webhooks.emitter,
    datasets,
    logger,
    preflightTarget: (spec, project) =>
      preflightTarget(spec.target, spec.environment, { ...runTargets, project }),
    onCreated: () => runExecutor.wake(),
  });
  const runRetention = new RunRetention({
    store,
    clock,
    logger,
    options: {
      retentionMs: config.runs.retention,
      projectRetentionMs: config.runs.project_retention,
      intervalMs: SWEEP_INTERVAL_MS,
    },
  });
  const traces = new TraceQueries(store);
  const server = await buildServer({
    logger,
    bodyLimit: config.limits.max_body_bytes,
    requestTimeoutMs: config.limits.request_timeout,
    authRequired: authRequired(config),
    bearer: auth.bearer,
    audit,
    keys,
    evaluation,
    metrics,
    ingest,
    traces,
    maxAttributeBytes: config.traces.max_attribute_bytes,
    webhooks: webhooks.service,
    policies,
    scores: new ScoreQueries(store),
    annotations: new AnnotationService({
      store,
      clock,
      traces,
      events: webhooks.emitter,
      sinks: resultSinks,
      redactText: (text) => redactor.redactText(text),
    }),
    sources,
    runs,
    idempotency,
    datasets,
    uiDir: config.ui.enabled ? (config.ui.assets_dir ?? DEFAULT_UI_DIR) : undefined,
    writeLimits: {
      maxRequests: config.limits.max_inflight_write_requests,
      maxBytes: config.limits.max_inflight_write_bytes,
    },
    ingestConcurrency: ingestConcurrency(config),
    ready: async () => {
      await store.ping();
      if (!(await store.migrationsApplied())) throw new Error('migrations not applied');
    },
  });

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      const timer = setTimeout(
        () => server.server.closeAllConnections?.(),
        config.shutdown_timeout,
      );
      timer.unref();
      try {
        await server.close();
        await completion.shutdown();
        await completer.shutdown();
        await engine.shutdown();
        await sourceManager.shutdown();
        await writeBacks.shutdown();
        await runExecutor.shutdown();
        await runRetention.shutdown();
        await idempotency.shutdown();
        await audit.shutdown();
      } finally {
        clearTimeout(timer);
        // Before the store: interrupted attempts are recorded so another replica resends them.
        await webhooks.close();
        await http.close();
        await auth.close();
        await sourceHttp.close();
        await datasets.close();
        await store.close();
      }
    })();
    return closing;
  };

  return {
    config,
    server,
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
    runs,
    runExecutor,
    runRetention,
    idempotency,
    datasets,
    async listen() {
      const { host, port } = splitListen(config.listen);
      await server.listen({ host, port });
      completion.start();
      webhooks.dispatcher.start();
      if (config.online.enabled) {
        engine.start();
        // Only replicas that run the engine pull, so a source is never read twice at once.
        sourceManager.start();
      }
      writeBacks.start();
      runExecutor.start();
      runRetention.start();
      idempotency.start();
      audit.start();
      const addr = server.server.address();
      if (addr === null || typeof addr === 'string') return config.listen;
      return addr.family === 'IPv6'
        ? `[${addr.address}]:${addr.port}`
        : `${addr.address}:${addr.port}`;
    },
    close,
  };
}
