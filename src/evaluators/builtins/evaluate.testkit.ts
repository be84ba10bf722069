import type { EvalRecord, Score, Step, Usage } from '../../core/index.js';
import type { EvalOutput, EvaluatorFactory } from '../contract.js';

/** Test support for the built-in evaluators (used by their `*.test.ts` files only). */

/** Binds a factory as the runner does (params through its schema) and evaluates one record. */
export async function evaluate(
  factory: EvaluatorFactory,
  params: unknown,
  record: Partial<EvalRecord>,
): Promise<EvalOutput> {
  const bound = factory.bind(factory.manifest.params.parse(params));
  return bound.evaluate({ id: 'rec-1', ...record }, {});
}

/** The scores of an evaluation that must score, by local name. */
export async function scoresOf(
  factory: EvaluatorFactory,
  params: unknown,
  record: Partial<EvalRecord>,
): Promise<Record<string, Score>> {
  const out = await evaluate(factory, params, record);
  if ('skip' in out) throw new Error(`expected scores, got skip: ${out.skip}`);
  return Object.fromEntries(out.scores.map((s) => [s.name, s]));
}

/** The skip reason of an evaluation that must skip. */
export async function skipOf(
  factory: EvaluatorFactory,
  params: unknown,
  record: Partial<EvalRecord>,
): Promise<string> {
  const out = await evaluate(factory, params, record);
  if (!('skip' in out)) throw new Error(`expected a skip, got ${JSON.stringify(out.scores)}`);
  return out.skip;
}

export function toolStep(name: string, input?: unknown, error = ''): Step {
  return { type: 'tool', name, input, error };
}

export function llmStep(usage?: Usage): Step {
  return { type: 'llm', name: 'chat', error: '', ...(usage ? { usage } : {}) };
}
