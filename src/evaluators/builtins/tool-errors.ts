import { z } from 'zod';
import { defineEvaluator } from '../contract.js';
import { toolSteps } from './shared.js';

// Enough names to act on; a long list of failures says nothing more.
const MAX_NAMES = 10;

/** The share of tool calls that failed. Explanations name the failing tools, never their errors. */
export const toolErrors = defineEvaluator({
  manifest: {
    type: 'tool-errors',
    description:
      'Share of tool calls (tool steps of the trajectory) that ended with an error, 0–1; skips when there are no tool calls.',
    needs: ['trajectory'],
    scores: [{ name: 'tool-errors', kind: 'number', range: [0, 1], higherIsBetter: false }],
    params: z.strictObject({}),
    cheap: true,
  },
  bind() {
    return {
      evaluate(record) {
        const calls = toolSteps(record);
        if (calls.length === 0) return { skip: 'the trajectory has no tool calls' };
        const failed = calls.filter((s) => s.error.trim() !== '');
        const names = [...new Set(failed.map((s) => s.name || '(unnamed)'))];
        const listed =
          names.length === 0
            ? ''
            : `: ${names.slice(0, MAX_NAMES).join(', ')}${names.length > MAX_NAMES ? `, and ${names.length - MAX_NAMES} more` : ''}`;
        return {
          scores: [
            {
              name: 'tool-errors',
              value: failed.length / calls.length,
              explanation: `${failed.length} of ${calls.length} tool calls failed${listed}`,
            },
          ],
        };
      },
    };
  },
});
