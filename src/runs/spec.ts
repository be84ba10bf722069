import { z } from 'zod';
import {
  describeYamlProblem,
  type ErrorDetail,
  type EvalRecord,
  eachValid,
  issuesToDetails,
  parseYaml,
  RESOURCE_API_VERSION,
  RESOURCE_PROJECT_LABEL,
  RecordSchema,
  ResourceNameSchema,
  uniqueDetails,
} from '../core/index.js';
import {
  bindEach,
  type EvaluatorInstance,
  EvaluatorRefSchema,
  type EvaluatorRegistry,
  metricName,
} from '../evaluators/index.js';
import { RunErrors } from './error-codes.js';
import { checkGates, type Gate, GateSchema, parseGate } from './gates.js';
import type { MetricInfo } from './summaries.js';
import { EnvironmentSchema, HarnessSchema, TargetSpecSchema } from './targets/index.js';

/**
 * The run spec: which records (a dataset path from an upload, or inline records), which target
 * produces their outputs (none: the records hold them), which evaluators grade them, how many
 * trials, which gates must hold. Written plain (`{name, project, labels, dataset, …}`) or
 * declaratively (`{apiVersion, kind: Run, metadata: {name, labels}, spec: {…}}`), as YAML or
 * JSON. Validation reports every bad field at once, before anything runs.
 */

export const API_VERSION = RESOURCE_API_VERSION;
export const KIND = 'Run';
export const PROJECT_LABEL = RESOURCE_PROJECT_LABEL;
/** A run labelled `touchstone.keep: "true"` is never removed by retention. */
export const KEEP_LABEL = 'touchstone.keep';
/** The dataset upload's limit; inline records follow it. */
export const MAX_RECORDS = 100_000;
export const MAX_TRIALS = 100;
/** Records × trials of one run. */
export const MAX_ITEMS = 1_000_000;
/** Details reported for one spec; a spec with thousands of bad records names the first ones. */
const MAX_DETAILS = 100;

const LabelsSchema = z
  .record(z.string().min(1).max(317), z.string().max(1024))
  .refine((labels) => Object.keys(labels).length <= 64, 'at most 64 labels');

function datasetSchema<R extends z.ZodType>(record: R) {
  return z
    .strictObject({
      /** A dataset's `path` as returned by an upload or import. */
      path: z.string().min(1).max(1024).optional(),
      records: z.array(record).min(1).max(MAX_RECORDS).optional(),
    })
    .refine((d) => (d.path === undefined) !== (d.records === undefined), {
      message: 'set exactly one of dataset.path and dataset.records',
    });
}

function bodyShape<R extends z.ZodType>(record: R) {
  return {
    dataset: datasetSchema(record),
    /** What produces outputs; absent when the records already hold them. */
    target: TargetSpecSchema.optional(),
    harness: HarnessSchema,
    environment: EnvironmentSchema,
    /** The same shape as a policy stage's evaluators. */
    evaluators: z.array(EvaluatorRefSchema).min(1).max(64),
    /** Judge of the judge evaluators (a name from `judges`); default: `default_judge`. */
    judge: z.string().min(1).optional(),
    trials: z.int().min(1).max(MAX_TRIALS).default(1),
    gates: z.array(GateSchema).max(64).default([]),
  };
}

/** The spec body, as validated at create (records checked one by one). */
export const RunSpecSchema = z.strictObject(bodyShape(RecordSchema));
export type RunSpec = z.infer<typeof RunSpecSchema>;

/**
 * The stored body read back by an executor: validated at create, so records are taken as stored
 * (re-validating 100k records per claim would cost a second).
 */
const StoredSpecSchema = z.strictObject(bodyShape(z.custom<EvalRecord>()));

/** The plain spelling of a run (`name`, `project`, the spec's fields). */
export const RunPlainSchema = z.strictObject({
  name: ResourceNameSchema,
  project: ResourceNameSchema.optional(),
  labels: LabelsSchema.optional(),
  ...bodyShape(RecordSchema),
});

/** The declarative `Run` resource. */
export const RunResourceSchema = z.strictObject({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(KIND),
  metadata: z.strictObject({ name: ResourceNameSchema, labels: LabelsSchema.optional() }),
  spec: RunSpecSchema,
});

