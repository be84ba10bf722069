#!/usr/bin/env node
// `npm test`: the whole suite in two phases. Most test files spend their time waiting (on
// servers, child processes, a browser, PostgreSQL), so they run several at a time; the
// adversarial files then run one at a time, since each measures the server's responsiveness
// while a hostile request runs and must have the machine to itself. Arguments (`npm test --
// src/api`) run just those files, as plain `vitest run` would.
import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { build, staleness } from './build-dist.mjs';

const ADVERSARIAL = 'test/adversarial/**';
/**
 * Files in flight at once outside the adversarial phase: one per core and one more (they mostly
 * wait), at least 3; TOUCHSTONE_TEST_WORKERS overrides.
 */
const WORKERS =
  Number(process.env.TOUCHSTONE_TEST_WORKERS) || Math.max(3, availableParallelism() + 1);

function vitest(args) {
  const res = spawnSync(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', ...args], {
    stdio: 'inherit',
    env: { ...process.env, TOUCHSTONE_TEST_DIST: '1' },
  });
  return res.status ?? 1;
}

// The processes the tests start (servers, CLI commands: several hundred) run the compiled dist/,
// built here once when src/ changed since, rather than each compiling the sources on the fly.
const stale = staleness(process.cwd());
if (stale !== undefined && !build(process.cwd(), stale)) process.exit(1);

const args = process.argv.slice(2);
if (args.length > 0) process.exit(vitest(args));

const concurrent = vitest([`--maxWorkers=${WORKERS}`, `--exclude=${ADVERSARIAL}`]);
// Their budgets are wall-clock figures: one that a burst elsewhere on the machine spoiled is
// measured again, once.
const alone = vitest(['--maxWorkers=1', '--retry=1', 'test/adversarial/']);
process.exit(concurrent !== 0 ? concurrent : alone);
