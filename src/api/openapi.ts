import { z } from 'zod';
import { AuthErrors, CreateKeySchema, type Permission, TokenRequestSchema } from '../auth/index.js';
import {
  ERROR_KINDS,
  RESOURCE_API_VERSION,
  RecordSchema,
  ResourceNameSchema,
} from '../core/index.js';
import { EvaluateRequestSchema, EvaluatorRefSchema } from '../evaluators/index.js';
import {
  GUARD_POLICY_RESOURCE,
  PromptGuardRequestSchema,
  PromptGuardResponseSchema,
} from '../guardrails/index.js';
import { AnnotationSchema, POLICY_RESOURCE, PolicySpecSchema } from '../policies/index.js';
import type { ResourceDescriptor } from '../resources/index.js';
import { GateSchema, RunPlainSchema, RunResourceSchema, RunSpecSchema } from '../runs/index.js';
import { SOURCE_RESOURCE, SourceSpecSchema } from '../sources/index.js';
import { WEBHOOK_RESOURCE } from '../webhooks/index.js';
import { AuditListQuerySchema } from './routes/audit.js';
import { DatasetUploadQuerySchema } from './routes/datasets.js';
import { KeyPageQuerySchema } from './routes/keys.js';
import { RescoreBodySchema } from './routes/policies.js';
import { RunGetQuerySchema } from './routes/runs.js';
import { ScoreAggregateQuerySchema, ScoreListQuerySchema } from './routes/scores.js';
import { BackfillBodySchema } from './routes/sources.js';
import { TraceListQuerySchema, TraceViewSchema } from './routes/traces.js';
import { ApplyQuerySchema, PageQuerySchema } from './validate.js';

/**
 * The OpenAPI 3.1 description of the REST API, built from the zod schemas the handlers parse
 * with (never copies of them), so a client generated from it sends what the server accepts.
 * Answers other than the resource envelope are described in words and typed loosely: the
 * services build them as plain objects, without a schema to publish.
 */

export const OPENAPI_PATH = '/v1alpha1/openapi.json';

type JsonSchema = Record<string, unknown>;

/** Who may call an operation: a permission, any valid key, or anyone. */
export type Access = Permission | 'any-key' | 'public';

interface QueryParam {
  name: string;
  schema: z.ZodType;
  description?: string;
  /** Repeatable (`labels=a=1&labels=b=2`). */
  repeated?: true;
}

export interface Operation {
  method: 'get' | 'post' | 'delete';
  /** OpenAPI form: `{name}` parameters, custom verbs after a literal colon. */
  path: string;
  operationId: string;
  tag: string;
  summary: string;
  access: Access;
  /** Each property is a query parameter (the object the handler parses the query with). */
  query?: z.ZodObject;
  params?: QueryParam[];
  /** Component names of the accepted JSON bodies (more than one: any of them). */
  body?: string[];
  /** Non-JSON bodies by media type. */
  rawBody?: Record<string, JsonSchema>;
  idempotent?: true;
  response: string;
  /** Component name of the JSON answer's schema; a loose object when absent. */
  answer?: string;
  /** Media types of the 200 answer; JSON when absent. */
  responseMedia?: Record<string, JsonSchema>;
  /** OTLP/HTTP: errors are a google.rpc.Status in the request's encoding, not our error body. */
  otlp?: true;
}

/**
 * Request bodies and the parts they share, registered under the component name each is published
 * as (a part met inside a body becomes a `$ref`, so generated clients get one named type).
 */
const bodies: Record<string, z.ZodType> = {
  Record: RecordSchema,
  EvaluatorRef: EvaluatorRefSchema,
  Gate: GateSchema,
  PolicySpec: PolicySpecSchema,
  SourceSpec: SourceSpecSchema,
  RunSpec: RunSpecSchema,
  CreateKeyRequest: CreateKeySchema,
  EvaluateRequest: EvaluateRequestSchema,
  ...POLICY_RESOURCE.bodies,
  RescoreRequest: RescoreBodySchema,
  ...SOURCE_RESOURCE.bodies,
  BackfillRequest: BackfillBodySchema,
  ...WEBHOOK_RESOURCE.bodies,
  ...GUARD_POLICY_RESOURCE.bodies,
  PromptGuardRequest: PromptGuardRequestSchema,
  PromptGuardResponse: PromptGuardResponseSchema,
  Run: RunPlainSchema,
  RunResource: RunResourceSchema,
  AnnotationRequest: AnnotationSchema,
  UiTokenRequest: TokenRequestSchema,
};

