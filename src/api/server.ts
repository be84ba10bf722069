import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { AuditTrail, BearerAuthenticator, BrowserSignIn, KeyService } from '../auth/index.js';
import { newRequestId } from '../core/index.js';
import type { DatasetService } from '../datasets/index.js';
import type { EvaluationService } from '../evaluators/index.js';
import type { GuardEngine, GuardPolicyService } from '../guardrails/index.js';
import type { IngestService, PrepareThreads, TraceQueries } from '../ingest/index.js';
import type { AnnotationService, PolicyService, ScoreQueries } from '../policies/index.js';
import type { RunService } from '../runs/index.js';
import type { SourceService } from '../sources/index.js';
import type { Metrics } from '../telemetry/index.js';
import type { WebhookService } from '../webhooks/index.js';
import {
  type AdmissionLimits,
  installAdmission,
  MAX_TURN_WAIT_MS,
  Turnstile,
  WriteAdmission,
} from './admission.js';
import { installAudit } from './audit-hook.js';
import { installAuth } from './auth-hook.js';
import { ApiErrors } from './error-codes.js';
import { sendError } from './errors.js';
import { instrumentHttp } from './http-metrics.js';
import { type IdempotencyService, installIdempotency } from './idempotency/index.js';
import { parseJsonBody } from './json.js';
import { auditRoutes } from './routes/audit.js';
import { datasetRoutes } from './routes/datasets.js';
import { evaluateRoutes } from './routes/evaluate.js';
import { guardrailRoutes } from './routes/guardrails.js';
import { healthRoutes } from './routes/health.js';
import { keyRoutes } from './routes/keys.js';
import { openApiRoutes } from './routes/openapi.js';
import { otlpRoutes } from './routes/otlp.js';
import { otlpLogRoutes } from './routes/otlp-logs.js';
import { policyRoutes } from './routes/policies.js';
import { runRoutes } from './routes/runs.js';
import { scoreRoutes } from './routes/scores.js';
import { sourceRoutes } from './routes/sources.js';
import { traceRoutes } from './routes/traces.js';
import { uiRoutes } from './routes/ui.js';
import { webhookRoutes } from './routes/webhooks.js';
import { whoamiRoutes } from './routes/whoami.js';
import { createFrontServer } from './rpc/front-server.js';
import { rpcRoutes } from './rpc/plugin.js';

export interface ServerDeps {
  logger: FastifyBaseLogger;
  bodyLimit: number;
  /** Longest a client may take to send a whole request (HTTP/1.1 or an HTTP/2 stream); 0 = no limit. */
  requestTimeoutMs: number;
  /** Most connections open at once; past it new ones are closed at once. */
  maxConnections?: number;
  authRequired: boolean;
  /** Resolves bearer credentials (API keys, identity-provider tokens) on every door. */
  bearer: BearerAuthenticator;
  /** Records writes and refusals; `GET /v1alpha1/audit` reads it. */
  audit: AuditTrail;
  keys: KeyService;
  evaluation: EvaluationService;
  metrics: Metrics;
  ingest: IngestService;
  /** Threads preparing OTLP trace requests (`traces.ingest_threads`); undefined: in-process. */
  ingestThreads: PrepareThreads | undefined;
  traces: TraceQueries;
  maxAttributeBytes: number;
  webhooks: WebhookService;
  policies: PolicyService;
  scores: ScoreQueries;
  annotations: AnnotationService;
  sources: SourceService;
  runs: RunService;
  /** Idempotency-Key on the routes marked `config.idempotency`. */
  idempotency: IdempotencyService;
  datasets: DatasetService;
  /** GuardPolicy resources and the guard engine the prompt-guard webhook asks. */
  guardrails: { service: GuardPolicyService; engine: GuardEngine };
  /** The built web UI's directory; undefined = no UI at /ui/. */
  uiDir: string | undefined;
  /** The UI's sign-in at an identity provider (`ui.sign_in`); undefined = API keys only. */
  signIn: BrowserSignIn | undefined;
  /** Writes in flight and the body bytes they hold; past either, writes are shed (503). */
  writeLimits: AdmissionLimits;
  /** OTLP requests decoded and stored at once (the store's useful concurrency). */
  ingestConcurrency: number;
  ready(): Promise<void>;
}

/**
 * How often HTTP/1.1 connections are held against `limits.request_timeout` and the headers
 * timeout (Node's default, 30 s, let a 60 s timeout run to 90 s).
 */
const CONNECTION_CHECK_INTERVAL_MS = 5_000;

