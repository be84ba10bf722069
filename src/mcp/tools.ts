/**
 * The tool registry: one list, served at `/mcp` and by `touchstone mcp`. Each tool names the
 * permission it needs, takes its input schema from the REST API's (narrowed where a tool result
 * must stay small), and calls the same application functions as the REST routes with the
 * caller's own principal, so a scoped key sees through a tool exactly what it sees through REST.
 * No tool writes secrets or acts as an administrator. docs/mcp.md
 */
import { z } from 'zod';
import {
  PageQuerySchema,
  RunGetQuerySchema,
  ScoreAggregateQuerySchema,
  ScoreListQuerySchema,
  TraceListQuerySchema,
  whoamiView,
} from '../api/index.js';
import { type AuditRecord, authorize, type Permission, type Principal } from '../auth/index.js';
import type { EvalRecord } from '../core/index.js';
import type { DatasetService } from '../datasets/index.js';
import { type EvaluationService, EvaluatorRefSchema } from '../evaluators/index.js';
import { type TraceQueries, traceSummaryView } from '../ingest/index.js';
import type { PolicyService, ScoreQueries } from '../policies/index.js';
import type { RunService } from '../runs/index.js';
import type { SourceService } from '../sources/index.js';
import type { WebhookService } from '../webhooks/index.js';
import { DEFAULT_FIELD_CHARS, RESULT_HARD_CAP_CHARS } from './bounds.js';
import { McpErrors } from './error-codes.js';
import { type IdempotentCall, runKeyed } from './keyed.js';
import { searchTraces } from './search.js';

/** What the tools call: the services the REST routes call. */
export interface McpServices {
  traces: TraceQueries;
  scores: ScoreQueries;
  policies: PolicyService;
  evaluation: EvaluationService;
  runs: RunService;
  datasets: DatasetService;
  sources: SourceService;
  webhooks: WebhookService;
  /** `create_run`'s `idempotency_key`, in the scope REST's `Idempotency-Key` uses. */
  idempotency: IdempotentCall;
  /** Where tool writes and refusals are recorded (`GET /v1alpha1/audit`). */
  audit?: { record(entry: AuditRecord): void };
}

/** What a tool answers: a JSON object, bounded by the caller (bounds.ts) before it is sent. */
export interface ToolAnswer {
  value: Record<string, unknown>;
  /** How to see what a trimmed answer left out. */
  hint: string;
  /** Characters a string keeps (default DEFAULT_FIELD_CHARS). */
  fieldChars?: number;
  /** Characters of the whole answer (default RESULT_BUDGET_CHARS). */
  budget?: number;
}

export interface McpTool<S extends z.ZodObject = z.ZodObject> {
  name: string;
  title: string;
  description: string;
  input: S;
  /** The permission the tool needs; undefined = any authenticated caller (`whoami`). */
  permission: Permission | undefined;
  annotations: {
    readOnlyHint: boolean;
    destructiveHint: boolean;
    idempotentHint: boolean;
    openWorldHint: boolean;
  };
  run(principal: Principal, services: McpServices, args: z.infer<S>): Promise<ToolAnswer>;
}

/** Defined with its input type checked against its handler. */
function tool<S extends z.ZodObject>(t: McpTool<S>): McpTool {
  return t as unknown as McpTool;
}

const READ = {
  readOnlyHint: true,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false,
};

const LABELS = z
  .record(z.string().min(1), z.string())
  .optional()
  .describe('label filters: every key must have this value');

/** A page of a resource list, narrowed: tool answers hold fewer items than REST pages. */
function pageInput(max: number, fallback: number) {
  return PageQuerySchema.extend({
    page_size: z.int().min(1).max(max).default(fallback),
  });
}

function paged<T>(key: string, page: { items: T[]; nextPageToken?: string | undefined }) {
  return {
    [key]: page.items,
    ...(page.nextPageToken === undefined ? {} : { next_page_token: page.nextPageToken }),
  };
}

function pageRequest(args: { page_size: number; page_token?: string | undefined }) {
  return {
    pageSize: args.page_size,
    ...(args.page_token === undefined ? {} : { pageToken: args.page_token }),
  };
}

