import { z } from 'zod';
import { defineEvaluator } from '../contract.js';
import {
  countNames,
  expectedToolCalls,
  formatCounts,
  multisetExcess,
  toolSteps,
} from './shared.js';

type Mode = 'strict' | 'unordered' | 'subset' | 'superset';

interface Verdict {
  passed: boolean;
  explanation: string;
}

/**
 * Compares tool-name sequences. Apart from `strict`, they are multisets: calling `search` twice
 * where the reference expects it once is one call too many for `unordered` and `subset`.
 */
export function compareTrajectories(
  actual: readonly string[],
  expected: readonly string[],
  mode: Mode,
): Verdict {
  if (mode === 'strict') {
    let diff = -1;
    for (let i = 0; i < Math.max(actual.length, expected.length) && diff < 0; i++) {
      if (actual[i] !== expected[i]) diff = i;
    }
    if (diff < 0) {
      return {
        passed: true,
        explanation: `the ${actual.length} tool calls match the expected sequence`,
      };
    }
    const show = (name: string | undefined) => (name === undefined ? 'nothing' : name);
    return {
      passed: false,
      explanation: `expected ${expected.length} tool calls, got ${actual.length}; first difference at call ${diff + 1} (expected ${show(expected[diff])}, got ${show(actual[diff])})`,
    };
  }
  const a = countNames(actual);
  const e = countNames(expected);
  const unexpected = mode === 'superset' ? new Map<string, number>() : multisetExcess(a, e);
  const missing = mode === 'subset' ? new Map<string, number>() : multisetExcess(e, a);
  const problems = [
    missing.size > 0 ? `missing ${formatCounts(missing)}` : '',
    unexpected.size > 0 ? `unexpected ${formatCounts(unexpected)}` : '',
  ].filter((p) => p !== '');
  const relation = {
    unordered: 'the same calls as',
    subset: 'a subset of',
    superset: 'a superset of',
  }[mode];
  return problems.length === 0
    ? { passed: true, explanation: `the tool calls are ${relation} the expected ones` }
    : {
        passed: false,
        explanation: `the tool calls are not ${relation} the expected ones: ${problems.join('; ')}`,
      };
}

/** The trajectory's tool-name sequence against the reference's expected tools. */
export const trajectoryMatch = defineEvaluator({
  manifest: {
    type: 'trajectory-match',
    description:
      'Tool-name sequence of the trajectory against the tools the reference expects (names, {toolCalls}, {tool_calls} or {trajectory}) in `mode` strict, unordered, subset (actual ⊆ expected) or superset (actual ⊇ expected).',
    needs: ['trajectory', 'reference'],
    scores: [{ name: 'trajectory-match', kind: 'passed' }],
    params: z.strictObject({
      mode: z.enum(['strict', 'unordered', 'subset', 'superset']).default('strict'),
    }),
    cheap: true,
  },
  bind(params) {
    return {
      evaluate(record) {
        const candidates = expectedToolCalls(record.reference);
        if (candidates.length === 0) return { skip: 'the reference names no expected tool calls' };
        const actual = toolSteps(record).map((s) => s.name);
        const verdicts = candidates.map((calls) =>
          compareTrajectories(
            actual,
            calls.map((c) => c.name),
            params.mode,
          ),
        );
        const hit = verdicts.findIndex((v) => v.passed);
        const verdict = verdicts[Math.max(hit, 0)]!;
        const of =
          candidates.length > 1
            ? hit >= 0
              ? ` (reference candidate ${hit + 1} of ${candidates.length})`
              : ` (and ${candidates.length - 1} other reference candidate(s) do not match either)`
            : '';
        return {
          scores: [
            {
              name: 'trajectory-match',
              passed: verdict.passed,
              explanation: `${verdict.explanation}${of}`,
            },
          ],
        };
      },
    };
  },
});
