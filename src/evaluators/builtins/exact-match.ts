import { z } from 'zod';
import { outputText } from '../../core/index.js';
import { defineEvaluator } from '../contract.js';
import { normalizeText, referenceTexts, textOptionParams } from './shared.js';

/** Normalized equality with any reference candidate. Explanations never quote either text. */
export const exactMatch = defineEvaluator({
  manifest: {
    type: 'exact-match',
    description:
      'Output equals a reference (any candidate of a list) after trimming, collapsing whitespace and, by default, ignoring case; optionally ignoring punctuation.',
    needs: ['output', 'reference'],
    scores: [{ name: 'exact-match', kind: 'passed' }],
    params: z.strictObject(textOptionParams),
    cheap: true,
  },
  bind(params) {
    return {
      evaluate(record) {
        const references = referenceTexts(record.reference);
        if (references.length === 0) return { skip: 'the reference has no candidate' };
        const output = normalizeText(outputText(record.output), params);
        const hit = references.findIndex((r) => normalizeText(r, params) === output);
        const n = references.length;
        let explanation: string;
        if (n === 1)
          explanation = hit === 0 ? 'matches the reference' : 'differs from the reference';
        else if (hit >= 0) explanation = `matches reference candidate ${hit + 1} of ${n}`;
        else explanation = `matches none of ${n} reference candidates`;
        return { scores: [{ name: 'exact-match', passed: hit >= 0, explanation }] };
      },
    };
  },
});