const SMALLER_PAGE = 'ask again with a smaller page_size to see every item of the page';

const RECORD_FIELDS = [
  'input',
  'output',
  'reference',
  'context',
  'metadata',
  'usage',
  'provenance',
  'trajectory',
] as const;

export const MAX_STEP_LIMIT = 100;
export const MAX_FIELD_CHARS = 20_000;
export const MAX_EVALUATE_ITEMS = 20;
export const MAX_EVALUATE_RECORD_BYTES = 64 * 1024;
export const MAX_DATASET_ROWS = 1_000;
export const MAX_DATASET_BYTES = 1024 * 1024;

const GetTraceInput = z.strictObject({
  project: TraceListQuerySchema.shape.project,
  trace_id: z
    .string()
    .min(1)
    .max(256)
    .describe('the trace id (or the id its source store gives it)'),
  include: z
    .array(z.enum(RECORD_FIELDS))
    .default(['input', 'output'])
    .describe('record fields to return besides the summary'),
  max_chars_per_field: z
    .int()
    .min(100)
    .max(MAX_FIELD_CHARS)
    .default(DEFAULT_FIELD_CHARS)
    .describe('longer strings are cut and marked with their length'),
  step_offset: z.int().min(0).default(0).describe('first trajectory step returned'),
  step_limit: z.int().min(1).max(MAX_STEP_LIMIT).default(20).describe('trajectory steps returned'),
});

async function getTrace(
  principal: Principal,
  services: McpServices,
  args: z.infer<typeof GetTraceInput>,
): Promise<ToolAnswer> {
  const { trace, record } = await services.traces.get(principal, args.project, args.trace_id);
  const picked: Record<string, unknown> = { id: record.id };
  for (const field of args.include) {
    if (field !== 'trajectory' && record[field] !== undefined) picked[field] = record[field];
  }
  const steps = record.trajectory ?? [];
  const window = steps.slice(args.step_offset, args.step_offset + args.step_limit);
  const after = Math.max(0, steps.length - args.step_offset - window.length);
  return {
    value: {
      trace: traceSummaryView(trace),
      record: picked,
      ...(args.include.includes('trajectory')
        ? {
            trajectory: {
              total: steps.length,
              offset: args.step_offset,
              steps: window,
              ...(after > 0
                ? { omitted_after: after, next_step_offset: steps.length - after }
                : {}),
            },
          }
        : { trajectory_steps: steps.length }),
    },
    fieldChars: args.max_chars_per_field,
    // A caller asking for longer fields gets a larger answer, never past the hard cap.
    budget: Math.min(RESULT_HARD_CAP_CHARS, Math.max(24_000, args.max_chars_per_field * 4)),
    hint: 'fetch less at once: fewer fields in include, a smaller step_limit (then step_offset), or a smaller max_chars_per_field',
  };
}

const EvaluateInput = z
  .strictObject({
    project: z.string().min(1).optional(),
    judge: z.string().min(1).optional(),
    evaluators: z.array(EvaluatorRefSchema).min(1).max(MAX_EVALUATE_ITEMS),
    records: z
      .array(z.record(z.string(), z.unknown()))
      .min(1)
      .max(MAX_EVALUATE_ITEMS)
      .optional()
      .describe(`records to score (at most ${MAX_EVALUATE_ITEMS}, each at most 64 KiB of JSON)`),
    trace_ids: z
      .array(z.string().min(1).max(256))
      .min(1)
      .max(MAX_EVALUATE_ITEMS)
      .optional()
      .describe('stored traces to score, instead of records'),
  })
  .refine((a) => (a.records === undefined) !== (a.trace_ids === undefined), {
    message: 'give either records or trace_ids',
    path: ['records'],
  });

