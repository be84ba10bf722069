/**
 * @module api
 * The HTTP edge: Fastify plug-ins per resource, the one error mapper (errors.ts), auth hook and
 * the hook feeding HTTP responses to telemetry (which owns the registry). Calls application
 * functions in the domain areas and holds no business logic.
 */
export { ApiErrors } from './error-codes.js';
export { httpStatusOf, KIND_WIRE, toErrorBody } from './errors.js';
export { IdempotencyService } from './idempotency/index.js';
export { openApiDocument } from './openapi.js';
export { DatasetUploadQuerySchema } from './routes/datasets.js';
export { RunGetQuerySchema } from './routes/runs.js';
export { ScoreAggregateQuerySchema, ScoreListQuerySchema } from './routes/scores.js';
export { TraceListQuerySchema } from './routes/traces.js';
export { DEFAULT_UI_DIR } from './routes/ui.js';
export { whoamiView } from './routes/whoami.js';
export { buildServer, type ServerDeps } from './server.js';
export { PageQuerySchema } from './validate.js';
