/**
 * A trace source backfilling from a live MLflow server (3.x, SQLite backend, one worker, from the
 * venv TOUCHSTONE_INTEROP_MLFLOW_PYTHON names; see test/interop/mlflow/README.md), against MLflow's
 * own Python client reading the same traces. Run by name only (`npm run bench -- source-mlflow`):
 * loading the traces alone takes a minute or two.
 *
 *  1. BENCH_SOURCE_TRACES (10k) agent traces of 5 spans (a CHAIN root, two CHAT_MODEL spans with
 *     chat messages and token usage, tools get_weather and get_time, which fails in two traces of
 *     three) are loaded into an experiment: one trace made by the MLflow SDK, copied with new ids
 *     and start times spread over the last hour, sent through MLflow's OTLP ingest (the SDK's
 *     `log_spans`) 100 traces per request, 2 in flight (test/interop/mlflow/bulk_traces.py).
 *  2. MLflow's Python client reads them all with their spans: `MlflowClient().search_traces(...,
 *     include_spans=True)` paged 100 at a time in start order (read_traces.py).
 *  3. `touchstone serve` (SQLite, temp data dir) with a policy of cheap evaluators (tool-errors,
 *     step-budget) and a TraceSource backfilling the experiment (`poll.maxRecordsPerSecond`
 *     100000, write-back off): traces/s pulled and traces/s scored, apply → all pulled / scored.
 *  4. The same with `writeBack.enabled` on a fresh data dir, reading a second experiment of
 *     BENCH_SOURCE_WRITEBACK_TRACES (1000) traces loaded the same way: 4 assessments per trace
 *     (tool-errors, steps, tool_calls, within), until all are written. MLflow creates assessments
 *     one request at a time (14–36/s on a busy 2-core machine), so 10k traces would take 20–50
 *     minutes; BENCH_SOURCE_WRITEBACK_TRACES=0 skips this run.
 *
 * Figures come from the server's own counters (`/metrics`), polled every 250 ms.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  MLFLOW_PYTHON,
  MLFLOW_SKIP_REASON,
  type MlflowServer,
  startMlflowServer,
} from '../test/interop/mlflow/mlflow-server.js';
import { freePort, type ServerProcess, serveArgs, startServer } from '../test/support/process.js';
import { runPython } from '../test/support/python.js';
import { cpuSeconds, fmt, load } from './stats.js';

const COUNT = Number(process.env.BENCH_SOURCE_TRACES ?? 10_000);
const WRITE_BACK_COUNT = Number(process.env.BENCH_SOURCE_WRITEBACK_TRACES ?? 1000);
const EXPERIMENT = 'bench-source';
const WRITE_BACK_EXPERIMENT = 'bench-source-write-back';
const SOURCE = 'bench-mlflow';
const POLICY = 'agent-health';
/** Scored metrics per trace: tool-errors, step-budget's steps, tool_calls and within. */
const METRICS_PER_TRACE = 4;
const HERE = join(process.cwd(), 'test', 'interop', 'mlflow');
const READ_PAGE_SIZE = 100;
const TIMEOUT_MS = 30 * 60_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

function peakRssMb(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m === null ? Number.NaN : Number(m[1]) / 1024;
}

/** Sum of a metric's samples whose labels include `labels`. */
function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/** The server's warnings and errors (JSON log lines, level ≥ 40), counted by message and code. */
function warningSummary(output: string): string[] {
  const counts = new Map<string, number>();
  for (const line of output.split('\n')) {
    if (!line.startsWith('{')) continue;
    let entry: { level?: number; msg?: string; err?: { code?: string } };
    try {
      entry = JSON.parse(line);
    } catch {
      continue;
    }
    if ((entry.level ?? 0) < 40) continue;
    const key = `${entry.msg ?? ''}${entry.err?.code === undefined ? '' : ` (${entry.err.code})`}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].map(([key, n]) => `${n} × ${key}`);
}

async function post(base: string, path: string, body: unknown): Promise<void> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
  if (res.status !== 200) throw new Error(`POST ${path}: HTTP ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
}

async function pythonJson<T>(mlflow: MlflowServer, script: string, args: string[]): Promise<T> {
  const out = await runPython(mlflow.python, [join(HERE, script), ...args], {
    timeoutMs: TIMEOUT_MS,
  });
  return JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as T;
}

interface Progress {
  pulled: number;
  scored: number;
  written: number;
  failedWrites: number;
}

async function progress(base: string): Promise<Progress> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const source = { source: SOURCE };
  return {
    pulled: metricValue(text, 'touchstone_source_traces_pulled_total', source),
    scored: metricValue(text, 'touchstone_policy_traces_scored_total', { policy: POLICY }),
    written: metricValue(text, 'touchstone_source_scores_written_total', {
      ...source,
      outcome: 'created',
    }),
    failedWrites: metricValue(text, 'touchstone_source_scores_written_total', {
      ...source,
      outcome: 'failed',
    }),
  };
}

