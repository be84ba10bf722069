/**
 * @module evaluators
 * The evaluator contract, the registry of built-in and judge evaluators, the runner that turns
 * missing needs into SKIPPED and failures into ERROR, and direct evaluation. Imports core, config
 * types and net only; never api/ or a store adapter.
 */
import { builtinEvaluators } from './builtins/index.js';
import type { EvaluatorFactory } from './contract.js';
import { judgeEvaluators } from './judge/index.js';
import { EvaluatorRegistry } from './registry.js';

export { compileSchema as compileJsonSchema } from './builtins/json.js';
export * from './contract.js';
export { EvaluatorErrors } from './error-codes.js';
export {
  type EvaluateRequest,
  EvaluateRequestSchema,
  EvaluationService,
  type EvaluationServiceDeps,
  type EvaluatorTypeView,
  type PreparedEvaluation,
  parseRecord,
  type RecordResults,
} from './evaluate.js';
export { ChatUsageSchema, chatUsage, parseChatCompletion } from './judge/chat-completion.js';
export { createJudges, JudgeErrors } from './judge/index.js';
export { EvaluatorRegistry } from './registry.js';
export {
  type BoundEach,
  bindEach,
  bindEvaluators,
  type EvaluationObserver,
  type EvaluatorInstance,
  type EvaluatorRef,
  EvaluatorRefSchema,
  metricName,
  mightProduce,
  runEvaluator,
  runEvaluators,
} from './runner.js';

/** Every evaluator type the server offers, in one static list. */
export const ALL_EVALUATORS: readonly EvaluatorFactory[] = [
  ...builtinEvaluators,
  ...judgeEvaluators,
];

export function defaultRegistry(): EvaluatorRegistry {
  return new EvaluatorRegistry(ALL_EVALUATORS);
}
