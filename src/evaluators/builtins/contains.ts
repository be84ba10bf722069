import { z } from 'zod';
import { outputText } from '../../core/index.js';
import { defineEvaluator } from '../contract.js';
import { booleanParam, normalizeText, referenceTexts } from './shared.js';

const needle = z.string().regex(/\S/, 'must not be blank');

/**
 * Output contains `value` (one string, or a list checked in `any` or `all` mode); without
 * `value`, output contains any reference candidate. Both sides have whitespace collapsed, so a
 * line break in the output does not hide a phrase.
 */
export const contains = defineEvaluator({
  manifest: {
    type: 'contains',
    description:
      'Output contains the `value` param (a string, or a list in `any`/`all` mode), else any reference candidate; case-insensitive by default.',
    // The reference is needed only when `value` is absent, so it is checked per record.
    needs: ['output'],
    scores: [{ name: 'contains', kind: 'passed' }],
    params: z.strictObject({
      value: z.union([needle, z.array(needle).min(1)]).optional(),
      mode: z.enum(['any', 'all']).default('any'),
      caseSensitive: booleanParam(false),
    }),
    cheap: true,
  },
  bind(params) {
    const options = { caseSensitive: params.caseSensitive };
    const values =
      params.value === undefined
        ? undefined
        : (Array.isArray(params.value) ? params.value : [params.value]).map((v) =>
            normalizeText(v, options),
          );
    return {
      evaluate(record) {
        const output = normalizeText(outputText(record.output), options);
        if (values !== undefined) {
          const found = values.filter((v) => output.includes(v)).length;
          const passed = params.mode === 'all' ? found === values.length : found > 0;
          const explanation =
            values.length === 1
              ? passed
                ? 'contains the value'
                : 'does not contain the value'
              : `contains ${found} of ${values.length} values (mode ${params.mode})`;
          return { scores: [{ name: 'contains', passed, explanation }] };
        }
        const references = referenceTexts(record.reference)
          .map((r) => normalizeText(r, options))
          .filter((r) => r !== '');
        if (references.length === 0) return { skip: 'no `value` param and no reference' };
        const passed = references.some((r) => output.includes(r));
        const explanation = passed
          ? 'contains a reference candidate'
          : `contains none of ${references.length} reference candidate(s)`;
        return { scores: [{ name: 'contains', passed, explanation }] };
      },
    };
  },
});
