/**
 * The Python logging SDK (sdk/python): the caller-side cost of `log()` (µs per call, p50/p99) and
 * the records/s it exports, first to a sink that answers at once (what the SDK itself can do), then
 * to the compiled `touchstone serve` (SQLite, its own process: what is stored end to end). The
 * server acknowledges a record once its span is durably stored; it then completes each record's
 * trace (normalized, digested, listed) in its background worker, so the bench also waits for the
 * server's open-trace gauge to reach zero and prints how long completion trailed and its rate. Needs
 * TOUCHSTONE_SDK_PYTHON (the SDK's test venv); with TOUCHSTONE_INTEROP_MLFLOW_PYTHON also set, the
 * same record is logged with the MLflow SDK to a live MLflow tracking server in the same run, and
 * the ratios are printed. Langfuse's Python SDK (a venv that bench/peers/venv.sh makes; its
 * server cannot run here) logs the same record to the sink, which counts the spans it receives,
 * beside log() to the same sink (TOUCHSTONE_BENCH_LANGFUSE=0 skips it). Budgets (DESIGN §7):
 * log() ≤ 20 µs per call, ≥ 20k records/s exported.
 *
 * Knobs: BENCH_SDK_CALLS (20000 timed calls), BENCH_SDK_RECORDS (100000 exported records),
 * BENCH_MLFLOW_RECORDS (3000: MLflow exports a few hundred traces per second),
 * BENCH_LANGFUSE_RECORDS (20000).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { MLFLOW_PYTHON, startMlflowServer } from '../test/interop/mlflow/mlflow-server.js';
import { freePort, serveArgs } from '../test/support/process.js';
import { runPython } from '../test/support/python.js';
import { buildServer, completionTail, startBuiltServer } from './built-server.js';
import { countSpans, venvPython } from './peers/phoenix.js';
import { fmt, load } from './stats.js';

const SDK_PYTHON = process.env.TOUCHSTONE_SDK_PYTHON || undefined;
const CALLS = Number(process.env.BENCH_SDK_CALLS ?? 20_000);
const RECORDS = Number(process.env.BENCH_SDK_RECORDS ?? 100_000);
const MLFLOW_RECORDS = Number(process.env.BENCH_MLFLOW_RECORDS ?? 3000);
const LANGFUSE_RECORDS = Number(process.env.BENCH_LANGFUSE_RECORDS ?? 20_000);
/** Newest on the Python package index when pinned (2026-11-27). */
const LANGFUSE_REQUIREMENT = 'langfuse==5.0.4';
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SDK_SRC = join(ROOT, 'sdk', 'python', 'src');

interface SdkFigures {
  log_p50_us: number;
  log_p99_us: number;
  log_mean_us: number;
  log_batch_us_per_row: number;
  records: number;
  failed: number;
  records_per_s: number;
  queue_full_retries: number;
  seconds: number;
  /** Records logged before the timed export (warm-up, log() and log_batch() timings). */
  warmup_records: number;
  /** Seconds from the first warm-up record to the start of the timed export. */
  before_timed_s: number;
}

interface MlflowFigures {
  version: string;
  log_trace_p50_us: number;
  log_trace_p99_us: number;
  span_p50_us: number;
  span_p99_us: number;
  records: number;
  records_per_s: number;
}

function lastJson<T>(stdout: string): T {
  const line = stdout.trim().split('\n').pop() ?? '{}';
  return JSON.parse(line) as T;
}

/**
 * An OTLP receiver that answers 200 at once (the SDK's own ceiling) and counts the spans of the
 * protobuf bodies it receives (gzip'd or not), so an exporter's delivery can be checked.
 */
async function startSink(): Promise<{ url: string; server: Server; spans: () => number }> {
  let spans = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.headers['content-type'] === 'application/x-protobuf') {
        try {
          const body = Buffer.concat(chunks);
          spans += countSpans(req.headers['content-encoding'] === 'gzip' ? gunzipSync(body) : body);
        } catch {
          // not OTLP protobuf: answered all the same, not counted
        }
      }
      res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': 0 });
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, server, spans: () => spans };
}

async function sdkRun(python: string, endpoint: string): Promise<SdkFigures> {
  const stdout = await runPython(
    python,
    [join(ROOT, 'bench', 'sdk-python', 'sdk_bench.py'), endpoint, String(CALLS), String(RECORDS)],
    { env: { PYTHONPATH: SDK_SRC }, timeoutMs: 900_000 },
  );
  return lastJson<SdkFigures>(stdout);
}

function printSdk(label: string, f: SdkFigures): void {
  console.log(
    `${label}: log() p50 ${fmt(f.log_p50_us, 1)} µs, p99 ${fmt(f.log_p99_us, 1)} µs, mean ` +
      `${fmt(f.log_mean_us, 1)} µs; log_batch ${fmt(f.log_batch_us_per_row, 1)} µs/row; exported ` +
      `${fmt(f.records_per_s, 0)} records/s (${f.records - f.failed}/${f.records} stored, ` +
      `${f.queue_full_retries} queue-full retries) [load ${load()}]`,
  );
}

