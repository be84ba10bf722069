import { z } from 'zod';
import { outputText } from '../../core/index.js';
import { defineEvaluator } from '../contract.js';
import { countBound, WITHIN_SCORE, withinScore } from './shared.js';

/**
 * Characters are code points (an emoji counts once, as a reader counts it); words are runs of
 * non-whitespace, the usual `len(text.split())`.
 */
export function measure(text: string, unit: 'characters' | 'words'): number {
  if (unit === 'words') return text.split(/\s+/u).filter((w) => w !== '').length;
  let n = 0;
  for (const _ of text) n++;
  return n;
}

export const length = defineEvaluator({
  manifest: {
    type: 'length',
    description:
      'Output length in characters (code points) or words; with `min`/`max`, also whether it is within them.',
    needs: ['output'],
    scores: [{ name: 'length', kind: 'number' }, WITHIN_SCORE],
    params: z
      .strictObject({
        unit: z.enum(['characters', 'words']).default('characters'),
        min: countBound(),
        max: countBound(),
      })
      .refine((p) => p.min === undefined || p.max === undefined || p.min <= p.max, {
        message: 'must not be less than min',
        path: ['max'],
      }),
    cheap: true,
  },
  bind(params) {
    return {
      evaluate(record) {
        const n = measure(outputText(record.output), params.unit);
        const within = withinScore([
          { label: 'length', value: n, min: params.min, max: params.max, unit: params.unit },
        ]);
        return {
          scores: [
            { name: 'length', value: n, explanation: `${n} ${params.unit}` },
            ...(within ? [within] : []),
          ],
        };
      },
    };
  },
});
