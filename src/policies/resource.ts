import { z } from 'zod';
import { durationMs } from '../config/index.js';
import {
  describeDetails,
  type ErrorDetail,
  issuesToDetails,
  isTouchstoneError,
  RESOURCE_API_VERSION,
  RESOURCE_PROJECT_LABEL,
  ResourceNameSchema,
} from '../core/index.js';
import {
  bindEvaluators,
  type EvaluatorInstance,
  EvaluatorRefSchema,
  type EvaluatorRegistry,
  metricName,
} from '../evaluators/index.js';
import type { PolicyRecord } from '../store/index.js';
import { type CompiledExpression, type CompileOptions, compileExpression } from './cel.js';
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
});
export type PolicySpec = z.infer<typeof PolicySpecSchema>;

const PolicyResourceSchema = z.strictObject({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(KIND),
  metadata: z.strictObject({
    name: ResourceNameSchema,
    labels: z.record(z.string(), z.string()).optional(),
    // Output-only fields, so that what `get` prints can be applied again unchanged.
    generation: z.number().optional(),
    createdAt: z.string().optional(),
    updatedAt: z.string().optional(),
  }),
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
  const celDetails: ErrorDetail[] = [];
  const details: ErrorDetail[] = [];
  const cel = (source: string, kind: 'selector' | 'when', path: string) => {
    let out: CompiledExpression | undefined;
    collect(celDetails, () => {
      out = compileExpression(source, kind, path, options);
    });
    return out;
  };

  const selector =
    spec.selector === undefined ? undefined : cel(spec.selector, 'selector', 'spec.selector');
  const always: AlwaysCondition[] = [];
  spec.sampling.always.forEach((cond, i) => {
    if (cond.trim() === 'error') always.push({ kind: 'error' });
    else {
      const expression = cel(cond, 'selector', `spec.sampling.always[${i}]`);
      if (expression !== undefined) always.push({ kind: 'cel', expression });
    }
  });

  const stages: CompiledStage[] = [];
  const windows = new Map<string, number>();
  const seen = new Map<string, number>();
  spec.stages.forEach((stage, i) => {
    const at = `spec.stages[${i}]`;
    let windowMs = DEFAULT_WINDOW_MS;
    if (stage.window !== undefined) {
      const parsed = windowDuration.safeParse(stage.window);
      if (parsed.success) windowMs = parsed.data;
      else details.push(...issuesToDetails(parsed.error.issues, `${at}.window`));
    }
    const when = stage.when === undefined ? undefined : cel(stage.when, 'when', `${at}.when`);
    if (stage.when !== undefined && i === 0) {
      details.push({
        path: `${at}.when`,
        message: 'the first stage has no earlier scores to test',
      });
    }
    let instances: EvaluatorInstance[] = [];
    collect(details, () => {
      instances = bindEvaluators(stage.evaluators, registry, `${at}.evaluators`);
    });
    for (const [j, inst] of instances.entries()) {
      const first = seen.get(inst.name);
      if (first !== undefined) {
        details.push({
          path: `${at}.evaluators[${j}].name`,
          message: `"${inst.name}" is already used in stage ${first}; set a distinct name`,
        });
      }
      seen.set(inst.name, i);
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
    const windowMs = windows.get(alert.metric);
    if (windowMs === undefined && stages.length === spec.stages.length) {
      const known = [...windows.keys()].join(', ');
      details.push({
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
      windowMs: windowMs ?? DEFAULT_WINDOW_MS,
    });
  });

  if (celDetails.length > 0) {
    const all = [...celDetails, ...details];
    throw PolicyErrors.POLICY_CEL_INVALID(`invalid policy: ${describeDetails(all)}`, {
      details: all,
    });
  }
  if (details.length > 0) invalid(details);
  return {
    project,
    name: policy.name,
    generation,
    spec,
    ...(selector === undefined ? {} : { selector }),
    rate: spec.sampling.rate,
    always,
    stages,
    alerts,
    windows,
  };
}
