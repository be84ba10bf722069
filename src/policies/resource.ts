import { z } from 'zod';
import { type CompiledExpression, type CompileOptions, compileExpression } from '../cel/index.js';
import { durationMs } from '../config/index.js';
import {
  describeDetails,
  type ErrorDetail,
  eachValid,
  issuesToDetails,
  isTouchstoneError,
  RESOURCE_API_VERSION,
  RESOURCE_PROJECT_LABEL,
  StoredResourceMetadataSchema,
  uniqueDetails,
} from '../core/index.js';
import {
  bindEach,
  type EvaluatorInstance,
  type EvaluatorRef,
  EvaluatorRefSchema,
  type EvaluatorRegistry,
  metricName,
  mightProduce,
} from '../evaluators/index.js';
import type { PolicyRecord } from '../store/index.js';
import { PolicyErrors } from './error-codes.js';

/**
 * The OnlineEvalPolicy resource: its schema (the same at apply, `validate_only`, `--dry-run` and
 * in the CLI), and its compiled form — CEL compiled and evaluators bound once per generation.
 */

export const API_VERSION = RESOURCE_API_VERSION;
export const KIND = 'OnlineEvalPolicy';
export const PROJECT_LABEL = RESOURCE_PROJECT_LABEL;
/** A stage without `window` keeps its metric points this long. */
export const DEFAULT_WINDOW_MS = 60 * 60 * 1000;
export const DEFAULT_MIN_SAMPLES = 10;

const expression = z.string().min(1).max(4096);

const windowDuration = durationMs.refine((ms) => ms >= 1000 && ms <= 30 * 24 * 3600 * 1000, {
  message: 'a window is between 1s and 720h',
});

const StageSchema = z.strictObject({
  evaluators: z.array(EvaluatorRefSchema).min(1).max(32),
  when: expression.optional(),
  window: z.string().optional(),
});

const AlertSchema = z.strictObject({
  metric: z.string().min(1).max(256),
  below: z.number().finite(),
  minSamples: z.number().int().min(1).max(1_000_000).default(DEFAULT_MIN_SAMPLES),
  webhook: z
    .string()
    .max(2048)
    .refine((text) => /^https?:\/\//.test(text) && URL.canParse(text), {
      message: 'an absolute http or https URL',
    })
    .optional(),
});

/**
 * A `trace_feedback` sink: where the policy's scores of pushed traces are written back (an
 * MLflow, Phoenix or Langfuse store the traces were also exported to). The connection fields are
 * a TraceSource's; the connector checks them (docs/sinks.md).
 */
export const SinkSchema = z.strictObject({
  type: z.literal('trace_feedback'),
  connector: z.string().min(1).max(64),
  variant: z.string().min(1).max(64).optional(),
  endpoint: z.string().min(1).max(2048),
  locations: z.array(z.string().min(1).max(512)).max(100).optional(),
  credentials: z.record(z.string(), z.string()).optional(),
  auth: z.record(z.string(), z.unknown()).optional(),
});
export type PolicySink = z.infer<typeof SinkSchema>;

export const PolicySpecSchema = z.strictObject({
  /** CEL over the trace; absent = every trace of the project. */
  selector: expression.optional(),
  sampling: z
    .strictObject({
      rate: z.number().min(0).max(1).default(1),
      /** `error`, or CEL expressions; a trace matching any bypasses sampling. */
      always: z.array(expression).max(32).default([]),
    })
    .default({ rate: 1, always: [] }),
  stages: z.array(StageSchema).min(1).max(16),
  alerts: z.array(AlertSchema).max(64).default([]),
  /** Judge for this policy's judge evaluators (a name from `judges`); default: `default_judge`. */
  judge: z.string().min(1).optional(),
  /** Judge tokens (input + output) this policy may spend per UTC day; judge stages skip beyond. */
  dailyJudgeTokens: z.number().int().min(1).optional(),
  disabled: z.boolean().default(false),
  /** Where the scores of pushed traces are also written (`trace_feedback`); at most 8. */
  sinks: z.array(SinkSchema).max(8).default([]),
});
export type PolicySpec = z.infer<typeof PolicySpecSchema>;