interface RunFigures {
  pulledSecs: number;
  scoredSecs: number;
  writtenSecs?: number;
}

/** One `touchstone serve` with the source; times from the source's apply until all are done. */
async function run(
  mlflow: MlflowServer,
  experiment: string,
  count: number,
  writeBack: boolean,
): Promise<RunFigures> {
  const label = writeBack ? 'with write-back' : 'no write-back';
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-bench-source-'));
  writeFileSync(
    join(dir, 'config.yaml'),
    "log_level: warn\nsources:\n  allow_hosts: ['127.0.0.1']\n",
  );
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  let server: ServerProcess | undefined;
  try {
    server = await startServer(serveArgs(join(dir, 'data'), port, join(dir, 'config.yaml')));
    const pid = server.proc.pid as number;
    await post(base, '/v1alpha1/policies', {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name: POLICY },
      spec: {
        stages: [
          {
            evaluators: [
              { ref: 'tool-errors' },
              { ref: 'step-budget', params: { maxSteps: 10, maxToolCalls: 5 } },
            ],
          },
        ],
      },
    });
    const cpu0 = cpuSeconds(pid);
    const t0 = performance.now();
    await post(base, '/v1alpha1/sources', {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'TraceSource',
      metadata: { name: SOURCE },
      spec: {
        connector: 'mlflow',
        endpoint: mlflow.base,
        locations: [experiment],
        backfill: { since: '3h' },
        poll: { interval: '5s', maxRecordsPerSecond: 100_000 },
        maxTraceDuration: '1m',
        policies: [POLICY],
        writeBack: { enabled: writeBack },
      },
    });
    const at: Partial<Record<'pulled' | 'scored' | 'written' | 'half', number>> = {};
    let last: Progress = { pulled: 0, scored: 0, written: 0, failedWrites: 0 };
    const target = count * METRICS_PER_TRACE;
    for (;;) {
      last = await progress(base);
      const now = (performance.now() - t0) / 1000;
      if (at.half === undefined && last.scored >= count / 2) at.half = now;
      if (at.pulled === undefined && last.pulled >= count) at.pulled = now;
      if (at.scored === undefined && last.scored >= count) at.scored = now;
      if (at.written === undefined && last.written >= target) at.written = now;
      const done = at.pulled !== undefined && at.scored !== undefined;
      if (done && (!writeBack || at.written !== undefined)) break;
      if (now * 1000 > TIMEOUT_MS) {
        console.log(`${label}: NOT done in ${TIMEOUT_MS / 60_000} min: ${JSON.stringify(last)}`);
        break;
      }
      await sleep(250);
    }
    const cpu = cpuSeconds(pid) - cpu0;
    const rate = (n: number, secs: number | undefined) =>
      secs === undefined ? 'n/a' : `${fmt(n / secs, 1)} traces/s`;
    const secs = (s: number | undefined) => (s === undefined ? 'n/a' : `${fmt(s, 1)} s`);
    console.log(
      `${label}: ${count} traces pulled in ${secs(at.pulled)} (${rate(count, at.pulled)}), scored in ${secs(at.scored)} ` +
        `(${rate(count, at.scored)}; half of them in ${secs(at.half)}), from the source's apply; ` +
        `server CPU ${fmt((cpu * 1000) / count, 2)} ms per trace (${fmt((cpu / ((performance.now() - t0) / 1000)) * 100, 0)}% of a core), peak RSS ${fmt(peakRssMb(pid), 0)} MB`,
    );
    if (writeBack) {
      console.log(
        `${label}: ${last.written} of ${target} assessments created in MLflow in ${secs(at.written)} ` +
          `(${at.written === undefined ? 'n/a' : fmt(last.written / at.written, 1)} assessments/s, ` +
          `${rate(count, at.written)} pulled, scored and written back)` +
          `${last.failedWrites > 0 ? `, ${last.failedWrites} write attempts failed (retried)` : ''}`,
      );
    }
    const figures: RunFigures = {
      pulledSecs: at.pulled ?? Number.NaN,
      scoredSecs: at.scored ?? Number.NaN,
    };
    if (at.written !== undefined) figures.writtenSecs = at.written;
    return figures;
  } finally {
    if (server !== undefined && server.proc.exitCode === null && server.proc.signalCode === null) {
      server.proc.kill('SIGTERM');
      const proc = server.proc;
      const timer = setTimeout(() => proc.kill('SIGKILL'), 20_000);
      await server.exited;
      clearTimeout(timer);
      const warnings = warningSummary(server.output());
      if (warnings.length > 0) console.log(`${label}: server warnings: ${warnings.join('; ')}`);
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Loads `count` copies of the SDK's agent trace into `experiment`, started over the last hour. */
async function loadTraces(mlflow: MlflowServer, experiment: string, count: number) {
  const spacing = (55 * 60_000) / count;
  const first = Date.now() - 60 * 60_000;
  const loaded = await pythonJson<{ experiment_id: string; seconds: number }>(
    mlflow,
    'bulk_traces.py',
    [mlflow.base, experiment, String(count), String(first), String(spacing)],
  );
  console.log(
    `loaded ${count} traces (${count * 5} spans) into ${experiment} through MLflow's OTLP ingest in ${fmt(loaded.seconds, 1)} s ` +
      `(${fmt(count / loaded.seconds, 0)} traces/s); load average ${load()}`,
  );
  return loaded;
}

/** MLflow's own Python client reading every trace of the experiment with its spans. */
async function mlflowRead(mlflow: MlflowServer, experimentId: string): Promise<number> {
  const read = await pythonJson<{ traces: number; spans: number; pages: number; seconds: number }>(
    mlflow,
    'read_traces.py',
    [mlflow.base, experimentId, String(READ_PAGE_SIZE)],
  );
  const rate = read.traces / read.seconds;
  console.log(
    `MLflow Python client: MlflowClient().search_traces(include_spans=True), ${read.pages} pages of ${READ_PAGE_SIZE}: ` +
      `${read.traces} traces (${read.spans} spans) read in ${fmt(read.seconds, 1)} s (${fmt(rate, 1)} traces/s); load average ${load()}`,
  );
  return rate;
}

export async function main(): Promise<void> {
  if (MLFLOW_PYTHON === undefined) {
    console.log(`skipped: ${MLFLOW_SKIP_REASON}`);
    return;
  }
  const mlflow = await startMlflowServer(MLFLOW_PYTHON, { maxSeconds: 3600 });
  try {
    console.log(
      `MLflow ${mlflow.version} (SQLite, 1 worker) at ${mlflow.base}; load average ${load()}`,
    );
    const loaded = await loadTraces(mlflow, EXPERIMENT, COUNT);
    const mlflowRate = await mlflowRead(mlflow, loaded.experiment_id);
    const ratio = (count: number, secs: number) => fmt(count / secs / mlflowRate, 2);

    const plain = await run(mlflow, EXPERIMENT, COUNT, false);
    console.log(
      `ratio to the MLflow client's read: pulled ${ratio(COUNT, plain.pulledSecs)}×, pulled and scored ${ratio(COUNT, plain.scoredSecs)}× ` +
        `(touchstone traces/s over MLflow client traces/s); load average ${load()}`,
    );
    if (WRITE_BACK_COUNT > 0) {
      await loadTraces(mlflow, WRITE_BACK_EXPERIMENT, WRITE_BACK_COUNT);
      const wb = await run(mlflow, WRITE_BACK_EXPERIMENT, WRITE_BACK_COUNT, true);
      console.log(
        `with write-back, ratio to the MLflow client's read: pulled and scored ${ratio(WRITE_BACK_COUNT, wb.scoredSecs)}×` +
          `${wb.writtenSecs === undefined ? '' : `, and written back ${ratio(WRITE_BACK_COUNT, wb.writtenSecs)}×`}; load average ${load()}`,
      );
    } else {
      console.log('with write-back: skipped (BENCH_SOURCE_WRITEBACK_TRACES=0)');
    }
  } finally {
    await mlflow.stop();
  }
}
