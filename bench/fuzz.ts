/**
 * The long fuzz: the targets of test/adversarial/fuzz, each for a time budget, with the figures
 * of each (cases/s, outcomes, mutations, slowest case, heap). The CI test
 * (test/adversarial/fuzz.test.ts) runs the same targets for a few thousand cases each.
 *
 *   npm run bench -- fuzz [--seconds=300] [--seed=N] [--targets=otlp,cel] [--iterations=N]
 *                         [--from=N]
 *
 * `--seconds` is the budget per target (default 300), `--iterations` a cap (default none), the
 * seed defaults to the CI test's. A failure prints the seed, the iteration, the input as base64
 * and the command that reruns just that case (`--from=I --iterations=I+1`); every target still
 * runs, and the bench throws at the end. Run it with `node --expose-gc` (NODE_OPTIONS) for heap
 * figures after a full collection.
 */
import { parseArgs } from 'node:util';
import { FuzzFailure, formatReport, fuzz } from '../test/adversarial/fuzz/driver.js';
import { FUZZ_SEED, FUZZ_TARGETS, type FuzzTargetName } from '../test/adversarial/fuzz/targets.js';

function options() {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      seconds: { type: 'string', default: '300' },
      seed: { type: 'string', default: String(FUZZ_SEED) },
      targets: { type: 'string', default: Object.keys(FUZZ_TARGETS).join(',') },
      iterations: { type: 'string', default: String(Number.MAX_SAFE_INTEGER) },
      from: { type: 'string', default: '0' },
    },
    // The words are bench/run.ts's (benchmark names).
    allowPositionals: true,
  });
  const number = (name: keyof typeof values) => {
    const n = Number(values[name]);
    if (!Number.isSafeInteger(n) || n < 0) throw new Error(`--${name} must be a whole number`);
    return n;
  };
  const targets = values.targets.split(',').filter((t) => t !== '');
  const unknown = targets.filter((t) => !Object.hasOwn(FUZZ_TARGETS, t));
  if (unknown.length > 0) {
    throw new Error(
      `unknown fuzz target ${unknown.join(', ')}; known: ${Object.keys(FUZZ_TARGETS).join(', ')}`,
    );
  }
  return {
    targets: targets as FuzzTargetName[],
    seconds: number('seconds'),
    seed: number('seed'),
    iterations: number('iterations'),
    from: number('from'),
  };
}

export async function main(): Promise<void> {
  const { targets, ...run } = options();
  const failed: string[] = [];
  for (const name of targets) {
    const target = await FUZZ_TARGETS[name]();
    try {
      console.log(formatReport(await fuzz(target, { ...run, progress: console.log })));
    } catch (err) {
      if (!(err instanceof FuzzFailure)) throw err;
      console.log(err.message);
      failed.push(name);
    }
  }
  if (failed.length > 0) throw new Error(`fuzz: ${failed.join(', ')} failed`);
}