export const PolicyResourceSchema = z.strictObject({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(KIND),
  metadata: StoredResourceMetadataSchema,
  spec: PolicySpecSchema,
  // Output-only (the alert states `get` shows), ignored on apply.
  status: z.unknown().optional(),
});

/** A policy as applied: the resource's identity and its spec with defaults filled in. */
export interface ParsedPolicy {
  name: string;
  /** From the `touchstone.dev/project` label, when set. */
  project?: string;
  labels: Record<string, string>;
  spec: PolicySpec;
}

function invalid(details: ErrorDetail[]): never {
  throw PolicyErrors.POLICY_INVALID(`invalid policy: ${describeDetails(details)}`, { details });
}

/** Whether the resource's shape is valid (its expressions and evaluators aside). */
export function isPolicyShaped(input: unknown): boolean {
  return PolicyResourceSchema.safeParse(input).success;
}

/** The resource's `spec` as given, or an empty one. */
export function specOf(input: unknown): Record<string, unknown> {
  return isObject(input) && isObject(input.spec) ? input.spec : {};
}

/** Validates the resource's shape (not yet its expressions or evaluators: see compilePolicy). */
export function parsePolicy(input: unknown): ParsedPolicy {
  const r = PolicyResourceSchema.safeParse(input);
  if (!r.success) invalid(issuesToDetails(r.error.issues));
  const labels = r.data.metadata.labels ?? {};
  const project = labels[PROJECT_LABEL];
  return {
    name: r.data.metadata.name,
    ...(project === undefined ? {} : { project }),
    labels,
    spec: r.data.spec,
  };
}

/** The stored form: the declarative resource with defaults filled and the project label set. */
export function policyResource(policy: ParsedPolicy, project: string): Record<string, unknown> {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: policy.name, labels: { ...policy.labels, [PROJECT_LABEL]: project } },
    spec: policy.spec,
  };
}

/** The resource as the API shows it: as stored, plus its generation and times. */
export function policyView(record: PolicyRecord): Record<string, unknown> {
  const resource = record.resource as { metadata: Record<string, unknown> };
  return {
    ...resource,
    metadata: {
      ...resource.metadata,
      generation: record.generation,
      createdAt: record.createdAt,
      updatedAt: record.updatedAt,
    },
  };
}

export type AlwaysCondition = { kind: 'error' } | { kind: 'cel'; expression: CompiledExpression };

export interface CompiledStage {
  index: number;
  when?: CompiledExpression;
  /** Cheap evaluators first, so a trace pays for a judge only after the checks before it ran. */
  instances: EvaluatorInstance[];
  windowMs: number;
  needsJudge: boolean;
}

export interface CompiledAlert {
  metric: string;
  below: number;
  minSamples: number;
  webhook?: string;
  /** The window of the stage whose evaluator produces the metric. */
  windowMs: number;
}

export interface CompiledPolicy {
  project: string;
  name: string;
  generation: number;
  spec: PolicySpec;
  selector?: CompiledExpression;
  rate: number;
  always: AlwaysCondition[];
  stages: CompiledStage[];
  alerts: CompiledAlert[];
  /** Metric name → window of the stage producing it. */
  windows: ReadonlyMap<string, number>;
}

/** Runs `fn`, gathering a thrown TouchstoneError's details instead of throwing. */
function collect(details: ErrorDetail[], fn: () => void): void {
  try {
    fn();
  } catch (err) {
    if (!isTouchstoneError(err)) throw err;
    details.push(...(err.details.length > 0 ? err.details : [{ path: '', message: err.message }]));
  }
}

/**
 * A spec whose lists may have holes: `undefined` stands for an item the shape refused (reported
 * there), so the others are still checked under their own index.
 */