const project: QueryParam = {
  name: 'project',
  schema: ResourceNameSchema.optional(),
  description: "The project; default: the key's own (or `default` without auth).",
};
const labels: QueryParam = {
  name: 'labels',
  schema: z.string(),
  description: 'A `key=value` label filter; repeat for several (all must match).',
  repeated: true,
};

const binary = { type: 'string', contentMediaType: 'application/octet-stream' };
const otlpBody = {
  'application/x-protobuf': binary,
  'application/json': { type: 'object' },
};

/**
 * Apply, list, get and delete of a resource in the REST convention of DESIGN §5: what
 * resource-routes.ts registers for every resource, described from the same descriptor.
 */
export function resourceOperations(resource: ResourceDescriptor): Operation[] {
  const { plural: tag, title: kind, access } = resource;
  const item = `/v1alpha1/${tag}/{name}`;
  const named = { tag, params: [project] };
  const answer = resource.envelope ? { answer: 'ResourceEnvelope' } : {};
  return [
    {
      method: 'post',
      path: `/v1alpha1/${tag}`,
      operationId: `apply${kind}`,
      tag,
      summary: `Create or replace a ${kind.toLowerCase()} by name (\`validate_only=true\` checks it without storing).`,
      access: access.write,
      query: ApplyQuerySchema,
      body: Object.keys(resource.bodies),
      idempotent: true,
      response: `The ${kind.toLowerCase()} as stored.`,
      ...answer,
    },
    {
      method: 'get',
      path: `/v1alpha1/${tag}`,
      operationId: `list${kind}s`,
      tag,
      summary: `List a project's ${tag}, paged.`,
      access: access.read,
      query: PageQuerySchema,
      response: `\`{"${tag}": [...], "next_page_token"?}\`.`,
    },
    {
      method: 'get',
      path: item,
      operationId: `get${kind}`,
      ...named,
      summary: `Get one ${kind.toLowerCase()}.`,
      access: access.read,
      response: `The ${kind.toLowerCase()}.`,
      ...answer,
    },
    {
      method: 'delete',
      path: item,
      operationId: `delete${kind}`,
      ...named,
      summary: `Delete a ${kind.toLowerCase()}.`,
      access: access.write,
      ...(resource.idempotentDelete ? { idempotent: true as const } : {}),
      response: `The deleted ${kind.toLowerCase()}.`,
      ...answer,
    },
  ];
}

/** A custom verb, `POST /v1alpha1/<plural>/{name}:<verb>`, on a resource of a project. */
function verb(
  path: string,
  operationId: string,
  summary: string,
  access: Permission,
  answer: Pick<Operation, 'response' | 'answer' | 'body'>,
): Operation {
  const tag = path.split('/')[2] as string;
  return { method: 'post', path, operationId, tag, summary, access, params: [project], ...answer };
}

const sourceAfter = { response: 'The source after the action.', answer: 'ResourceEnvelope' };

