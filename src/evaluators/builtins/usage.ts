import { z } from 'zod';
import type { EvalRecord, Step, Usage } from '../../core/index.js';
import { defineEvaluator } from '../contract.js';
import {
  type Bound,
  countBound,
  formatNumber,
  numberParam,
  WITHIN_SCORE,
  withinScore,
} from './shared.js';

/**
 * Usage evaluators: latency, tokens and cost, from the record's usage or, where the record lacks
 * a figure, the sum over its trajectory's steps. None of them needs a declared record field, so
 * each skips by itself when its figure is unknown.
 */

/** The sum of one usage field over steps, or undefined when no step carries it. */
function sumSteps(steps: readonly Step[], field: keyof Usage): number | undefined {
  let sum: number | undefined;
  for (const step of steps) {
    const v = step.usage?.[field];
    if (v !== undefined) sum = (sum ?? 0) + v;
  }
  return sum;
}

const llmSteps = (record: EvalRecord) => (record.trajectory ?? []).filter((s) => s.type === 'llm');

// Agent steps are containers whose usage, when present, already sums their children's.
const costSteps = (record: EvalRecord) =>
  (record.trajectory ?? []).filter((s) => s.type !== 'agent');

const maxParam = () => numberParam(z.number().nonnegative()).optional();

export const latency = defineEvaluator({
  manifest: {
    type: 'latency',
    description:
      'End-to-end latency in milliseconds from usage.latencyMs; with `thresholdMs`, also whether it is within the threshold.',
    needs: [],
    scores: [{ name: 'latency', kind: 'number', higherIsBetter: false }, WITHIN_SCORE],
    params: z.strictObject({ thresholdMs: maxParam() }),
    cheap: true,
  },
  bind(params) {
    return {
      evaluate(record) {
        const ms = record.usage?.latencyMs;
        if (ms === undefined) return { skip: 'the record has no usage.latencyMs' };
        const within = withinScore([
          { label: 'latency', value: ms, max: params.thresholdMs, unit: 'ms' },
        ]);
        return {
          scores: [
            { name: 'latency', value: ms, explanation: `${formatNumber(ms)} ms` },
            ...(within ? [within] : []),
          ],
        };
      },
    };
  },
});

export const tokenUsage = defineEvaluator({
  manifest: {
    type: 'token-usage',
    description:
      "Input, output and total tokens from the record's usage, else summed over its LLM steps; with `maxTotalTokens`, also whether the total is within it.",
    needs: [],
    scores: [
      { name: 'input_tokens', kind: 'number', higherIsBetter: false },
      { name: 'output_tokens', kind: 'number', higherIsBetter: false },
      { name: 'total_tokens', kind: 'number', higherIsBetter: false },
      WITHIN_SCORE,
    ],
    params: z.strictObject({ maxTotalTokens: countBound() }),
    cheap: true,
  },
  bind(params) {
    return {
      evaluate(record) {
        const steps = llmSteps(record);
        const figure = (field: keyof Usage) => record.usage?.[field] ?? sumSteps(steps, field);
        const input = figure('inputTokens');
        const output = figure('outputTokens');
        const total =
          figure('totalTokens') ??
          (input !== undefined && output !== undefined ? input + output : undefined);
        const scores = [
          { name: 'input_tokens', value: input },
          { name: 'output_tokens', value: output },
          { name: 'total_tokens', value: total },
        ].filter((s): s is { name: string; value: number } => s.value !== undefined);
        if (scores.length === 0) return { skip: 'no token counts in usage or LLM steps' };
        // Without a known total there is nothing to hold against the bound.
        const bounds: Bound[] =
          total === undefined
            ? []
            : [{ label: 'total tokens', value: total, max: params.maxTotalTokens }];
        const within = withinScore(bounds);
        return { scores: within ? [...scores, within] : scores };
      },
    };
  },
});

export const cost = defineEvaluator({
  manifest: {
    type: 'cost',
    description:
      "Cost in USD from the record's usage, else summed over its steps; with `maxUsd`, also whether it is within it.",
    needs: [],
    scores: [{ name: 'cost', kind: 'number', higherIsBetter: false }, WITHIN_SCORE],
    params: z.strictObject({ maxUsd: maxParam() }),
    cheap: true,
  },
  bind(params) {
    return {
      evaluate(record) {
        const usd = record.usage?.costUsd ?? sumSteps(costSteps(record), 'costUsd');
        if (usd === undefined) return { skip: 'no cost in usage or steps' };
        const within = withinScore([
          { label: 'cost', value: usd, max: params.maxUsd, unit: 'USD' },
        ]);
        return {
          scores: [
            { name: 'cost', value: usd, explanation: `${formatNumber(usd)} USD` },
            ...(within ? [within] : []),
          ],
        };
      },
    };
  },
});