/** A run spec after validation. */
export interface ParsedRun {
  name: string;
  /** From `project`, or the `touchstone.dev/project` label. */
  project?: string;
  labels: Record<string, string>;
  spec: RunSpec;
  /** The records (inline ones with ids assigned), when the spec holds them. */
  records?: EvalRecord[];
  /** The body as written, with inline records normalized: what is stored and shown as `spec`. */
  stored: Record<string, unknown>;
  gates: Gate[];
  /** Written declaratively: field paths of the body start with `spec.`. */
  declarative: boolean;
}

/** The spec bound to this server's evaluators: what an executor runs. */
export interface CompiledRun {
  spec: RunSpec;
  instances: EvaluatorInstance[];
  /** Metrics the evaluators declare, in their order. */
  metrics: MetricInfo[];
  gates: Gate[];
  needsJudge: boolean;
}

export interface ParseOptions {
  /** Binds evaluators and checks gates against their metrics (server and CLI pass it). */
  registry?: EvaluatorRegistry;
  /** Whether a judge of this name is configured (checks `judge`). */
  judgeExists?: (name: string) => boolean;
}

function invalid(all: ErrorDetail[]): never {
  const details = uniqueDetails(all);
  const shown = details.slice(0, MAX_DETAILS);
  if (details.length > MAX_DETAILS) {
    shown.push({ path: '(root)', message: `and ${details.length - MAX_DETAILS} more problems` });
  }
  const summary = shown
    .slice(0, 10)
    .map((d) => `${d.path}: ${d.message}`)
    .join('; ');
  throw RunErrors.RUN_SPEC_INVALID(
    `invalid run spec: ${summary}${shown.length > 10 ? '; …' : ''}`,
    { details: shown },
  );
}

/**
 * A spec sent as text (a JSON string of YAML, rather than a JSON object) is parsed on the
 * request's thread, and the YAML parser needs several µs per token: 16 KiB keeps that to tens of
 * milliseconds. Larger specs travel as JSON objects (what the CLI and the SDK send).
 */
export const MAX_SPEC_TEXT_BYTES = 16 * 1024;