/** Every REST operation the server registers (a test compares this with the live routes). */
export const OPERATIONS: readonly Operation[] = [
  {
    method: 'get',
    path: '/healthz',
    operationId: 'health',
    tag: 'health',
    summary: 'Liveness.',
    access: 'public',
    response: '`{"status": "ok", "service": "touchstone"}` while the process runs.',
  },
  {
    method: 'get',
    path: '/readyz',
    operationId: 'ready',
    tag: 'health',
    summary: 'Readiness: the database answers and migrations are applied (else 503).',
    access: 'public',
    response: '`{"status": "ready"}`.',
  },
  {
    method: 'get',
    path: '/metrics',
    operationId: 'metrics',
    tag: 'health',
    summary: 'Prometheus metrics.',
    access: 'metrics.read',
    response: 'Prometheus text exposition.',
    responseMedia: { 'text/plain': { type: 'string' } },
  },
  {
    method: 'get',
    path: OPENAPI_PATH,
    operationId: 'openapi',
    tag: 'meta',
    summary: 'This document.',
    access: 'public',
    response: 'The OpenAPI 3.1 document of the REST API.',
  },
  {
    method: 'get',
    path: '/v1alpha1/whoami',
    operationId: 'whoami',
    tag: 'meta',
    summary: 'Who the request acts as and the projects it may read.',
    access: 'any-key',
    response:
      '`{"kind", "principal", "keyId"?, "subject"?, "email"?, "groups"?, "project"?, "roles", "permissions", "scope"?, "projects"}` (`principal`: the name writes are recorded under, e.g. who annotated).',
  },
  {
    method: 'get',
    path: '/ui/login/config',
    operationId: 'uiSignInConfig',
    tag: 'ui',
    summary: `The web UI's sign-in at an identity provider (\`ui.sign_in\`): 404 \`${AuthErrors.UI_SIGN_IN_NOT_CONFIGURED.code}\` on a server of API keys only.`,
    access: 'public',
    response: '`{"issuer", "client_id", "scopes": [...], "authorization_endpoint"}`.',
  },
  {
    method: 'post',
    path: '/ui/login/token',
    operationId: 'uiSignInToken',
    tag: 'ui',
    summary:
      'Exchanges the authorization code the provider sent back to the web UI (with its PKCE verifier) for an ID token; refresh and access tokens are not returned.',
    access: 'public',
    body: ['UiTokenRequest'],
    response: '`{"id_token", "expires_at"}` (RFC 3339: when the ID token expires).',
  },
  {
    method: 'post',
    path: '/v1alpha1/keys',
    operationId: 'createKey',
    tag: 'keys',
    summary: 'Create an API key; its secret is returned only here.',
    access: 'keys.write',
    body: ['CreateKeyRequest'],
    idempotent: true,
    response: '`{"key": {...}, "secret": "tsk_…"}`.',
  },
  {
    method: 'get',
    path: '/v1alpha1/keys',
    operationId: 'listKeys',
    tag: 'keys',
    summary: "List a project's keys (never their secrets), paged.",
    access: 'keys.read',
    query: KeyPageQuerySchema,
    params: [project],
    response: '`{"keys": [...], "next_page_token"?}`.',
  },
  {
    method: 'get',
    path: '/v1alpha1/audit',
    operationId: 'listAudit',
    tag: 'audit',
    summary:
      "The audit trail (writes and refusals), newest first, paged; an admin reads their project's.",
    access: 'audit.read',
    query: AuditListQuerySchema,
    response:
      '`{"entries": [{"id", "at", "principal", "principalKind", "action", "resource", "project"?, "outcome", "status", "code"?, "requestId"}], "next_page_token"?}`.',
  },
  {
    method: 'delete',
    path: '/v1alpha1/keys/{id}',
    operationId: 'revokeKey',
    tag: 'keys',
    summary: 'Revoke a key.',
    access: 'keys.write',
    response: '`{"key": {...}}`.',
  },
  {
    method: 'post',
    path: '/v1alpha1/evaluate',
    operationId: 'evaluate',
    tag: 'evaluate',
    summary: 'Score records with evaluators; nothing is stored.',
    access: 'evaluate',
    body: ['EvaluateRequest'],
    idempotent: true,
    response: '`{"results": [{"recordId", "results": [...]}]}`.',
  },
  {
    method: 'get',
    path: '/v1alpha1/evaluators',
    operationId: 'listEvaluators',
    tag: 'evaluate',
    summary: 'The evaluator types, their params as JSON Schema.',
    access: 'evaluate',
    response: '`{"evaluators": [...]}`.',
  },
  {
    method: 'post',
    path: '/v1/traces',
    operationId: 'exportTraces',
    tag: 'ingest',
    summary: 'OTLP/HTTP trace export (protobuf or JSON; gzip or deflate).',
    access: 'traces.write',
    params: [project],
    rawBody: otlpBody,
    response: 'An OTLP ExportTraceServiceResponse in the request encoding.',
    responseMedia: otlpBody,
    otlp: true,
  },
  {
    method: 'post',
    path: '/v1/logs',
    operationId: 'exportLogs',
    tag: 'ingest',
    summary: 'OTLP/HTTP log export (the GenAI events); protobuf or JSON.',
    access: 'traces.write',
    params: [project],
    rawBody: otlpBody,
    response: 'An OTLP ExportLogsServiceResponse in the request encoding.',
    responseMedia: otlpBody,
    otlp: true,
  },
  {
    method: 'get',
    path: '/v1alpha1/traces',
    operationId: 'listTraces',
    tag: 'traces',
    summary: 'List completed traces, newest first, paged.',
    access: 'traces.read',
    query: TraceListQuerySchema,
    params: [labels],
    response: '`{"traces": [...], "next_page_token"?}`.',
  },
  {
    method: 'get',
    path: '/v1alpha1/traces/{traceId}',
    operationId: 'getTrace',
    tag: 'traces',
    summary: 'One trace and its record (`view=basic` leaves out the trajectory).',
    access: 'traces.read',
    params: [project, { name: 'view', schema: TraceViewSchema }],
    response: '`{"trace", "record", "trajectorySteps"?}`.',
  },
  {
    method: 'get',
    path: '/v1alpha1/traces/{traceId}/trajectory',
    operationId: 'getTrajectory',
    tag: 'traces',
    summary: "A trace's trajectory, paged.",
    access: 'traces.read',
    query: PageQuerySchema,
    response: '`{"steps": [...], "total", "next_page_token"?}`.',
  },
  {
    method: 'get',
    path: '/v1alpha1/traces/{traceId}/scores',
    operationId: 'getTraceScores',
    tag: 'scores',
    summary: "A trace's latest results per policy (and `@human`).",
    access: 'traces.read',
    params: [project],
    response: '`{"trace", "results": {policy: [...]}}`.',
  },
  {
    method: 'post',
    path: '/v1alpha1/traces/{traceId}/annotations',
    operationId: 'annotateTrace',
    tag: 'scores',
    summary: "A person's score on a trace (the `@human` group).",
    access: 'traces.annotate',
    params: [project],
    body: ['AnnotationRequest'],
    idempotent: true,
    response: '`{"project", "traceId", "policy": "@human", "result"}`.',
  },
  {
    method: 'get',
    path: '/v1alpha1/scores',
    operationId: 'listScores',
    tag: 'scores',
    summary: 'Scored traces with their results, newest scored first, paged.',
    access: 'traces.read',
    query: ScoreListQuerySchema,
    params: [labels],
    response: '`{"entries": [...], "next_page_token"?}`.',
  },
  {
    method: 'get',
    path: '/v1alpha1/scores:aggregate',
    operationId: 'aggregateScores',
    tag: 'scores',
    summary: 'Each policy metric over time, with window means and alert transitions.',
    access: 'traces.read',
    query: ScoreAggregateQuerySchema,
    params: [labels],
    response: 'The series of each policy metric.',
  },
  ...resourceOperations(POLICY_RESOURCE),
  verb(
    '/v1alpha1/policies/{name}:rescore',
    'rescorePolicy',
    'Score again the traces completed since a time.',
    'policies.write',
    { body: ['RescoreRequest'], response: '`{"policy", "since", "queued"}`.' },
  ),
  ...resourceOperations(SOURCE_RESOURCE),
  verb(
    '/v1alpha1/sources/{name}:pause',
    'pauseSource',
    'Stop polling.',
    'sources.write',
    sourceAfter,
  ),
  verb(
    '/v1alpha1/sources/{name}:resume',
    'resumeSource',
    'Poll again.',
    'sources.write',
    sourceAfter,
  ),
  verb(
    '/v1alpha1/sources/{name}:backfill',
    'backfillSource',
    'Pull the traces since a time again.',
    'sources.write',
    { ...sourceAfter, body: ['BackfillRequest'] },
  ),
  ...resourceOperations(WEBHOOK_RESOURCE),
  ...resourceOperations(GUARD_POLICY_RESOURCE),
  ...(['request', 'response'] as const).map(
    (phase): Operation => ({
      method: 'post',
      path: `/v1alpha1/guardrails/{policy}/${phase}`,
      operationId: phase === 'request' ? 'guardPrompt' : 'guardCompletion',
      tag: 'guardrails',
      summary: `The agentgateway prompt-guard webhook, ${phase} phase: the named GuardPolicy decides on the ${phase === 'request' ? 'prompt messages' : 'LLM answer choices'} (docs/guardrails.md).`,
      access: 'evaluate',
      params: [project],
      body: [phase === 'request' ? 'PromptGuardRequest' : 'PromptGuardResponse'],
      response:
        'Always 200 once the caller is authorized: `{"action": {"reason"}}` (pass), `{"action": {"body": {"messages"|"choices": [...]}, "reason"}}` (mask, same count), or `{"action": {"body": "<plain text>", "status_code": <int>, "reason"}}` (reject; 400 for a body that is not the gateway\'s shape, 503 when the guard cannot decide).',
    }),
  ),
  verb(
    '/v1alpha1/webhooks/{name}:test',
    'testWebhook',
    'Queue a `ping` delivery.',
    'webhooks.write',
    {
      response: 'The queued delivery.',
    },
  ),
  {
    method: 'get',
    path: '/v1alpha1/webhooks/{name}/deliveries',
    operationId: 'listWebhookDeliveries',
    tag: 'webhooks',
    summary: "A webhook's deliveries, newest first, paged.",
    access: 'webhooks.read',
    query: PageQuerySchema,
    response: '`{"deliveries": [...], "next_page_token"?}`.',
  },
  {
    method: 'post',
    path: '/v1alpha1/runs',
    operationId: 'createRun',
    tag: 'runs',
    summary: 'Start an evaluation run (`validate_only=true` checks the spec).',
    access: 'runs.create',
    query: ApplyQuerySchema,
    body: ['Run', 'RunResource'],
    idempotent: true,
    response: 'The run.',
  },
  {
    method: 'get',
    path: '/v1alpha1/runs',
    operationId: 'listRuns',
    tag: 'runs',
    summary: "A project's runs, newest first, paged.",
    access: 'runs.read',
    query: PageQuerySchema,
    response: '`{"runs": [...], "next_page_token"?}`.',
  },
  {
    method: 'get',
    path: '/v1alpha1/runs/{id}',
    operationId: 'getRun',
    tag: 'runs',
    summary: 'One run (`view=basic` leaves out the spec).',
    access: 'runs.read',
    query: RunGetQuerySchema,
    response: 'The run.',
  },
  {
    method: 'get',
    path: '/v1alpha1/runs/{id}/results',
    operationId: 'listRunResults',
    tag: 'runs',
    summary: "A run's per-record results, paged.",
    access: 'runs.read',
    query: PageQuerySchema,
    response: '`{"results": [...], "next_page_token"?}`.',
  },
  verb('/v1alpha1/runs/{id}:cancel', 'cancelRun', 'Cancel a run.', 'runs.create', {
    response: 'The run.',
  }),
  {
    method: 'delete',
    path: '/v1alpha1/runs/{id}',
    operationId: 'deleteRun',
    tag: 'runs',
    summary: 'Delete a finished run and its results.',
    access: 'runs.delete',
    params: [project],
    idempotent: true,
    response: 'The deleted run.',
  },
  {
    method: 'get',
    path: '/v1alpha1/datasets',
    operationId: 'listDatasets',
    tag: 'datasets',
    summary: "A project's published datasets, paged.",
    access: 'datasets.read',
    query: PageQuerySchema,
    response: '`{"datasets": [...], "next_page_token"?}`.',
  },
  {
    method: 'get',
    path: '/v1alpha1/datasets/{name}/records',
    operationId: 'listDatasetRecords',
    tag: 'datasets',
    summary: "One dataset version's records (the newest when `sha256` is absent), paged.",
    access: 'datasets.read',
    query: PageQuerySchema,
    params: [{ name: 'sha256', schema: z.string().optional() }],
    response: '`{"path", "total", "records": [...], "next_page_token"?}`.',
  },
  {
    method: 'post',
    path: '/v1alpha1/datasets/{name}/upload',
    operationId: 'uploadDataset',
    tag: 'datasets',
    summary: 'Publish a JSONL or Parquet file sent as the raw body (64 MiB at most).',
    access: 'datasets.write',
    query: DatasetUploadQuerySchema,
    rawBody: {
      'application/jsonl': { type: 'string' },
      'application/vnd.apache.parquet': binary,
      'application/octet-stream': binary,
    },
    idempotent: true,
    response: '`{"path", "records", "sha256"}`.',
  },
];

