import { z } from 'zod';
import { outputText } from '../../core/index.js';
import { defineEvaluator } from '../contract.js';
import { numberParam, referenceTexts } from './shared.js';

// Digits with thousands commas (only when every group has three digits, so `1,23` stays two
// numbers), or plain digits; then decimals and an exponent. A sign is read separately below.
const NUMBER =
  /[-+\u2212]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+\u2212]?\.\d+(?:[eE][-+]?\d+)?/g;
const ALNUM = /[\p{L}\p{N}]/u;

/**
 * The last number in a text, as answers usually end with their result. A leading `-` or `+`
 * counts as a sign only when it does not follow a letter or digit: `3-5` and `2024-01-05` hold
 * no negative number.
 */
export function lastNumber(text: string): number | undefined {
  let last: number | undefined;
  for (const match of text.matchAll(NUMBER)) {
    let token = match[0];
    const signed = /^[-+\u2212]/.test(token);
    if (signed && match.index > 0 && ALNUM.test(text[match.index - 1]!)) token = token.slice(1);
    const n = Number(token.replace(/,/g, '').replace('\u2212', '-'));
    if (!Number.isNaN(n)) last = n;
  }
  return last;
}

/**
 * Python's math.isclose, with the bound inclusive up to binary rounding: 0.31 − 0.3 is
 * 0.010000000000000009 in doubles, yet a user allowing `absTol: 0.01` means it to pass.
 */
export function isClose(a: number, b: number, relTol: number, absTol: number): boolean {
  if (a === b) return true;
  const scale = Math.max(Math.abs(a), Math.abs(b));
  const tolerance = Math.max(relTol * scale, absTol);
  return Math.abs(a - b) - tolerance <= 8 * Number.EPSILON * scale;
}

/** Last number of the output against the last number of any reference candidate. */
export const numericMatch = defineEvaluator({
  manifest: {
    type: 'numeric-match',
    description:
      'The last number in the output equals the last number in a reference candidate within `relTol` / `absTol`; skips when the reference has no number.',
    needs: ['output', 'reference'],
    scores: [{ name: 'numeric-match', kind: 'passed' }],
    params: z.strictObject({
      relTol: numberParam(z.number().nonnegative()).default(0),
      absTol: numberParam(z.number().nonnegative()).default(0),
    }),
    cheap: true,
  },
  bind(params) {
    return {
      evaluate(record) {
        const expected = referenceTexts(record.reference)
          .map(lastNumber)
          .filter((n): n is number => n !== undefined);
        if (expected.length === 0) return { skip: 'the reference has no number' };
        const actual = lastNumber(outputText(record.output));
        if (actual === undefined) {
          return {
            scores: [
              { name: 'numeric-match', passed: false, explanation: 'no number in the output' },
            ],
          };
        }
        const passed = expected.some((e) => isClose(actual, e, params.relTol, params.absTol));
        const within = params.relTol > 0 || params.absTol > 0 ? ' within tolerance' : '';
        const explanation = `the output's last number matches ${passed ? 'the' : 'no'} reference number${within}`;
        return { scores: [{ name: 'numeric-match', passed, explanation }] };
      },
    };
  },
});