/** Builds the HTTP edge (not listening): tests drive it with `inject()`. */
export async function buildServer(deps: ServerDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger,
    bodyLimit: deps.bodyLimit,
    requestTimeout: deps.requestTimeoutMs,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && /^[A-Za-z0-9._-]{1,128}$/.test(given)
        ? given
        : newRequestId();
    },
    logController: new LogController({
      requestIdLogLabel: 'requestId',
      disableRequestLogging: true,
    }),
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    // HTTP/1.1 and cleartext HTTP/2 (gRPC) on the one port.
    serverFactory: (handler, options) =>
      createFrontServer(handler, {
        keepAliveTimeout: options.keepAliveTimeout as number | undefined,
        requestTimeout: options.requestTimeout as number | undefined,
        connectionTimeout: options.connectionTimeout as number | undefined,
        checkIntervalMs: CONNECTION_CHECK_INTERVAL_MS,
        ...(deps.maxConnections === undefined
          ? {}
          : {
              maxConnections: deps.maxConnections,
              onDropped: (count: number) =>
                deps.logger.warn(
                  { count, limit: deps.maxConnections },
                  'connections closed at once: the server is at limits.max_connections',
                ),
            }),
      }),
  });

  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    /^application\/([a-z0-9.+-]*\+)?json$/,
    { parseAs: 'string', bodyLimit: deps.bodyLimit },
    (_request, body: string | Buffer, done) => {
      try {
        done(null, parseJsonBody(body.toString()));
      } catch (err) {
        done(err as Error, undefined);
      }
    },
  );

  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
    reply.header('server-timing', `app;dur=${reply.elapsedTime.toFixed(3)}`);
  });
  app.setErrorHandler((err, request, reply) => sendError(request, reply, err, deps.bodyLimit));
  app.setNotFoundHandler((request, reply) =>
    sendError(
      request,
      reply,
      ApiErrors.ROUTE_NOT_FOUND(`no endpoint ${request.method} ${request.url.split('?')[0]}`),
      deps.bodyLimit,
    ),
  );

  instrumentHttp(app, deps.metrics);
  const admission = new WriteAdmission(deps.writeLimits, deps.metrics);
  deps.metrics.gauge(
    'touchstone_write_requests_in_flight',
    'Write requests (OTLP, REST writes, RPC) admitted and not yet answered.',
    async () => admission.inFlight.requests,
  );
  deps.metrics.gauge(
    'touchstone_write_bytes_in_flight',
    'Body bytes (received and inflated) held by admitted write requests.',
    async () => admission.inFlight.bytes,
  );
  // Before auth: its refusals are audited too.
  installAudit(app, deps.audit);
  installAuth(app, deps.bearer, deps.authRequired);
  installAdmission(app, admission);
  // Before any route: its onRoute hook finds the marked routes as they are registered.
  installIdempotency(app, deps.idempotency);
  await app.register(healthRoutes, { ready: deps.ready, metrics: deps.metrics });
  await app.register(openApiRoutes);
  await app.register(keyRoutes, { keys: deps.keys });
  await app.register(auditRoutes, { audit: deps.audit });
  await app.register(whoamiRoutes, { traces: deps.traces });
  await app.register(evaluateRoutes, { evaluation: deps.evaluation });
  await app.register(traceRoutes, { traces: deps.traces });
  await app.register(webhookRoutes, { webhooks: deps.webhooks });
  await app.register(policyRoutes, { policies: deps.policies });
  await app.register(scoreRoutes, {
    scores: deps.scores,
    traces: deps.traces,
    policies: deps.policies,
    annotations: deps.annotations,
  });
  await app.register(sourceRoutes, { sources: deps.sources });
  await app.register(runRoutes, { runs: deps.runs });
  await app.register(datasetRoutes, { datasets: deps.datasets });
  await app.register(guardrailRoutes, {
    guardPolicies: deps.guardrails.service,
    engine: deps.guardrails.engine,
  });
  if (deps.uiDir !== undefined) {
    await app.register(uiRoutes, { dir: deps.uiDir, signIn: deps.signIn });
  }
  await app.register(rpcRoutes, {
    datasets: deps.datasets,
    deleteRun: (principal, project, id) => deps.runs.delete(principal, project, id),
    idempotency: deps.idempotency,
    readMaxBytes: deps.datasets.limits.maxUploadBytes + 1024 * 1024,
  });
  const otlp = {
    ingest: deps.ingest,
    threads: deps.ingestThreads,
    bodyLimit: deps.bodyLimit,
    maxAttributeBytes: deps.maxAttributeBytes,
    admission,
    turns: new Turnstile(deps.ingestConcurrency, MAX_TURN_WAIT_MS, admission),
  };
  await app.register(otlpRoutes, otlp);
  await app.register(otlpLogRoutes, otlp);
  return app;
}