/** YAML (or JSON, which is YAML) text → one document's value. */
function fromText(text: string): unknown {
  const result = parseYaml(text, { maxBytes: MAX_SPEC_TEXT_BYTES });
  if (!result.ok) {
    invalid([
      { path: '(root)', message: `not YAML or JSON: ${describeYamlProblem(result.problem)}` },
    ]);
  }
  const values = result.documents;
  if (values.length !== 1) {
    invalid([
      {
        path: '(root)',
        message:
          values.length === 0 ? 'the spec is empty' : 'one run spec per file (found several)',
      },
    ]);
  }
  return values[0];
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Metrics of bound evaluators: the instance name for a primary score, `<instance>.<score>` else. */
export function metricsOf(instances: readonly EvaluatorInstance[]): MetricInfo[] {
  return instances.flatMap((inst) =>
    inst.factory.manifest.scores.map((score) => ({
      metric: metricName(inst.name, inst.factory, score.name),
      evaluator: inst.name,
      kind: score.kind,
    })),
  );
}

/**
 * Validates a run spec (YAML/JSON text or a parsed value). Reports every problem at once as
 * RUN_SPEC_INVALID with `details` naming each field; with `options.registry`, evaluators, params
 * and gates are checked against this server's evaluators too.
 */
export function parseRunSpec(input: unknown, options: ParseOptions = {}): ParsedRun {
  const value = typeof input === 'string' ? fromText(input) : input;
  if (!isObject(value)) invalid([{ path: '(root)', message: 'a run spec is a mapping (object)' }]);
  const declarative = ['apiVersion', 'kind', 'metadata', 'spec'].some((k) => k in value);
  const at = declarative ? 'spec.' : '';
  const body: Record<string, unknown> = declarative
    ? isObject(value.spec)
      ? value.spec
      : {}
    : value;
  const details: ErrorDetail[] = [];
  const parsed = (declarative ? RunResourceSchema : RunPlainSchema).safeParse(value);
  if (!parsed.success) details.push(...issuesToDetails(parsed.error.issues));

  // A harness the shape refused is reported there, once.
  if (
    body.harness !== undefined &&
    HarnessSchema.safeParse(body.harness).success &&
    body.target === undefined
  ) {
    details.push({ path: `${at}harness`, message: 'a harness drives a target; set target too' });
  }

  // Each evaluator and gate is also checked on its own, so their problems are reported beside
  // the shape's (a spec with a bad field elsewhere still hears about a misspelt metric). One the
  // shape refused is left out here: it is reported once.
  const trials = z.int().min(1).max(MAX_TRIALS).default(1).safeParse(body.trials);
  const gates = eachValid(body.gates, GateSchema).map((g) =>
    g === undefined ? undefined : parseGate(g),
  );
  const refs = eachValid(body.evaluators, EvaluatorRefSchema);
  if (options.registry !== undefined) {
    const bound = bindEach(refs, options.registry, `${at}evaluators`);
    details.push(...bound.details);
    details.push(
      ...checkGates(
        gates,
        metricsOf(bound.bound.map((b) => b.instance)),
        trials.success ? trials.data : undefined,
        `${at}gates`,
        // Without a list of evaluators, no metric can be told missing.
        Array.isArray(body.evaluators) ? bound.unresolved : undefined,
      ),
    );
  } else {
    gates.forEach((g, i) => {
      if (typeof g === 'string') details.push({ path: `${at}gates[${i}]`, message: g });
    });
  }
  if (
    typeof body.judge === 'string' &&
    body.judge !== '' &&
    options.judgeExists?.(body.judge) === false
  ) {
    details.push({ path: `${at}judge`, message: `no judge named "${body.judge}" is configured` });
  }

  if (!parsed.success || details.length > 0) invalid(details);
  const data = parsed.data;
  const spec: RunSpec = 'spec' in data ? data.spec : stripIdentity(data);
  const labels = ('metadata' in data ? data.metadata.labels : data.labels) ?? {};
  const name = 'metadata' in data ? data.metadata.name : data.name;
  const project = ('project' in data ? data.project : undefined) ?? labels[PROJECT_LABEL];

  let records: EvalRecord[] | undefined;
  if (spec.dataset.records !== undefined) {
    records = spec.dataset.records.map((r, i) => ({ ...r, id: r.id ?? String(i) }));
    const ids = new Map<string, number>();
    records.forEach((r, i) => {
      const first = ids.get(r.id);
      if (first !== undefined) {
        details.push({
          path: `${at}dataset.records[${i}].id`,
          message: `the same id as records[${first}]`,
        });
      }
      ids.set(r.id, i);
    });
    if (records.length * spec.trials > MAX_ITEMS) {
      details.push({
        path: `${at}trials`,
        message: `records × trials is ${records.length * spec.trials}; at most ${MAX_ITEMS}`,
      });
    }
  }
  if (project !== undefined && !ResourceNameSchema.safeParse(project).success) {
    details.push({ path: `metadata.labels.${PROJECT_LABEL}`, message: 'not a project name' });
  }
  if (details.length > 0) invalid(details);

  const stored: Record<string, unknown> = { ...body };
  for (const k of ['name', 'project', 'labels']) if (!declarative) delete stored[k];
  if (records !== undefined) stored.dataset = { records };
  return {
    name,
    ...(project === undefined ? {} : { project }),
    labels,
    spec,
    ...(records === undefined ? {} : { records }),
    stored,
    gates: gates as Gate[],
    declarative,
  };
}

function stripIdentity(data: z.infer<typeof RunPlainSchema>): RunSpec {
  const { name: _name, project: _project, labels: _labels, ...spec } = data;
  return spec;
}

/**
 * Binds a stored spec (validated at create) for execution. Throws RUN_SPEC_INVALID when it no
 * longer fits this server (an evaluator type this build does not have).
 */
export function compileStoredSpec(stored: unknown, registry: EvaluatorRegistry): CompiledRun {
  const parsed = StoredSpecSchema.safeParse(stored);
  if (!parsed.success) invalid(issuesToDetails(parsed.error.issues));
  const spec = parsed.data as RunSpec;
  const bound = bindEach(spec.evaluators, registry, 'evaluators');
  const instances = bound.bound.map((b) => b.instance);
  const gates = spec.gates.map(parseGate);
  const details = [
    ...bound.details,
    ...checkGates(gates, metricsOf(instances), spec.trials, 'gates', bound.unresolved),
  ];
  if (details.length > 0) invalid(details);
  return {
    spec,
    instances,
    metrics: metricsOf(instances),
    gates: gates as Gate[],
    needsJudge: instances.some((i) => i.needsJudge),
  };
}
