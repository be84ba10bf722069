import { z } from 'zod';
import {
  describeDetails,
  type ErrorDetail,
  type EvalRecord,
  isPresent,
  issuesToDetails,
  isTouchstoneError,
  type Result,
  type Score,
} from '../core/index.js';
import type { BoundEvaluator, EvalContext, EvaluatorFactory, Need } from './contract.js';
import { EvaluatorErrors } from './error-codes.js';
import type { EvaluatorRegistry } from './registry.js';

/**
 * Binds evaluator references (validating params once) and runs them over records. A missing need
 * becomes OUTCOME_SKIPPED with a reason; a throw becomes OUTCOME_ERROR. Neither is ever a zero.
 */

/** How a policy stage, a run or an evaluate request names an evaluator. */
export const EvaluatorRefSchema = z.strictObject({
  ref: z.string().min(1),
  /** Instance name; defaults to `ref`. Names the result and prefixes its metrics. */
  name: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/)
    .optional(),
  params: z.record(z.string(), z.unknown()).optional(),
});
export type EvaluatorRef = z.infer<typeof EvaluatorRefSchema>;

export interface EvaluatorInstance {
  name: string;
  type: string;
  factory: EvaluatorFactory;
  bound: BoundEvaluator;
  needsJudge: boolean;
}

/** Observes outcomes (metrics); kept as an interface so the domain does not know Prometheus. */
export interface EvaluationObserver {
  onResult(type: string, outcome: Result['outcome'], durationMs: number): void;
}

/**
 * The metric name of a score: the instance name for an evaluator's primary score (the one named
 * like its type, or its only score), `<instance>.<score>` for the others.
 */
export function metricName(instance: string, factory: EvaluatorFactory, score: string): string {
  const { type, scores } = factory.manifest;
  const primary = score === type || (scores.length === 1 && scores[0]?.name === score);
  return primary ? instance : `${instance}.${score}`;
}

/** Binds one reference at `at` (`evaluators[2]`); throws a TouchstoneError naming the field. */
function bindOne(ref: EvaluatorRef, registry: EvaluatorRegistry, at: string): EvaluatorInstance {
  const factory = registry.get(ref.ref);
  if (factory === undefined) {
    throw EvaluatorErrors.EVALUATOR_UNKNOWN(`unknown evaluator "${ref.ref}"`, {
      details: [{ path: `${at}.ref`, message: `no evaluator type "${ref.ref}"` }],
    });
  }
  const parsed = factory.manifest.params.safeParse(ref.params ?? {});
  if (!parsed.success) {
    const details = issuesToDetails(parsed.error.issues, `${at}.params`);
    throw EvaluatorErrors.EVALUATOR_PARAMS_INVALID(
      `invalid params for evaluator "${ref.ref}": ${describeDetails(details)}`,
      { details },
    );
  }
  let bound: BoundEvaluator;
  try {
    bound = factory.bind(parsed.data);
  } catch (err) {
    if (!isTouchstoneError(err)) throw err;
    const details = err.details.map((d) => ({
      path: `${at}.params.${d.path}`,
      message: d.message,
    }));
    throw EvaluatorErrors.EVALUATOR_PARAMS_INVALID(
      `invalid params for evaluator "${ref.ref}": ${err.message}`,
      {
        details,
      },
    );
  }
  return {
    name: ref.name ?? ref.ref,
    type: ref.ref,
    factory,
    bound,
    needsJudge: factory.manifest.needs.includes('judge'),
  };
}

/** Binds references for a request; the first bad one is thrown with its own error code. */
export function bindEvaluators(
  refs: readonly EvaluatorRef[],
  registry: EvaluatorRegistry,
  path = 'evaluators',
): EvaluatorInstance[] {
  const instances: EvaluatorInstance[] = [];
  const seen = new Set<string>();
  for (const [i, ref] of refs.entries()) {
    const at = `${path}[${i}]`;
    const instance = bindOne(ref, registry, at);
    if (seen.has(instance.name)) {
      throw EvaluatorErrors.EVALUATOR_NAME_DUPLICATE(
        `two evaluators are named "${instance.name}"`,
        {
          details: [
            {
              path: `${at}.name`,
              message: `"${instance.name}" is already used; set a distinct name`,
            },
          ],
        },
      );
    }
    seen.add(instance.name);
    instances.push(instance);
  }
  return instances;
}

/** What `bindEach` found: the references that bound, and every problem of the others. */
export interface BoundEach {
  /** Each bound reference with its index in the list (duplicate names are left out). */
  bound: { index: number; instance: EvaluatorInstance }[];
  details: ErrorDetail[];
  /**
   * Instance names of references that did not bind, or undefined when a reference was not even
   * well-formed (its name is unknown): metrics those would produce cannot be told apart.
   */
  unresolved: string[] | undefined;
}

