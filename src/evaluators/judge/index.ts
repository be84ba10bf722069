/**
 * @module evaluators/judge
 * The OpenAI-compatible judge client (concurrency and rate limits, retries, answer cache) and the
 * evaluators that use a judge (`llm-judge`, `goal-completion`). Calls out only through `net`;
 * imports `core`, `net`, config types and the evaluator contract; never `api/` or a store.
 */
import type { EvaluatorFactory } from '../contract.js';
import { goalCompletionEvaluator } from './goal-completion.js';
import { llmJudgeEvaluator } from './llm-judge.js';

export { JudgeErrors } from './error-codes.js';
export { GOAL_COMPLETION_PROMPT_VERSION, goalCompletionEvaluator } from './goal-completion.js';
export { LLM_JUDGE_PROMPT_VERSION, llmJudgeEvaluator } from './llm-judge.js';
export { createJudge, createJudges, type JudgeDeps } from './openai-judge.js';

/** Every judge-based evaluator type, in one static list. */
export const judgeEvaluators: EvaluatorFactory[] = [llmJudgeEvaluator, goalCompletionEvaluator];
