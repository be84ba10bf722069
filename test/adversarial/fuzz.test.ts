/**
 * The short fuzz of CI: each target of test/adversarial/fuzz for a fixed number of cases of a
 * fixed seed (about 12 s of CPU in all); `npm run bench -- fuzz` runs the long one. A failure
 * names the seed, the iteration, the input (base64) and the command that reruns that one case.
 */
import { describe, expect, it } from 'vitest';
import { fuzz } from './fuzz/driver.js';
import { FUZZ_SEED, FUZZ_TARGETS, type FuzzTargetName } from './fuzz/targets.js';

/**
 * Cases per target (about 3 s of CPU each), and outcomes each run must reach at least once, so a
 * generator that stopped making accepted or refused inputs is noticed.
 */
const RUNS: Record<FuzzTargetName, { iterations: number; reaches: string[] }> = {
  otlp: {
    iterations: 10_000,
    reaches: ['protobuf traces', 'json traces', 'protobuf logs', 'json logs'].flatMap((d) => [
      `${d}: decoded`,
      `${d}: OTLP_DECODE_FAILED`,
    ]),
  },
  datasets: {
    iterations: 1_500,
    reaches: [
      'jsonl: normalized',
      'jsonl: DATASET_ROW_INVALID',
      'jsonl: DATASET_ID_DUPLICATE',
      'jsonl: DATASET_ROW_TOO_LARGE',
      'parquet: normalized',
      'parquet: DATASET_FORMAT_INVALID',
    ],
  },
  cel: {
    iterations: 3_000,
    reaches: ['selector', 'when', 'override'].flatMap((k) => [
      `${k}: compiled`,
      `${k}: compiled, evaluation error`,
      `${k}: POLICY_CEL_INVALID`,
    ]),
  },
  yaml: { iterations: 1_500, reaches: ['value', 'problem'] },
};

describe('fuzz, seeded and bounded', () => {
  for (const [name, { iterations, reaches }] of Object.entries(RUNS)) {
    it(`${name}: ${iterations} cases break no rule, and none hangs`, async () => {
      const target = await FUZZ_TARGETS[name as FuzzTargetName]();
      const report = await fuzz(target, { iterations, seed: FUZZ_SEED });
      expect(report.iterations).toBe(iterations);
      for (const outcome of reaches)
        expect(report.outcomes[outcome] ?? 0, outcome).toBeGreaterThan(0);
    }, 120_000);
  }
});