interface LooseSpec {
  selector?: string | undefined;
  always: (string | undefined)[];
  stages: (
    | {
        evaluators: (EvaluatorRef | undefined)[];
        when?: string | undefined;
        window?: string | undefined;
      }
    | undefined
  )[];
  alerts: (z.infer<typeof AlertSchema> | undefined)[];
}

/** Problems of a policy: CEL ones (POLICY_CEL_INVALID) and the rest (POLICY_INVALID). */
export interface PolicyProblems {
  cel: ErrorDetail[];
  other: ErrorDetail[];
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The parts of a resource that are well-formed on their own, whatever the rest holds. */
function salvage(input: unknown): LooseSpec {
  const spec = specOf(input);
  const selector = expression.safeParse(spec.selector);
  return {
    ...(selector.success ? { selector: selector.data } : {}),
    always: eachValid(isObject(spec.sampling) ? spec.sampling.always : undefined, expression),
    stages: Array.isArray(spec.stages)
      ? spec.stages.map((stage: unknown) => {
          if (!isObject(stage)) return undefined;
          const when = expression.safeParse(stage.when);
          return {
            evaluators: Array.isArray(stage.evaluators)
              ? eachValid(stage.evaluators, EvaluatorRefSchema)
              : [undefined],
            ...(when.success ? { when: when.data } : {}),
            // A window that is not even text is the shape's to report.
            ...(typeof stage.window === 'string' ? { window: stage.window } : {}),
          };
        })
      : [undefined],
    alerts: eachValid(spec.alerts, AlertSchema),
  };
}

interface Checked {
  problems: PolicyProblems;
  selector?: CompiledExpression;
  always: AlwaysCondition[];
  stages: CompiledStage[];
  alerts: CompiledAlert[];
  windows: Map<string, number>;
}

/**
 * Compiles every expression and binds every evaluator of a spec, gathering every problem once,
 * each with its path: CEL (path and position), evaluators and params, windows, a `when` on the
 * first stage, instance names used twice, alerts on metrics no stage produces.
 */
function checkSpec(
  spec: LooseSpec,
  registry: EvaluatorRegistry,
  options: CompileOptions = {},
): Checked {
  const problems: PolicyProblems = { cel: [], other: [] };
  const cel = (source: string, kind: 'selector' | 'when', path: string) => {
    let out: CompiledExpression | undefined;
    collect(problems.cel, () => {
      out = compileExpression(source, kind, path, options);
    });
    return out;
  };

  const selector =
    spec.selector === undefined ? undefined : cel(spec.selector, 'selector', 'spec.selector');
  const always: AlwaysCondition[] = [];
  spec.always.forEach((cond, i) => {
    if (cond === undefined) return;
    if (cond.trim() === 'error') always.push({ kind: 'error' });
    else {
      const expression = cel(cond, 'selector', `spec.sampling.always[${i}]`);
      if (expression !== undefined) always.push({ kind: 'cel', expression });
    }
  });

  const stages: CompiledStage[] = [];
  const windows = new Map<string, number>();
  const seen = new Map<string, number>();
  // Names of evaluators that did not bind (undefined: some were not even well-formed).
  let unresolved: string[] | undefined = [];
  spec.stages.forEach((stage, i) => {
    if (stage === undefined) {
      unresolved = undefined;
      return;
    }
    const at = `spec.stages[${i}]`;
    let windowMs = DEFAULT_WINDOW_MS;
    if (stage.window !== undefined) {
      const parsed = windowDuration.safeParse(stage.window);
      if (parsed.success) windowMs = parsed.data;
      else problems.other.push(...issuesToDetails(parsed.error.issues, `${at}.window`));
    }
    const when = stage.when === undefined ? undefined : cel(stage.when, 'when', `${at}.when`);
    if (stage.when !== undefined && i === 0) {
      problems.other.push({
        path: `${at}.when`,
        message: 'the first stage has no earlier scores to test',
      });
    }
    const bound = bindEach(stage.evaluators, registry, `${at}.evaluators`);
    problems.other.push(...bound.details);
    if (bound.unresolved === undefined) unresolved = undefined;
    else unresolved?.push(...bound.unresolved);
    const instances: EvaluatorInstance[] = [];
    for (const { index: j, instance: inst } of bound.bound) {
      const first = seen.get(inst.name);
      if (first !== undefined) {
        problems.other.push({
          path: `${at}.evaluators[${j}].name`,
          message: `"${inst.name}" is already used in stage ${first}; set a distinct name`,
        });
        continue;
      }
      seen.set(inst.name, i);
      instances.push(inst);
      for (const score of inst.factory.manifest.scores) {
        windows.set(metricName(inst.name, inst.factory, score.name), windowMs);
      }
    }
    instances.sort((a, b) => Number(a.needsJudge) - Number(b.needsJudge));
    stages.push({
      index: i,
      ...(when === undefined ? {} : { when }),
      instances,
      windowMs,
      needsJudge: instances.some((inst) => inst.needsJudge),
    });
  });

  const alerts: CompiledAlert[] = [];
  spec.alerts.forEach((alert, i) => {
    if (alert === undefined) return;
    const windowMs = windows.get(alert.metric);
    if (windowMs === undefined) {
      if (mightProduce(unresolved, alert.metric)) return;
      const known = [...windows.keys()].join(', ');
      problems.other.push({
        path: `spec.alerts[${i}].metric`,
        message: `no stage produces metric "${alert.metric}"; known metrics: ${known}`,
      });
      return;
    }
    alerts.push({
      metric: alert.metric,
      below: alert.below,
      minSamples: alert.minSamples,
      ...(alert.webhook === undefined ? {} : { webhook: alert.webhook }),
      windowMs,
    });
  });
  return {
    problems,
    ...(selector === undefined ? {} : { selector }),
    always,
    stages,
    alerts,
    windows,
  };
}

/**
 * Every problem of a resource as given: its shape's, and those of each part that is well-formed
 * on its own (so a policy with a misspelt field still hears about its CEL and evaluators).
 */
export function policyProblems(input: unknown, registry: EvaluatorRegistry): PolicyProblems {
  const shape = PolicyResourceSchema.safeParse(input);
  const { problems } = checkSpec(salvage(input), registry);
  if (!shape.success) problems.other.unshift(...issuesToDetails(shape.error.issues));
  return problems;
}

/** Throws the problems as one error (POLICY_CEL_INVALID when any is CEL), each detail once. */
export function throwProblems(problems: PolicyProblems): void {
  const all = uniqueDetails([...problems.cel, ...problems.other]);
  if (all.length === 0) return;
  const error =
    problems.cel.length > 0 ? PolicyErrors.POLICY_CEL_INVALID : PolicyErrors.POLICY_INVALID;
  throw error(`invalid policy: ${describeDetails(all)}`, { details: all });
}

/**
 * Compiles every expression and binds every evaluator of a parsed policy, reporting all problems
 * together: CEL errors as POLICY_CEL_INVALID (path and position), the rest as POLICY_INVALID.
 * `stored` for a policy already applied (see CompileOptions).
 */
export function compilePolicy(
  policy: ParsedPolicy,
  project: string,
  generation: number,
  registry: EvaluatorRegistry,
  options: CompileOptions = {},
): CompiledPolicy {
  const { spec } = policy;
  const checked = checkSpec(
    {
      selector: spec.selector,
      always: spec.sampling.always,
      stages: spec.stages,
      alerts: spec.alerts,
    },
    registry,
    options,
  );
  throwProblems(checked.problems);
  return {
    project,
    name: policy.name,
    generation,
    spec,
    ...(checked.selector === undefined ? {} : { selector: checked.selector }),
    rate: spec.sampling.rate,
    always: checked.always,
    stages: checked.stages,
    alerts: checked.alerts,
    windows: checked.windows,
  };
}
