/**
 * Plug-in evaluators (`npm run bench -- plugins`), in process:
 *  1. per record: a trivial plug-in (a WAT module that reads its request and answers one constant
 *     score) and the example plug-ins (the same exact-match check in AssemblyScript, C, Rust and
 *     Go) against the built-in `exact-match`, each run one record at a time through the evaluator
 *     runner with a warm pool; overhead = plug-in p50 − built-in p50 (target ≤ 1 ms);
 *  2. through a policy: BENCH_PLUGINS_TRACES (2000) agent traces ingested, then the engine scores
 *     them with a one-stage policy holding the trivial plug-in, and again (fresh app) with the
 *     built-in `length` check in its place; records/s of the engine's drain.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { EXAMPLES_DIR } from '../../examples/plugins/build.js';
import { type App, createApp } from '../../src/app/index.js';
import { OPEN_PRINCIPAL } from '../../src/auth/index.js';
import { loadConfig } from '../../src/config/index.js';
import { FakeClock } from '../../src/core/index.js';
import {
  bindEvaluators,
  defaultRegistry,
  type EvaluatorRegistry,
  runEvaluator,
} from '../../src/evaluators/index.js';
import { PluginHost } from '../../src/plugins/index.js';
import { command, writeChain } from '../../src/plugins/wat.testkit.js';
import { agentTrace, jsonBody, recordSpans } from '../../test/support/otel.js';
import { fmt, percentile } from '../stats.js';

const RECORDS = Number(process.env.BENCH_PLUGINS_RECORDS ?? 2000);
const TRACES = Number(process.env.BENCH_PLUGINS_TRACES ?? 2000);
const ANSWER = '{"scores":[{"name":"ok","passed":true}]}';

/** Reads stdin to its end (as every real plug-in does), then answers a constant score. */
function trivialModule(): Uint8Array {
  const bytes = [...new TextEncoder().encode(ANSWER)]
    .map((b) => `\\${b.toString(16).padStart(2, '0')}`)
    .join('');
  return command(
    `(block $eof (loop $read
        (i32.store (i32.const 16) (i32.const 4096))
        (i32.store (i32.const 20) (i32.const 60000))
        (drop (call $fd_read (i32.const 0) (i32.const 16) (i32.const 1) (i32.const 24)))
        (br_if $eof (i32.eqz (i32.load (i32.const 24))))
        (br $read)))
      (call $out (i32.const 1024) (i32.const ${ANSWER.length}))`,
    `(data (i32.const 1024) "${bytes}")`,
  );
}

const LIMITS = {
  memory_mib: 64,
  max_memory_mib: 256,
  timeout: 10_000,
  max_timeout: 60_000,
  max_output_bytes: 2 ** 20,
  max_input_bytes: 4 * 2 ** 20,
  max_module_bytes: 32 * 2 ** 20,
};

async function perRecord(registry: EvaluatorRegistry, ref: string, n: number): Promise<number[]> {
  const [instance] = bindEvaluators([{ ref }], registry);
  const inst = instance as NonNullable<typeof instance>;
  const record = { id: 'r1', input: 'Capital of France?', output: 'Paris', reference: 'Paris' };
  for (let i = 0; i < Math.min(200, n); i++) await runEvaluator(record, inst, {});
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    const result = await runEvaluator({ ...record, id: `r${i}` }, inst, {});
    times.push(performance.now() - started);
    if (result.outcome !== 'OUTCOME_SCORED')
      throw new Error(`${ref}: ${result.outcome} ${result.reason}`);
  }
  return times;
}