export async function main(): Promise<void> {
  if (SDK_PYTHON === undefined) {
    console.log(
      'skipped: TOUCHSTONE_SDK_PYTHON is not set (the python of a venv with sdk/python/requirements-dev.txt)',
    );
    return;
  }
  const sink = await startSink();
  let sdkServer: SdkFigures | undefined;
  let sdkSink: SdkFigures;
  try {
    sdkSink = await sdkRun(SDK_PYTHON, sink.url);
    printSdk('sink answering at once', sdkSink);
  } finally {
    sink.server.close();
  }

  const main = buildServer('sdk-server');
  if (main === undefined) {
    console.log('touchstone serve: skipped (tsc emitted no bench/out/sdk-server/main.js)');
  } else {
    const dataDir = mkdtempSync(join(tmpdir(), 'touchstone-bench-sdk-'));
    const port = await freePort();
    writeFileSync(join(dataDir, 'config.yaml'), 'log_level: warn\n');
    const proc = await startBuiltServer(
      main,
      serveArgs(dataDir, port, join(dataDir, 'config.yaml')),
      60_000,
    );
    const base = `http://127.0.0.1:${port}`;
    try {
      sdkServer = await sdkRun(SDK_PYTHON, base);
      printSdk('touchstone serve (SQLite, compiled)', sdkServer);
      const tail = await completionTail(base);
      // Every record of the run (warm-up and timed calls included) is a trace to complete.
      const traces = sdkServer.records + sdkServer.warmup_records;
      console.log(
        `completion (background worker): every trace complete ${fmt(tail, 1)} s after the last ` +
          `acknowledgment; ${fmt(traces / (sdkServer.seconds + sdkServer.before_timed_s + tail), 0)} ` +
          `traces/s from the first record to the last completion [load ${load()}]`,
      );
    } finally {
      proc.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
  console.log(
    `budget: log() ≤ 20 µs per call, ≥ 20000 records/s exported (DESIGN §7)${
      sdkServer === undefined
        ? ''
        : `; measured p50 ${fmt(sdkServer.log_p50_us, 1)} µs, ${fmt(sdkServer.records_per_s, 0)} records/s to the server`
    }`,
  );

  await langfuse(sdkSink);
  if (MLFLOW_PYTHON === undefined) {
    console.log('MLflow: skipped (TOUCHSTONE_INTEROP_MLFLOW_PYTHON is not set)');
    return;
  }
  const mlflow = await startMlflowServer(MLFLOW_PYTHON, { maxSeconds: 1800 });
  try {
    const stdout = await runPython(
      MLFLOW_PYTHON,
      [
        join(ROOT, 'bench', 'sdk-python', 'mlflow_bench.py'),
        mlflow.base,
        String(Math.min(CALLS, 2000)),
        String(MLFLOW_RECORDS),
      ],
      { timeoutMs: 900_000 },
    );
    const m = lastJson<MlflowFigures>(stdout);
    console.log(
      `MLflow ${m.version} (tracking server, async trace logging): log_trace() p50 ` +
        `${fmt(m.log_trace_p50_us, 1)} µs, p99 ${fmt(m.log_trace_p99_us, 1)} µs; start_span block ` +
        `p50 ${fmt(m.span_p50_us, 1)} µs, p99 ${fmt(m.span_p99_us, 1)} µs; exported ` +
        `${fmt(m.records_per_s, 0)} traces/s (${m.records}) [load ${load()}]`,
    );
    if (sdkServer !== undefined) {
      console.log(
        `ratio: MLflow log_trace() / touchstone log() per call ${fmt(m.log_trace_p50_us / sdkServer.log_p50_us, 1)}× ` +
          `(p50), start_span block ${fmt(m.span_p50_us / sdkServer.log_p50_us, 1)}×; touchstone exports ` +
          `${fmt(sdkServer.records_per_s / m.records_per_s, 1)}× MLflow's records/s`,
      );
    }
  } finally {
    await mlflow.stop();
  }
}

interface LangfuseFigures {
  version: string;
  span_p50_us: number;
  span_p99_us: number;
  span_mean_us: number;
  warmup_records: number;
  records: number;
  seconds: number;
}

/**
 * Langfuse's Python SDK beside touchstone's log(), both exporting to a sink that answers at once
 * (Langfuse's server cannot run here), from a venv that bench/peers/venv.sh makes.
 */
async function langfuse(ours: SdkFigures): Promise<void> {
  if (process.env.TOUCHSTONE_BENCH_LANGFUSE === '0') {
    console.log('Langfuse: skipped (TOUCHSTONE_BENCH_LANGFUSE=0)');
    return;
  }
  const python = await venvPython('langfuse', LANGFUSE_REQUIREMENT);
  if ('skipped' in python) {
    console.log(`Langfuse: skipped (${python.skipped})`);
    return;
  }
  const sink = await startSink();
  try {
    const stdout = await runPython(
      python.path,
      [
        join(ROOT, 'bench', 'sdk-python', 'langfuse_bench.py'),
        sink.url,
        String(CALLS),
        String(LANGFUSE_RECORDS),
      ],
      { timeoutMs: 900_000 },
    );
    const f = lastJson<LangfuseFigures>(stdout);
    // Spans the sink received during the timed export: all it counted but the warm-up's.
    const exported = sink.spans() - f.warmup_records;
    console.log(
      `Langfuse ${f.version} (Python SDK, OTLP exporter to the sink answering at once): ` +
        `start_as_current_observation block p50 ${fmt(f.span_p50_us, 1)} µs, p99 ${fmt(f.span_p99_us, 1)} µs, ` +
        `mean ${fmt(f.span_mean_us, 1)} µs; exported ${fmt(exported / f.seconds, 0)} records/s ` +
        `(${exported}/${f.records} received by the sink) [load ${load()}]`,
    );
    console.log(
      `ratio (both to the sink): Langfuse block / touchstone log() per call ` +
        `${fmt(f.span_p50_us / ours.log_p50_us, 1)}× (p50), ${fmt(f.span_p99_us / ours.log_p99_us, 1)}× (p99); ` +
        `touchstone exports ${fmt(ours.records_per_s / (exported / f.seconds), 1)}× Langfuse's records/s`,
    );
  } catch (err) {
    console.log(`Langfuse: failed (${(err as Error).message.slice(0, 1000)})`);
  } finally {
    sink.server.close();
  }
}