async function evaluate(
  principal: Principal,
  services: McpServices,
  args: z.infer<typeof EvaluateInput>,
): Promise<ToolAnswer> {
  for (const [i, r] of (args.records ?? []).entries()) {
    if (JSON.stringify(r).length > MAX_EVALUATE_RECORD_BYTES) {
      throw McpErrors.MCP_ARGUMENT_TOO_LARGE(
        `records[${i}] is over 64 KiB; score larger records with POST /v1alpha1/evaluate`,
      );
    }
  }
  // The same permission, request and service as POST /v1alpha1/evaluate.
  authorize(principal, 'evaluate', args.project);
  let records: unknown[] = args.records ?? [];
  if (args.trace_ids !== undefined) {
    records = [];
    for (const id of args.trace_ids) {
      const found: { record: EvalRecord } = await services.traces.get(principal, args.project, id);
      records.push(found.record);
    }
  }
  const results = await services.evaluation.evaluate({
    ...(args.project === undefined ? {} : { project: args.project }),
    ...(args.judge === undefined ? {} : { judge: args.judge }),
    evaluators: args.evaluators,
    records,
  });
  return { value: { results }, hint: 'score fewer records or evaluators per call' };
}

const RUN_SPEC = z
  .record(z.string(), z.unknown())
  .describe(
    'the run as POST /v1alpha1/runs takes it: dataset, evaluators, gates, trials (docs/runs.md)',
  );

const UploadDatasetInput = z.strictObject({
  project: z.string().min(1).optional(),
  name: z.string().min(1).max(128),
  rows: z
    .array(z.record(z.string(), z.unknown()))
    .min(1)
    .max(MAX_DATASET_ROWS)
    .describe(`JSON records (at most ${MAX_DATASET_ROWS} rows and 1 MiB; larger files via REST)`),
});

