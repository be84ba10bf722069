import { z } from 'zod';
import { defineEvaluator } from '../contract.js';
import { argumentsKey, numberParam, parseArguments, toolSteps } from './shared.js';

/**
 * Fails when one tool is called with identical arguments more than `maxRepeats` times in a row.
 *
 * "In a row" means consecutive tool calls: steps of other types in between (the model's turn
 * after each tool result) are ignored, since a model re-issuing the same call after reading its
 * result is exactly the loop to catch. Arguments are identical when they are equal JSON (key
 * order and whitespace aside) or, when not JSON, equal text up to whitespace.
 */
export const loopDetection = defineEvaluator({
  manifest: {
    type: 'loop-detection',
    description:
      'Fails when the same tool with identical arguments is called more than `maxRepeats` times in a row (consecutive tool calls); skips without tool calls.',
    needs: ['trajectory'],
    scores: [{ name: 'loop-detection', kind: 'passed' }],
    params: z.strictObject({ maxRepeats: numberParam(z.int().min(1)).default(2) }),
    cheap: true,
  },
  bind(params) {
    return {
      evaluate(record) {
        const calls = toolSteps(record);
        if (calls.length === 0) return { skip: 'the trajectory has no tool calls' };
        let longest = { name: '', run: 0 };
        let previous: string | undefined;
        let run = 0;
        for (const call of calls) {
          const key = `${call.name}\u0000${argumentsKey(parseArguments(call.input))}`;
          run = key === previous ? run + 1 : 1;
          previous = key;
          if (run > longest.run) longest = { name: call.name, run };
        }
        const passed = longest.run <= params.maxRepeats;
        const explanation = passed
          ? `no identical tool call repeats more than ${params.maxRepeats} times in a row`
          : `tool ${longest.name || '(unnamed)'} called ${longest.run} times in a row with identical arguments (max ${params.maxRepeats})`;
        return {
          scores: [
            {
              name: 'loop-detection',
              passed,
              explanation,
              metadata: { tool: longest.name, repeats: longest.run },
            },
          ],
        };
      },
    };
  },
});