const toSchema = (schema: z.ZodType): JsonSchema => {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io: 'input',
    unrepresentable: 'any',
  }) as JsonSchema;
  return rest;
};

function parametersOf(op: Operation): JsonSchema[] {
  const path = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => ({
    name: m[1],
    in: 'path',
    required: true,
    schema: { type: 'string' },
  }));
  const shape = Object.entries(op.query?.shape ?? {}).map(([name, schema]) => ({
    name,
    schema: schema as z.ZodType,
  }));
  const query = [...shape, ...(op.params ?? [])].map((p: QueryParam) => {
    const schema = toSchema(p.schema);
    return {
      name: p.name,
      in: 'query',
      ...(p.description === undefined ? {} : { description: p.description }),
      ...(p.repeated || p.schema.safeParse(undefined).success ? {} : { required: true }),
      schema: p.repeated ? { type: 'array', items: schema } : schema,
      ...(p.repeated ? { style: 'form', explode: true } : {}),
    };
  });
  const idempotency = op.idempotent
    ? [{ $ref: '#/components/parameters/IdempotencyKey' }]
    : ([] as JsonSchema[]);
  return [...path, ...query, ...idempotency];
}

const media = (byType: Record<string, JsonSchema>) =>
  Object.fromEntries(Object.entries(byType).map(([type, schema]) => [type, { schema }]));

