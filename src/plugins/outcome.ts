import { z } from 'zod';
import type { EvalOutput } from '../evaluators/index.js';
import { PluginErrors } from './error-codes.js';
import type { PluginEvaluatorDecl } from './manifest.js';
import type { RunEnding } from './pool.js';

/**
 * Turns how a module ended into an evaluation output: scores, a skip, or an error (thrown, so the
 * runner records OUTCOME_ERROR with this message as the reason). Every failure names its cause —
 * exit code, trap, deadline, output cap, malformed or undeclared output — and none is a zero.
 */

const MAX_TEXT = 4096;

const OutputScoreSchema = z.strictObject({
  name: z.string().min(1).max(128),
  value: z.number().optional(),
  passed: z.boolean().optional(),
  label: z.string().max(1024).optional(),
  explanation: z.string().max(MAX_TEXT).optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
});

const ResponseSchema = z.union([
  z.strictObject({ scores: z.array(OutputScoreSchema).max(64) }),
  z.strictObject({ skip: z.strictObject({ reason: z.string().min(1).max(1024) }) }),
  z.strictObject({ error: z.strictObject({ message: z.string().min(1).max(1024) }) }),
]);

function fail(evaluator: string, why: string): never {
  throw PluginErrors.PLUGIN_FAILED(`plug-in evaluator "${evaluator}" ${why}`);
}

function endingProblem(
  ending: RunEnding,
  timeoutMs: number,
  maxOutput: number,
): string | undefined {
  switch (ending.kind) {
    case 'deadline':
      return `exceeded its deadline of ${timeoutMs} ms and was stopped`;
    case 'trap':
      return `trapped: ${ending.message}`;
    case 'overflow':
      return `wrote more than ${maxOutput} bytes to stdout`;
    case 'signal':
      return `raised signal ${ending.signal}`;
    case 'exit':
      return ending.code === 0 ? undefined : `exited with code ${ending.code}`;
  }
}

function kindOf(s: z.infer<typeof OutputScoreSchema>): 'number' | 'passed' | 'label' | undefined {
  const kinds = [
    s.value === undefined ? undefined : ('number' as const),
    s.passed === undefined ? undefined : ('passed' as const),
    s.label === undefined ? undefined : ('label' as const),
  ].filter((k) => k !== undefined);
  return kinds.length === 1 ? kinds[0] : undefined;
}

export function interpret(
  ending: RunEnding,
  decl: PluginEvaluatorDecl,
  limits: { timeoutMs: number; maxOutputBytes: number },
): EvalOutput {
  const problem = endingProblem(ending, limits.timeoutMs, limits.maxOutputBytes);
  if (problem !== undefined || ending.kind !== 'exit') return fail(decl.name, problem ?? 'failed');
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(ending.stdout));
  } catch {
    return fail(
      decl.name,
      `wrote output that is not one UTF-8 JSON value (${ending.stdout.length} bytes)`,
    );
  }
  const parsed = ResponseSchema.safeParse(json);
  if (!parsed.success) {
    return fail(
      decl.name,
      'wrote JSON that is neither {"scores": [...]}, {"skip": {...}} nor {"error": {...}}',
    );
  }
  const out = parsed.data;
  if ('skip' in out) return { skip: out.skip.reason };
  if ('error' in out) return fail(decl.name, `reported an error: ${out.error.message}`);
  for (const score of out.scores) {
    const declared = decl.scores.find((s) => s.name === score.name);
    if (declared === undefined)
      return fail(decl.name, `wrote a score "${score.name}" its manifest does not declare`);
    const kind = kindOf(score);
    if (kind !== declared.kind) {
      return fail(
        decl.name,
        `wrote score "${score.name}" without exactly one ${declared.kind} value`,
      );
    }
  }
  return { scores: out.scores };
}