export const TOOLS: readonly McpTool[] = [
  tool({
    name: 'whoami',
    title: 'Who am I',
    description:
      'The caller: principal, project, roles, permissions, read scope, and the projects it may read. Call first to choose arguments.',
    input: z.strictObject({}),
    permission: undefined,
    annotations: READ,
    run: async (principal, services) => ({
      value: await whoamiView(principal, services.traces),
      hint: 'none',
    }),
  }),
  tool({
    name: 'search_traces',
    title: 'Search traces',
    description:
      'Trace summaries, newest first, filtered by service, name, time, error, labels, policy results, and a CEL `filter` (the language of policy selectors, e.g. `error && "search" in tools`; variables in docs/policies.md). Paged with page_token.',
    input: TraceListQuerySchema.omit({ include: true, error: true, page_size: true }).extend({
      labels: LABELS,
      error: z.boolean().optional().describe('only failed (true) or successful (false) traces'),
      filter: z.string().min(1).max(4096).optional().describe('CEL selector over each trace'),
      include_scores: z.boolean().default(false).describe("each trace's latest results"),
      page_size: z.int().min(1).max(50).default(10),
    }),
    permission: 'traces.read',
    annotations: READ,
    run: async (principal, services, args) => ({
      value: await searchTraces(principal, services.traces, args),
      fieldChars: 200,
      hint: SMALLER_PAGE,
    }),
  }),
  tool({
    name: 'get_trace',
    title: 'Get a trace',
    description:
      'One trace: its summary, the record fields asked for (long strings cut and marked), and a window of trajectory steps. Page steps with step_offset/step_limit; the answer says how many were left out.',
    input: GetTraceInput,
    permission: 'traces.read',
    annotations: READ,
    run: getTrace,
  }),
  tool({
    name: 'get_trace_scores',
    title: "A trace's scores",
    description:
      'The latest results of every policy that scored a trace: evaluator, outcome, scores.',
    input: z.strictObject({
      project: z.string().min(1).optional(),
      trace_id: GetTraceInput.shape.trace_id,
    }),
    permission: 'traces.read',
    annotations: READ,
    run: async (principal, services, args) => {
      const found = await services.traces.get(principal, args.project, args.trace_id);
      const entry = await services.scores.forTrace(found.trace.project, found.trace.traceId);
      return {
        value: { ...(entry ?? { trace: traceSummaryView(found.trace), results: {} }) },
        fieldChars: 1000,
        hint: 'explanations are cut; read them in full with GET /v1alpha1/traces/{id}/scores',
      };
    },
  }),
  tool({
    name: 'list_scores',
    title: 'List scores',
    description:
      'Scored traces, newest first, with their results; filter by service, policy, evaluator, time, labels.',
    input: ScoreListQuerySchema.omit({ page_size: true }).extend({
      labels: LABELS,
      page_size: z.int().min(1).max(100).default(20),
    }),
    permission: 'traces.read',
    annotations: READ,
    run: async (principal, services, args) => {
      const page = await services.scores.list(
        principal,
        {
          ...(args.project === undefined ? {} : { project: args.project }),
          ...(args.service === undefined ? {} : { service: args.service }),
          ...(args.policy === undefined ? {} : { policy: args.policy }),
          ...(args.evaluator === undefined ? {} : { evaluator: args.evaluator }),
          ...(args.since === undefined ? {} : { since: Date.parse(args.since) }),
          labels: args.labels ?? {},
        },
        pageRequest(args),
      );
      return { value: paged('entries', page), fieldChars: 500, hint: SMALLER_PAGE };
    },
  }),
  tool({
    name: 'score_trends',
    title: 'Score trends',
    description:
      "Each policy metric over time (the UI's charts): window means per bucket, alert thresholds and states, alert transitions. Default: the last 24 h in 1 h buckets.",
    input: ScoreAggregateQuerySchema.extend({ labels: LABELS }),
    permission: 'traces.read',
    annotations: READ,
    run: async (principal, services, args) => ({
      value: {
        ...(await services.policies.series(principal, {
          ...(args.project === undefined ? {} : { project: args.project }),
          ...(args.policy === undefined ? {} : { policy: args.policy }),
          ...(args.evaluator === undefined ? {} : { evaluator: args.evaluator }),
          labels: args.labels ?? {},
          ...(args.since === undefined ? {} : { since: Date.parse(args.since) }),
          ...(args.until === undefined ? {} : { until: Date.parse(args.until) }),
          bucketMs: args.bucket,
        })),
      },
      hint: 'narrow to one policy or evaluator, a shorter range, or a larger bucket',
    }),
  }),
  tool({
    name: 'list_evaluators',
    title: 'List evaluators',
    description:
      'Evaluator types: what each needs, the scores it gives, whether it is cheap, its params.',
    input: z.strictObject({
      project: z.string().min(1).optional(),
      name: z.string().min(1).max(128).optional().describe('only types whose name contains this'),
    }),
    permission: 'evaluate',
    annotations: READ,
    run: async (principal, services, args) => {
      authorize(principal, 'evaluate', args.project);
      const all = services.evaluation.describeTypes();
      const name = args.name;
      return {
        value: { evaluators: name === undefined ? all : all.filter((e) => e.type.includes(name)) },
        hint: 'filter by name',
      };
    },
  }),
  tool({
    name: 'evaluate',
    title: 'Evaluate',
    description: `Scores records, or stored traces by id, with evaluators now (at most ${MAX_EVALUATE_ITEMS} of each); nothing is stored. Evaluators that use a judge model call it.`,
    input: EvaluateInput,
    permission: 'evaluate',
    annotations: {
      readOnlyHint: true,
      destructiveHint: false,
      idempotentHint: true,
      openWorldHint: true,
    },
    run: evaluate,
  }),
  tool({
    name: 'create_run',
    title: 'Create an offline run',
    description:
      'Starts an offline evaluation run and answers at once with its id and status: poll get_run. Give idempotency_key to make retries safe.',
    input: z.strictObject({
      project: z.string().min(1).optional(),
      spec: RUN_SPEC,
      idempotency_key: z.string().min(1).max(255).optional(),
      validate_only: z.boolean().default(false),
    }),
    permission: 'runs.create',
    annotations: {
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: false,
      openWorldHint: true,
    },
    run: async (principal, services, args) => {
      const create = async () =>
        services.runs.create(principal, args.spec, {
          ...(args.project === undefined ? {} : { project: args.project }),
          validateOnly: args.validate_only,
        });
      const run =
        args.idempotency_key === undefined
          ? await create()
          : await runKeyed(services.idempotency, principal, args.idempotency_key, args, create);
      return { value: { run }, hint: 'read the run with get_run' };
    },
  }),
  tool({
    name: 'get_run',
    title: 'Get a run',
    description: "A run's status, progress, summaries and gates (view=full adds its spec).",
    input: RunGetQuerySchema.extend({
      run_id: z.string().min(1).max(256),
      view: z.enum(['basic', 'full']).default('basic'),
    }).strict(),
    permission: 'runs.read',
    annotations: READ,
    run: async (principal, services, args) => ({
      value: {
        run:
          args.view === 'basic'
            ? await services.runs.progress(principal, args.project, args.run_id)
            : await services.runs.get(principal, args.project, args.run_id),
      },
      hint: 'use view=basic',
    }),
  }),
  tool({
    name: 'list_runs',
    title: 'List runs',
    description: 'Offline runs of a project, newest first, with status and summaries.',
    input: pageInput(50, 20).strict(),
    permission: 'runs.read',
    annotations: READ,
    run: async (principal, services, args) => ({
      value: paged('runs', await services.runs.list(principal, args.project, pageRequest(args))),
      hint: SMALLER_PAGE,
    }),
  }),
  tool({
    name: 'upload_dataset',
    title: 'Upload a small dataset',
    description: `Publishes JSON rows as a dataset version and answers with the path a run spec uses. At most ${MAX_DATASET_ROWS} rows and 1 MiB; upload larger files with the REST API or the CLI.`,
    input: UploadDatasetInput,
    permission: 'datasets.write',
    annotations: {
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: true,
      openWorldHint: false,
    },
    run: async (principal, services, args) => {
      const body = Buffer.from(args.rows.map((r) => JSON.stringify(r)).join('\n'), 'utf8');
      if (body.length > MAX_DATASET_BYTES) {
        throw McpErrors.MCP_ARGUMENT_TOO_LARGE(
          'rows are over 1 MiB as JSON lines; upload larger datasets with POST /v1alpha1/datasets/{name}/upload',
        );
      }
      const uploaded = await services.datasets.upload(
        principal,
        { project: args.project, name: args.name, format: 'jsonl' },
        body,
      );
      return { value: { dataset: uploaded }, hint: 'none' };
    },
  }),
  tool({
    name: 'list_sources',
    title: 'List trace sources',
    description:
      'Trace sources (MLflow, Phoenix, Langfuse, ...) with their status: phase, lag, counts, last error.',
    input: pageInput(50, 20).strict(),
    permission: 'sources.read',
    annotations: READ,
    run: async (principal, services, args) => ({
      value: paged(
        'sources',
        await services.sources.list(principal, args.project, pageRequest(args)),
      ),
      fieldChars: 500,
      hint: SMALLER_PAGE,
    }),
  }),
  tool({
    name: 'list_policies',
    title: 'List policies',
    description: 'Online evaluation policies with their alert states (firing, window mean, n).',
    input: pageInput(50, 20).strict(),
    permission: 'policies.read',
    annotations: READ,
    run: async (principal, services, args) => ({
      value: paged(
        'policies',
        await services.policies.list(principal, args.project, pageRequest(args)),
      ),
      fieldChars: 500,
      hint: SMALLER_PAGE,
    }),
  }),
  tool({
    name: 'list_webhook_deliveries',
    title: "A webhook's deliveries",
    description: "A webhook's deliveries, newest first: event, state, attempts, last status.",
    input: pageInput(50, 20)
      .extend({ webhook: z.string().min(1).max(256).describe('the webhook name') })
      .strict(),
    permission: 'webhooks.read',
    annotations: READ,
    run: async (principal, services, args) => ({
      value: paged(
        'deliveries',
        await services.webhooks.deliveries(
          principal,
          args.project,
          args.webhook,
          pageRequest(args),
        ),
      ),
      fieldChars: 500,
      hint: SMALLER_PAGE,
    }),
  }),
];

export function findTool(name: string): McpTool | undefined {
  return TOOLS.find((t) => t.name === name);
}

/** Longest caller-given name (a tool name, a field name) an error message repeats. */
const MAX_NAMED_CHARS = 64;

/** A name for an error message: a longer one is described by its length, never repeated. */
export function shortName(name: string): string {
  return name.length <= MAX_NAMED_CHARS ? name : `(a name of ${name.length} characters)`;
}