function requestBodyOf(op: Operation): JsonSchema | undefined {
  if (op.rawBody !== undefined) {
    return {
      required: true,
      content: media(op.rawBody),
    };
  }
  if (op.body === undefined) return undefined;
  const refs = op.body.map((name) => ({ $ref: `#/components/schemas/${name}` }));
  return {
    required: true,
    content: { 'application/json': { schema: refs.length === 1 ? refs[0] : { anyOf: refs } } },
  };
}

const answerSchema = (op: Operation): JsonSchema =>
  op.answer === undefined ? { type: 'object' } : { $ref: `#/components/schemas/${op.answer}` };

const errorAnswer = (op: Operation) =>
  op.otlp
    ? {
        description: 'An error: a google.rpc.Status in the request encoding (OTLP/HTTP).',
        content: media(otlpBody),
      }
    : {
        description: 'An error: `code` is stable, `kind` decides the HTTP status.',
        content: media({ 'application/json': { $ref: '#/components/schemas/Error' } }),
      };

function operationObject(op: Operation): JsonSchema {
  const body = requestBodyOf(op);
  const parameters = parametersOf(op);
  return {
    operationId: op.operationId,
    tags: [op.tag],
    summary: op.summary,
    description:
      op.access === 'public'
        ? 'Needs no credential.'
        : op.access === 'any-key'
          ? 'Any valid key.'
          : `Needs the \`${op.access}\` permission.`,
    'x-touchstone-access': op.access,
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(body === undefined ? {} : { requestBody: body }),
    ...(op.access === 'public' ? { security: [] } : {}),
    responses: {
      '200': {
        description: op.response,
        content: media(op.responseMedia ?? { 'application/json': answerSchema(op) }),
      },
      default: errorAnswer(op),
    },
  };
}

