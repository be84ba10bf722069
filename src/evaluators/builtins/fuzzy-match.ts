import { z } from 'zod';
import { outputText } from '../../core/index.js';
import { defineEvaluator } from '../contract.js';
import { formatNumber, normalizeText, referenceTexts, textOptionParams } from './shared.js';

/**
 * Levenshtein distance between two code-point sequences, or undefined when it would cost more
 * than `maxWork` (see below). Common prefix and suffix are stripped first; the rest runs Myers'
 * bit-vector algorithm (Myers 1999, blocks as in Hyyrö 2003): one pass over the longer text per
 * 32 code points of the shorter, so `maxWork` counts block steps. It is exact, not approximate.
 */
export function editDistance(
  a: readonly number[],
  b: readonly number[],
  maxWork = Number.POSITIVE_INFINITY,
): number | undefined {
  let start = 0;
  let endA = a.length;
  let endB = b.length;
  while (start < endA && start < endB && a[start] === b[start]) start++;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  let pattern = a.slice(start, endA);
  let text = b.slice(start, endB);
  if (pattern.length > text.length) [pattern, text] = [text, pattern];
  const m = pattern.length;
  if (m === 0) return text.length;
  const blocks = Math.ceil(m / 32);
  if (blocks * text.length > maxWork) return undefined;

  // peq[c] has bit i set where pattern[i] === c.
  const peq = new Map<number, Int32Array>();
  for (let i = 0; i < m; i++) {
    const c = pattern[i]!;
    let bits = peq.get(c);
    if (bits === undefined) {
      bits = new Int32Array(blocks);
      peq.set(c, bits);
    }
    bits[i >> 5]! |= 1 << (i & 31);
  }
  const none = new Int32Array(blocks);
  // Vertical deltas of the DP column: all +1 at column 0, where D[i][0] = i.
  const pv = new Int32Array(blocks).fill(-1);
  const mv = new Int32Array(blocks);
  // The last block may be partial; its last real row sits below bit 31.
  const lastBit = (m - 1) & 31;
  let distance = m;
  for (const c of text) {
    const eqs = peq.get(c) ?? none;
    // Row 0 of a global alignment grows by one per text code point.
    let hin = 1;
    for (let k = 0; k < blocks; k++) {
      let eq = eqs[k]!;
      const pvk = pv[k]!;
      const mvk = mv[k]!;
      const xv = eq | mvk;
      if (hin < 0) eq |= 1;
      const xh = (((eq & pvk) + pvk) ^ pvk) | eq;
      let ph = mvk | ~(xh | pvk);
      let mh = pvk & xh;
      const bit = k === blocks - 1 ? lastBit : 31;
      const hout = (ph >>> bit) & 1 ? 1 : (mh >>> bit) & 1 ? -1 : 0;
      ph <<= 1;
      mh <<= 1;
      if (hin < 0) mh |= 1;
      else if (hin > 0) ph |= 1;
      pv[k] = mh | ~(xv | ph);
      mv[k] = ph & xv;
      hin = hout;
    }
    distance += hin;
  }
  return distance;
}

const codePoints = (s: string): number[] => Array.from(s, (ch) => ch.codePointAt(0)!);

/** 1 − distance / longer length; two empty texts are identical. */
export function similarity(a: string, b: string, maxWork?: number): number | undefined {
  const x = codePoints(a);
  const y = codePoints(b);
  const longer = Math.max(x.length, y.length);
  if (longer === 0) return 1;
  const d = editDistance(x, y, maxWork);
  return d === undefined ? undefined : 1 - d / longer;
}

// About 20 ms of block steps (two ~11k-code-point texts that share little): fuzzy-match is a
// cheap evaluator, so texts past this are skipped instead of stalling a worker.
export const MAX_WORK = 4_000_000;

/** The best normalized Levenshtein similarity between the output and any reference candidate. */
export const fuzzyMatch = defineEvaluator({
  manifest: {
    type: 'fuzzy-match',
    description:
      'Best similarity 0–1 (1 − Levenshtein distance / longer length, over code points) between the normalized output and any reference candidate.',
    needs: ['output', 'reference'],
    scores: [{ name: 'fuzzy-match', kind: 'number', range: [0, 1], higherIsBetter: true }],
    params: z.strictObject(textOptionParams),
    cheap: true,
  },
  bind(params) {
    return {
      evaluate(record) {
        const references = referenceTexts(record.reference);
        if (references.length === 0) return { skip: 'the reference has no candidate' };
        const output = normalizeText(outputText(record.output), params);
        let best: number | undefined;
        let bestIndex = -1;
        let tooLong = 0;
        for (const [i, reference] of references.entries()) {
          const s = similarity(output, normalizeText(reference, params), MAX_WORK);
          if (s === undefined) tooLong++;
          else if (best === undefined || s > best) {
            best = s;
            bestIndex = i;
          }
          if (best === 1) break;
        }
        if (best === undefined) return { skip: 'output and reference are too long to compare' };
        const of =
          references.length > 1
            ? ` (reference candidate ${bestIndex + 1} of ${references.length})`
            : '';
        const skipped = tooLong > 0 ? `; ${tooLong} candidate(s) too long to compare` : '';
        return {
          scores: [
            {
              name: 'fuzzy-match',
              value: best,
              explanation: `similarity ${formatNumber(best)}${of}${skipped}`,
            },
          ],
        };
      },
    };
  },
});