/**
 * Binds each reference on its own so that every bad one is reported, each once, with its path;
 * `undefined` stands for a reference whose shape was already refused. Within the list, a second
 * use of a name is reported at the later reference.
 */
export function bindEach(
  refs: readonly (EvaluatorRef | undefined)[],
  registry: EvaluatorRegistry,
  path: string,
): BoundEach {
  const out: BoundEach = { bound: [], details: [], unresolved: [] };
  const seen = new Map<string, number>();
  refs.forEach((ref, i) => {
    if (ref === undefined) {
      out.unresolved = undefined;
      return;
    }
    const at = `${path}[${i}]`;
    try {
      const instance = bindOne(ref, registry, at);
      const first = seen.get(instance.name);
      if (first !== undefined) {
        out.details.push({
          path: `${at}.name`,
          message: `"${instance.name}" is already the name of ${path.split('.').at(-1)}[${first}]; set a distinct name`,
        });
        return;
      }
      seen.set(instance.name, i);
      out.bound.push({ index: i, instance });
    } catch (err) {
      if (!isTouchstoneError(err)) throw err;
      out.details.push(
        ...(err.details.length > 0 ? err.details : [{ path: at, message: err.message }]),
      );
      out.unresolved?.push(ref.name ?? ref.ref);
    }
  });
  return out;
}

/** Whether `metric` might be produced by one of the `unresolved` evaluator instances. */
export function mightProduce(unresolved: readonly string[] | undefined, metric: string): boolean {
  return (
    unresolved === undefined || unresolved.some((n) => metric === n || metric.startsWith(`${n}.`))
  );
}

function missingNeed(
  record: EvalRecord,
  needs: readonly Need[],
  ctx: EvalContext,
): string | undefined {
  for (const need of needs) {
    if (need === 'judge') {
      if (ctx.judge === undefined) return 'no judge is configured';
    } else if (!isPresent(record[need])) {
      return `record has no ${need}`;
    }
  }
  return undefined;
}

function checkScores(scores: Score[]): string | undefined {
  for (const s of scores) {
    const kinds = [s.value, s.passed, s.label].filter((v) => v !== undefined).length;
    if (kinds !== 1) return `score "${s.name}" must have exactly one of value, passed, label`;
    if (s.value !== undefined && !Number.isFinite(s.value))
      return `score "${s.name}" is not a finite number`;
  }
  return undefined;
}

/** A safe reason for an exception: our errors carry safe messages; others may hold user data. */
function errorReason(err: unknown): string {
  if (isTouchstoneError(err)) return err.message;
  return `evaluator failed (${err instanceof Error ? err.name : typeof err}); see the server log`;
}

export async function runEvaluator(
  record: EvalRecord,
  instance: EvaluatorInstance,
  ctx: EvalContext,
  observer?: EvaluationObserver,
  onError?: (err: unknown, instance: EvaluatorInstance) => void,
): Promise<Result> {
  const started = performance.now();
  const finish = (partial: Omit<Result, 'evaluator' | 'durationMs'>): Result => {
    const durationMs = Math.round((performance.now() - started) * 1000) / 1000;
    observer?.onResult(instance.type, partial.outcome, durationMs);
    return { evaluator: instance.name, ...partial, durationMs };
  };
  const missing = missingNeed(record, instance.factory.manifest.needs, ctx);
  if (missing !== undefined)
    return finish({ outcome: 'OUTCOME_SKIPPED', scores: [], reason: missing });
  try {
    const out = await instance.bound.evaluate(record, ctx);
    if ('skip' in out) return finish({ outcome: 'OUTCOME_SKIPPED', scores: [], reason: out.skip });
    const bad = checkScores(out.scores);
    if (bad !== undefined) return finish({ outcome: 'OUTCOME_ERROR', scores: [], reason: bad });
    const scores = out.scores.map((s) => ({
      ...s,
      name: metricName(instance.name, instance.factory, s.name),
    }));
    return finish({ outcome: 'OUTCOME_SCORED', scores });
  } catch (err) {
    onError?.(err, instance);
    return finish({ outcome: 'OUTCOME_ERROR', scores: [], reason: errorReason(err) });
  }
}

/** Runs every instance on one record; judge evaluators run concurrently, cheap ones inline. */
export async function runEvaluators(
  record: EvalRecord,
  instances: readonly EvaluatorInstance[],
  ctx: EvalContext,
  observer?: EvaluationObserver,
  onError?: (err: unknown, instance: EvaluatorInstance) => void,
): Promise<Result[]> {
  return Promise.all(instances.map((inst) => runEvaluator(record, inst, ctx, observer, onError)));
}