function bodySchemas(): Record<string, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(bodies)) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, {
    target: 'draft-2020-12',
    io: 'input',
    unrepresentable: 'any',
    uri: (id) => `#/components/schemas/${id}`,
  });
  return Object.fromEntries(
    Object.entries(schemas).map(([id, { $schema: _, $id: __, ...rest }]) => [id, rest]),
  );
}

const ErrorSchema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'kind', 'message', 'requestId'],
      properties: {
        code: { type: 'string', description: 'Stable; see docs/errors.md.' },
        kind: { type: 'string', enum: [...ERROR_KINDS] },
        message: { type: 'string' },
        requestId: { type: 'string' },
        details: {
          type: 'array',
          items: {
            type: 'object',
            required: ['path', 'message'],
            properties: { path: { type: 'string' }, message: { type: 'string' } },
          },
        },
      },
    },
  },
};

/** What every declarative resource shares (OnlineEvalPolicy, TraceSource, Webhook, Run). */
const EnvelopeSchema = toSchema(
  z.object({
    apiVersion: z.literal(RESOURCE_API_VERSION),
    kind: z.string(),
    metadata: z.object({
      name: ResourceNameSchema,
      labels: z.record(z.string(), z.string()).optional(),
      generation: z.number().int().optional(),
      createdAt: z.string().optional(),
      updatedAt: z.string().optional(),
    }),
    spec: z.record(z.string(), z.unknown()),
    status: z.record(z.string(), z.unknown()).optional(),
  }),
);

/** The whole document; deterministic, so the checked-in docs/openapi.json can be compared. */
export function openApiDocument(): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const op of OPERATIONS) {
    paths[op.path] ??= {};
    (paths[op.path] as Record<string, JsonSchema>)[op.method] = operationObject(op);
  }
  return {
    openapi: '3.1.1',
    info: {
      title: 'Touchstone API',
      version: 'v1alpha1',
      description:
        'Evaluation service for AI agents. Errors: docs/errors.md; roles and permissions: docs/roles.md.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'An API key (`tsk_…`); not needed on a loopback server without auth.',
        },
      },
      parameters: {
        IdempotencyKey: {
          name: 'Idempotency-Key',
          in: 'header',
          description: 'Replays the stored outcome of a retried write for 24 hours.',
          schema: { type: 'string', minLength: 1, maxLength: 255 },
        },
      },
      schemas: { Error: ErrorSchema, ResourceEnvelope: EnvelopeSchema, ...bodySchemas() },
    },
  };
}
