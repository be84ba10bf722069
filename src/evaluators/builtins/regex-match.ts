import RE2 from 're2';
import { z } from 'zod';
import { CoreErrors, outputText } from '../../core/index.js';
import { defineEvaluator } from '../contract.js';
import { booleanParam } from './shared.js';

function compile(pattern: string, flags: string): RE2 {
  try {
    return new RE2(pattern, flags);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw CoreErrors.INVALID_ARGUMENT(`pattern is not a valid RE2 expression: ${message}`, {
      details: [{ path: 'pattern', message }],
    });
  }
}

/**
 * The output searched (or, with `fullMatch`, matched whole) by an RE2 pattern. RE2 runs in linear
 * time, so a pattern from a policy cannot stall a worker; the price is no lookaround and no
 * backreferences, which bind() refuses.
 */
export const regexMatch = defineEvaluator({
  manifest: {
    type: 'regex-match',
    description:
      'Output matches an RE2 `pattern` (a search, or the whole output with `fullMatch`); `flags` from i, m, s.',
    needs: ['output'],
    scores: [{ name: 'regex-match', kind: 'passed' }],
    params: z.strictObject({
      pattern: z.string().min(1),
      fullMatch: booleanParam(false),
      flags: z
        .string()
        .refine(
          (f) => /^[ims]*$/.test(f) && new Set(f).size === f.length,
          'must combine i, m and s, each at most once',
        )
        .default(''),
    }),
    cheap: true,
  },
  bind(params) {
    // `u` so that `.` and classes match whole code points, as a user reading the text expects.
    const flags = `${params.flags}u`;
    const search = compile(params.pattern, flags);
    // Anchored with \A and \z rather than ^ and $, which the m flag turns into line anchors. The
    // pattern compiled alone first, so it is balanced and the wrapping cannot change its meaning.
    const regex = params.fullMatch ? compile(`\\A(?:${params.pattern})\\z`, flags) : search;
    return {
      evaluate(record) {
        const passed = regex.test(outputText(record.output));
        const what = params.fullMatch ? 'the whole output' : 'the output';
        const explanation = `pattern ${passed ? 'matches' : 'does not match'} ${what}`;
        return { scores: [{ name: 'regex-match', passed, explanation }] };
      },
    };
  },
});