async function perRecordFigures(chain: { index: string; sha256: string }): Promise<void> {
  const registry = defaultRegistry();
  const trivial = new PluginHost(
    {
      index: chain.index,
      index_sha256: chain.sha256,
      reload_interval: 0,
      workers: 0,
      limits: LIMITS,
    },
    { registry },
  );
  await trivial.load();
  const examplesRegistry = defaultRegistry();
  const examples = new PluginHost(
    {
      index: join(EXAMPLES_DIR, 'index.yaml'),
      index_sha256_file: join(EXAMPLES_DIR, 'index.sha256'),
      reload_interval: 0,
      workers: 0,
      limits: LIMITS,
    },
    { registry: examplesRegistry },
  );
  await examples.load();
  trivial.start();
  examples.start();
  try {
    const builtin = await perRecord(registry, 'exact-match', RECORDS);
    const base = percentile(builtin, 50);
    console.log(
      `per record, one at a time, warm pool of ${trivial.pool.size} workers, ${RECORDS} records:`,
    );
    console.log(
      `  built-in exact-match          p50 ${fmt(base)} ms  p99 ${fmt(percentile(builtin, 99))} ms`,
    );
    const rows: [string, EvaluatorRegistry, string, number][] = [
      ['trivial plug-in (WAT)', registry, 'bench.trivial', RECORDS],
      ['AssemblyScript exact_match', examplesRegistry, 'example.as.exact_match', RECORDS],
      ['C exact_match', examplesRegistry, 'example.c.exact_match', RECORDS],
      ['Rust exact_match', examplesRegistry, 'example.rust.exact_match', RECORDS],
      ['Go exact_match', examplesRegistry, 'example.go.exact_match', Math.min(RECORDS, 300)],
    ];
    for (const [label, reg, ref, n] of rows) {
      const times = await perRecord(reg, ref, n);
      const p50 = percentile(times, 50);
      console.log(
        `  ${label.padEnd(29)} p50 ${fmt(p50)} ms  p99 ${fmt(percentile(times, 99))} ms  overhead p50 ${fmt(p50 - base)} ms (n=${n})`,
      );
    }
  } finally {
    await trivial.stop();
    await examples.stop();
  }
}

async function policyApp(
  dir: string,
  plugins: Record<string, unknown>,
  clock: FakeClock,
): Promise<App> {
  const config = loadConfig({
    overrides: {
      data_dir: mkdtempSync(join(dir, 'data-')),
      log_level: 'silent',
      traces: { completion_grace: '1s' },
      plugins,
    },
  });
  return createApp(config, {
    env: {},
    clock,
    processMetrics: false,
    logger: pino({ level: 'silent' }),
  });
}

async function throughput(
  dir: string,
  plugins: Record<string, unknown>,
  evaluator: Record<string, unknown>,
): Promise<number> {
  const clock = new FakeClock(Date.parse('2026-11-22T10:00:00Z'));
  const app = await policyApp(dir, plugins, clock);
  try {
    await app.policies.apply(OPEN_PRINCIPAL, {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name: 'bench' },
      spec: { stages: [{ evaluators: [evaluator] }] },
    });
    const perRequest = 50;
    for (let sent = 0; sent < TRACES; sent += perRequest) {
      const spans = recordSpans({ 'service.name': 'bench' }, (tr) => {
        for (let i = 0; i < Math.min(perRequest, TRACES - sent); i++) {
          agentTrace(tr, { extra: { 'input.value': 'Weather?', 'output.value': 'Sunny.' } });
        }
      });
      const res = await app.server.inject({
        method: 'POST',
        url: '/v1/traces',
        payload: jsonBody(spans),
        headers: { 'content-type': 'application/json' },
      });
      if (res.statusCode !== 200) throw new Error(`ingest answered ${res.statusCode}`);
    }
    clock.advance(2000);
    while ((await app.completer.tick()) > 0);
    const started = performance.now();
    const scored = await app.engine.tick();
    const seconds = (performance.now() - started) / 1000;
    if (scored !== TRACES) throw new Error(`scored ${scored} of ${TRACES} traces`);
    return scored / seconds;
  } finally {
    await app.close();
  }
}

export async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-bench-plugins-'));
  try {
    const chain = writeChain(join(dir, 'chain'), [
      {
        name: 'bench',
        module: trivialModule(),
        evaluators: [{ name: 'bench.trivial', scores: [{ name: 'ok', kind: 'passed' }] }],
      },
    ]);
    await perRecordFigures(chain);
    const plugins = { index: chain.index, index_sha256: chain.sha256 };
    console.log(
      `through a one-stage online policy, ${TRACES} agent traces (11 spans each), default engine concurrency:`,
    );
    const builtin = await throughput(dir, plugins, { ref: 'length', params: { min: 1 } });
    console.log(`  built-in length               ${fmt(builtin, 0)} records/s`);
    const plugged = await throughput(dir, plugins, { ref: 'bench.trivial' });
    console.log(`  trivial plug-in               ${fmt(plugged, 0)} records/s`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1]?.endsWith('plugins/index.ts')) await main();
