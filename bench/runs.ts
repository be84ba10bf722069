/**
 * Offline run execution: BENCH_RUN_RECORDS (100k) inline records × 1 trial, 3 cheap evaluators
 * (exact-match, contains, latency), no target, executed by the run executor in this process on
 * SQLite in a temp dir, and PostgreSQL too when TOUCHSTONE_BENCH_PG or TOUCHSTONE_TEST_PG names a
 * server (a fresh schema, dropped after). Prints records/s from the claim to the last stored
 * result, the time to the first and the last stored result, and the time to the final status
 * (summaries over every stored result, gates, events). The peer: the same records through the
 * evaluator runner alone (no storage), the cost of evaluation itself.
 * Budget: ≥ 5k evaluated records/s.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { OPEN_PRINCIPAL } from '../src/auth/index.js';
import { loadConfig } from '../src/config/index.js';
import { systemClock } from '../src/core/index.js';
import { bindEvaluators, defaultRegistry, runEvaluators } from '../src/evaluators/index.js';
import { RunExecutor, RunService } from '../src/runs/index.js';
import { openStore } from '../src/store/index.js';
import { WebhookOutbox } from '../src/webhooks/index.js';
import { freshPgSchema } from '../test/support/stores.js';
import { fmt } from './stats.js';

const RECORDS = Number(process.env.BENCH_RUN_RECORDS ?? 100_000);
const EVALUATORS = [
  { ref: 'exact-match' },
  { ref: 'contains', params: { value: 'Paris' } },
  { ref: 'latency', params: { thresholdMs: 2000 } },
];

function record(i: number) {
  return {
    id: `r${i}`,
    input: `What is the capital of France? (${i})`,
    output: i % 3 === 0 ? 'Lyon' : 'Paris is the capital of France.',
    reference: ['Paris', 'Paris is the capital of France.'],
    usage: { latencyMs: 500 + (i % 1400), inputTokens: 40, outputTokens: 12 },
  };
}

const silent = { info() {}, warn() {} };

async function run(label: string, storeOverrides: Record<string, unknown>): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'touchstone-bench-runs-'));
  const config = loadConfig({ overrides: { data_dir: dataDir, ...storeOverrides } });
  const store = await openStore(config.store, { clock: systemClock, dataDir });
  const registry = defaultRegistry();
  const events = new WebhookOutbox({ clock: systemClock });
  try {
    const service = new RunService({
      store,
      clock: systemClock,
      registry,
      judgeExists: () => false,
      events,
      logger: silent,
    });
    const records = Array.from({ length: RECORDS }, (_, i) => record(i));
    const createStarted = performance.now();
    const created = await service.create(OPEN_PRINCIPAL, {
      name: 'bench',
      project: 'bench',
      dataset: { records },
      evaluators: EVALUATORS,
      gates: ['exact-match >= 0.5', 'latency.within >= 0.9'],
    });
    const createMs = performance.now() - createStarted;

    let first = 0;
    let last = 0;
    let finished = 0;
    const executor = new RunExecutor({
      store,
      clock: systemClock,
      registry,
      judge: () => undefined,
      events,
      logger: silent,
      observer: {
        onProgress(_id, done, total) {
          if (done > 0 && first === 0) first = performance.now();
          if (done === total) last = performance.now();
        },
        onFinished() {
          finished = performance.now();
        },
      },
    });
    const cpu = process.cpuUsage();
    const started = performance.now();
    await executor.drain();
    const cpuMs = (() => {
      const u = process.cpuUsage(cpu);
      return (u.user + u.system) / 1000;
    })();
    const final = await store.runs.get(created.id, { spec: false });
    if (final?.status !== 'RUN_STATUS_SUCCEEDED' || final.done !== RECORDS) {
      throw new Error(`the bench run ended ${final?.status} with ${final?.done} items done`);
    }
    const seconds = (last - started) / 1000;
    console.log(
      `${label}: ${RECORDS} records × 1 trial × ${EVALUATORS.length} evaluators: ` +
        `${fmt(RECORDS / seconds, 0)} records/s to the last stored result ` +
        `(first result after ${fmt(first - started, 0)} ms, last after ${fmt(last - started, 0)} ms, ` +
        `final status after ${fmt(finished - started, 0)} ms; CPU ${fmt((cpuMs / RECORDS) * 1000, 1)} µs/record; ` +
        `create with validation ${fmt(createMs, 0)} ms; load ${loadavg()[0]?.toFixed(1)})`,
    );
  } finally {
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** The peer: evaluation alone, the same records and evaluators, nothing stored. */
async function evaluationOnly(): Promise<void> {
  const instances = bindEvaluators(EVALUATORS, defaultRegistry());
  const records = Array.from({ length: RECORDS }, (_, i) => record(i));
  const started = performance.now();
  for (const r of records) await runEvaluators(r, instances, {});
  const seconds = (performance.now() - started) / 1000;
  console.log(`peer, evaluator runner alone (no storage): ${fmt(RECORDS / seconds, 0)} records/s`);
}

export async function main(): Promise<void> {
  await evaluationOnly();
  await run('SQLite', {});
  const url = process.env.TOUCHSTONE_BENCH_PG ?? process.env.TOUCHSTONE_TEST_PG;
  if (url === undefined || url === '') {
    console.log('PostgreSQL: skipped (set TOUCHSTONE_BENCH_PG to a PostgreSQL connection URL)');
    return;
  }
  const schema = await freshPgSchema(url);
  try {
    await run('PostgreSQL', { store: { driver: 'postgres', url: schema.url } });
  } finally {
    await schema.drop();
  }
}
