import { z } from 'zod';
import { defineEvaluator } from '../contract.js';
import { countBound, toolSteps, WITHIN_SCORE, withinScore } from './shared.js';

/** Counts the agent's model and tool steps; other step types are structure, not work. */
export const stepBudget = defineEvaluator({
  manifest: {
    type: 'step-budget',
    description:
      'Counts LLM + tool steps and tool calls of the trajectory; with `maxSteps` / `maxToolCalls`, also whether both are within budget.',
    needs: ['trajectory'],
    scores: [
      { name: 'steps', kind: 'number', higherIsBetter: false },
      { name: 'tool_calls', kind: 'number', higherIsBetter: false },
      WITHIN_SCORE,
    ],
    params: z.strictObject({ maxSteps: countBound(), maxToolCalls: countBound() }),
    cheap: true,
  },
  bind(params) {
    return {
      evaluate(record) {
        const toolCalls = toolSteps(record).length;
        const llmCalls = (record.trajectory ?? []).filter((s) => s.type === 'llm').length;
        const steps = llmCalls + toolCalls;
        const within = withinScore([
          { label: 'steps', value: steps, max: params.maxSteps },
          { label: 'tool calls', value: toolCalls, max: params.maxToolCalls },
        ]);
        return {
          scores: [
            { name: 'steps', value: steps },
            { name: 'tool_calls', value: toolCalls },
            ...(within ? [within] : []),
          ],
        };
      },
    };
  },
});
