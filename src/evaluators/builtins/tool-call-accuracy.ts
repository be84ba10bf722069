import { z } from 'zod';
import type { Step } from '../../core/index.js';
import { defineEvaluator } from '../contract.js';
import {
  type Arguments,
  canonicalJson,
  countNames,
  type ExpectedCall,
  expectedToolCalls,
  formatCounts,
  formatNumber,
  isObject,
  multisetExcess,
  parseArguments,
  toolSteps,
} from './shared.js';

/**
 * Whether an actual call's arguments satisfy an expected call's pinned ones. Pinned JSON objects
 * are a subset match: every pinned key must be present with an equal value (compared as parsed
 * JSON, so key order and number spelling do not matter); other keys are free. Any other pinned
 * value (a list, a scalar, unparsable text) must equal the actual arguments as a whole.
 */
export function argumentsSatisfy(expected: Arguments, actual: Arguments): boolean {
  if (!expected.json || !actual.json) {
    return !expected.json && !actual.json && expected.text === actual.text;
  }
  if (!isObject(expected.value)) {
    return canonicalJson(expected.value) === canonicalJson(actual.value);
  }
  const got = actual.value;
  if (!isObject(got)) return false;
  return Object.entries(expected.value).every(
    ([key, value]) => Object.hasOwn(got, key) && canonicalJson(got[key]) === canonicalJson(value),
  );
}

interface Call {
  name: string;
  args: Arguments;
}

/**
 * The largest one-to-one pairing of expected and actual calls (Kuhn's augmenting paths). Greedy
 * pairing is not enough: an unpinned expectation could take the only call that satisfies a
 * pinned one.
 */
export function matchCalls(expected: readonly ExpectedCall[], actual: readonly Call[]): number {
  const edges = expected.map((e) =>
    actual.flatMap((a, j) =>
      a.name === e.name && (e.arguments === undefined || argumentsSatisfy(e.arguments, a.args))
        ? [j]
        : [],
    ),
  );
  const owner = new Array<number>(actual.length).fill(-1);
  const augment = (i: number, seen: boolean[]): boolean => {
    for (const j of edges[i]!) {
      if (seen[j]) continue;
      seen[j] = true;
      if (owner[j]! < 0 || augment(owner[j]!, seen)) {
        owner[j] = i;
        return true;
      }
    }
    return false;
  };
  let matched = 0;
  for (let i = 0; i < expected.length; i++) {
    if (augment(i, new Array<boolean>(actual.length).fill(false))) matched++;
  }
  return matched;
}

interface Accuracy {
  precision: number;
  recall: number;
  f1: number;
  matched: number;
}

function accuracy(expected: readonly ExpectedCall[], actual: readonly Call[]): Accuracy {
  const matched = matchCalls(expected, actual);
  // No calls at all is no correct call: precision 0, as scikit-learn's zero_division default.
  const precision = actual.length === 0 ? 0 : matched / actual.length;
  const recall = matched / expected.length;
  const f1 = precision + recall === 0 ? 0 : (2 * precision * recall) / (precision + recall);
  return { precision, recall, f1, matched };
}

/** Names only: which tools were missing or unexpected, and how many calls had other arguments. */
function describeMatch(
  expected: readonly ExpectedCall[],
  actual: readonly Call[],
  matched: number,
) {
  const want = countNames(expected.map((c) => c.name));
  const got = countNames(actual.map((c) => c.name));
  const missing = multisetExcess(want, got);
  const unexpected = multisetExcess(got, want);
  let missingCount = 0;
  for (const n of missing.values()) missingCount += n;
  const otherArguments = expected.length - matched - missingCount;
  const details = [
    missing.size > 0 ? `missing ${formatCounts(missing)}` : '',
    unexpected.size > 0 ? `unexpected ${formatCounts(unexpected)}` : '',
    otherArguments > 0 ? `${otherArguments} expected call(s) made with other arguments` : '',
  ].filter((d) => d !== '');
  const head = `${matched} of ${expected.length} expected calls matched by ${actual.length} actual call(s)`;
  return details.length > 0 ? `${head}; ${details.join('; ')}` : head;
}

const asCall = (step: Step): Call => ({ name: step.name, args: parseArguments(step.input) });

/**
 * Precision, recall and F1 of the trajectory's tool calls against the calls the reference
 * expects, order ignored, each call used once. With several reference candidates, the best F1.
 */
export const toolCallAccuracy = defineEvaluator({
  manifest: {
    type: 'tool-call-accuracy',
    description:
      'Precision, recall and F1 of the tool calls made against the calls the reference expects ({toolCalls: [{name, arguments?}]}); pinned arguments must match as JSON, order is ignored.',
    needs: ['trajectory', 'reference'],
    scores: [
      { name: 'precision', kind: 'number', range: [0, 1], higherIsBetter: true },
      { name: 'recall', kind: 'number', range: [0, 1], higherIsBetter: true },
      { name: 'f1', kind: 'number', range: [0, 1], higherIsBetter: true },
    ],
    params: z.strictObject({}),
    cheap: true,
  },
  bind() {
    return {
      evaluate(record) {
        const candidates = expectedToolCalls(record.reference);
        if (candidates.length === 0) return { skip: 'the reference names no expected tool calls' };
        const actual = toolSteps(record).map(asCall);
        let best: { expected: ExpectedCall[]; result: Accuracy } | undefined;
        for (const expected of candidates) {
          const result = accuracy(expected, actual);
          if (best === undefined || result.f1 > best.result.f1) best = { expected, result };
        }
        const { expected, result } = best!;
        const summary = describeMatch(expected, actual, result.matched);
        return {
          scores: [
            {
              name: 'precision',
              value: result.precision,
              explanation:
                actual.length === 0
                  ? 'no tool calls were made'
                  : `${result.matched} of ${actual.length} actual calls were expected`,
            },
            {
              name: 'recall',
              value: result.recall,
              explanation: `${result.matched} of ${expected.length} expected calls were made`,
            },
            { name: 'f1', value: result.f1, explanation: `${formatNumber(result.f1)}: ${summary}` },
          ],
        };
      },
    };
  },
});
