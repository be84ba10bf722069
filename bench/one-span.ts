/**
 * One-span traces (what the logging SDKs send: one span per logged record) through the compiled
 * server on SQLite, with one cheap policy applied (`tool-errors`, every trace), until every trace
 * is stored, complete and scored. BENCH_ONE_SPAN_TRACES (default 30 000) traces, pre-encoded as
 * OTLP protobuf, 500 per request, 4 requests in flight, in two id shapes:
 *  - random: 16 random bytes, as OpenTelemetry SDKs make trace ids;
 *  - time-ordered: 6 bytes of Unix milliseconds then 10 random, as sdk/python makes them.
 * Each run starts a fresh server (default config but the body cap; redaction on) and prints:
 * acknowledged/s (last answer), complete/s (until `touchstone_traces_completed_total` counts
 * every trace and `touchstone_open_traces` is 0), scored/s (until the policy's scored counter
 * does), the server's CPU per trace (all threads, /proc) to complete and to score, and the load
 * average. Rates move with the host's load; CPU per trace is the figure to compare.
 *
 * BENCH_ONE_SPAN_WORKER=0 runs this build with `online.worker: false` (scoring on the main thread).
 *
 * BENCH_CPU_PROFILE=PREFIX writes V8 CPU profiles of each server run (every thread; the main
 * thread's file has thread id 0 in its name) under PREFIX-N, N counting the runs from 1; the
 * server is then stopped with SIGTERM, so the profiles are written.
 *
 * BENCH_ONE_SPAN_BASELINE=path/to/main.js also runs another compiled server (say, a build of the
 * main branch: `npx tsc -p tsconfig.build.json --outDir DIR` in its checkout), alternating with
 * this one run by run; BENCH_ONE_SPAN_ROUNDS (default 1) pairs of runs per id shape.
 *
 * Target (issue 24): ≥ 25k one-span traces/s stored and complete on SQLite, both id shapes, with
 * the policy applied. Not reached: 11.7–12.4k/s with random ids and 14.3–14.4k/s time-ordered on
 * 2 cores with requests prepared in a worker thread (BENCH_ONE_SPAN_INGEST_THREADS=1), 8.7–9.9k
 * and 10.2–12.2k prepared in-process (the default; docs/performance.md, "One-span traces" and
 * the sections after it, has each step's figures and where the threads' time goes).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  type IdGenerator,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { protobufBody } from '../test/support/otel.js';
import { freePort, serveArgs } from '../test/support/process.js';
import { buildServer, startBuiltServer } from './built-server.js';
import { postBodies } from './peers/post.js';
import { cpuSeconds, fmt, load } from './stats.js';

const TRACES = Number(process.env.BENCH_ONE_SPAN_TRACES ?? 30_000);
const ROUNDS = Number(process.env.BENCH_ONE_SPAN_ROUNDS ?? 1);
const BASELINE = process.env.BENCH_ONE_SPAN_BASELINE;
/** BENCH_ONE_SPAN_WORKER=0 runs this build with `online.worker: false` (scoring on the main thread). */
const IN_PROCESS = process.env.BENCH_ONE_SPAN_WORKER === '0';
/** BENCH_ONE_SPAN_INGEST_THREADS=N runs this build with `traces.ingest_threads: N` (default 0). */
const INGEST_THREADS = process.env.BENCH_ONE_SPAN_INGEST_THREADS ?? '';
const CPU_PROFILE = process.env.BENCH_CPU_PROFILE;
let runs = 0;
const PER_REQUEST = 500;
const IN_FLIGHT = 4;
const POLICY = 'tool-errors-only';

type IdShape = 'random' | 'time-ordered';

/** Trace ids as OTel SDKs make them (random), or as sdk/python does (48 bits of ms first). */
function idGenerator(shape: IdShape): IdGenerator {
  return {
    generateTraceId: () => {
      const id = randomBytes(16);
      if (shape === 'time-ordered') id.writeUIntBE(Date.now(), 0, 6);
      return id.toString('hex');
    },
    generateSpanId: () => randomBytes(8).toString('hex'),
  };
}

/** Request bodies of one-span traces shaped like the SDK's records (input, output, a label). */
function bodies(shape: IdShape, traces: number): Buffer[] {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      'service.name': 'support-bot',
      'telemetry.sdk.name': 'touchstone',
      'telemetry.sdk.language': 'python',
    }),
    idGenerator: idGenerator(shape),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer('touchstone', '0.1.0');
  const out: Buffer[] = [];
  for (let i = 0; i < traces; i++) {
    const span = tracer.startSpan('touchstone.log', {
      attributes: {
        'touchstone.record.input': JSON.stringify({
          question: `How do I reset my password? #${i}`,
        }),
        'touchstone.record.output': JSON.stringify(
          'Open Settings, choose Security, then Reset password; a link is sent to your email.',
        ),
        'touchstone.record.metadata': JSON.stringify({ model: 'gpt-4o-mini', turn: i % 7 }),
        'touchstone.label.workflow': 'support',
      },
    });
    span.end();
    const batch = exporter.getFinishedSpans();
    if (batch.length === PER_REQUEST) {
      out.push(protobufBody(batch));
      exporter.reset();
    }
  }
  const rest = exporter.getFinishedSpans();
  if (rest.length > 0) out.push(protobufBody(rest));
  return out;
}

async function metric(base: string, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (!(rest.startsWith(' ') || (rest.startsWith('{') && rest.includes(labels)))) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

interface Figures {
  ackPerSecond: number;
  completePerSecond: number;
  scoredPerSecond: number;
  cpuCompleteUs: number;
  cpuScoredUs: number;
}

/** Polls until `done` holds (every 50 ms); throws after 10 minutes. */
async function until(done: () => Promise<boolean>): Promise<void> {
  const deadline = performance.now() + 600_000;
  while (!(await done())) {
    if (performance.now() > deadline) throw new Error('not done within 10 minutes');
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function run(
  main: string,
  payload: Buffer[],
  warmUp: Buffer,
  config: string,
): Promise<Figures> {
  const dataDir = mkdtempSync(join(tmpdir(), 'touchstone-bench-one-span-'));
  writeFileSync(
    join(dataDir, 'config.yaml'),
    `log_level: warn\nlimits:\n  max_body_bytes: 67108864\n${config}`,
  );
  const port = await freePort();
  runs++;
  const profile =
    CPU_PROFILE === undefined || CPU_PROFILE === ''
      ? []
      : ['--cpu-prof', `--cpu-prof-dir=${resolve(`${CPU_PROFILE}-${runs}`)}`];
  const proc = await startBuiltServer(
    main,
    serveArgs(dataDir, port, join(dataDir, 'config.yaml')),
    undefined,
    profile,
  );
  const base = `http://127.0.0.1:${port}`;
  const pid = proc.pid as number;
  try {
    const applied = await fetch(`${base}/v1alpha1/policies`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        apiVersion: 'touchstone.dev/v1alpha1',
        kind: 'OnlineEvalPolicy',
        metadata: { name: POLICY },
        spec: { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] },
      }),
    });
    if (applied.status !== 200) throw new Error(`applying the policy: ${applied.status}`);
    const scored = () =>
      metric(base, 'touchstone_policy_traces_scored_total', `policy="${POLICY}"`);
    const completed = () => metric(base, 'touchstone_traces_completed_total');
    const open = () => metric(base, 'touchstone_open_traces');
    // A fresh process's first requests pay for compiling the paths they take: one request of
    // traces is stored, completed and scored before the clock starts, and not counted.
    await postBodies(`${base}/v1/traces`, [warmUp], { inFlight: 1 });
    await until(async () => (await open()) === 0 && (await scored()) >= PER_REQUEST);
    const completed0 = await completed();
    const scored0 = await scored();
    const cpu0 = cpuSeconds(pid);
    const t0 = performance.now();
    const posted = await postBodies(`${base}/v1/traces`, payload, { inFlight: IN_FLIGHT });
    await until(async () => (await completed()) - completed0 >= TRACES && (await open()) === 0);
    const completeAt = performance.now();
    const cpuComplete = cpuSeconds(pid) - cpu0;
    await until(async () => (await scored()) - scored0 >= TRACES);
    const scoredAt = performance.now();
    const cpuScored = cpuSeconds(pid) - cpu0;
    return {
      ackPerSecond: TRACES / posted.seconds,
      completePerSecond: (TRACES * 1000) / (completeAt - t0),
      scoredPerSecond: (TRACES * 1000) / (scoredAt - t0),
      cpuCompleteUs: (cpuComplete * 1e6) / TRACES,
      cpuScoredUs: (cpuScored * 1e6) / TRACES,
    };
  } finally {
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      // A profiled server writes its profiles as it exits, after a graceful stop.
      proc.kill(profile.length > 0 ? 'SIGTERM' : 'SIGKILL');
      await exited;
    }
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function line(label: string, shape: IdShape, f: Figures): string {
  return (
    `${label}, ${shape} ids: ${fmt(f.ackPerSecond, 0)}/s acknowledged, ` +
    `${fmt(f.completePerSecond, 0)}/s stored and complete, ${fmt(f.scoredPerSecond, 0)}/s scored; ` +
    `server CPU ${fmt(f.cpuCompleteUs, 1)} µs per trace to complete, ${fmt(f.cpuScoredUs, 1)} µs to score; ` +
    `load average ${load()}`
  );
}

export async function main(): Promise<void> {
  const built = buildServer('one-span');
  if (built === undefined) throw new Error('the server did not compile');
  // This build completes whole traces on arrival (`traces.complete_on_arrival`); the baseline
  // is run with its defaults (a build before the setting refuses it).
  const servers: [string, string, string][] = [
    [
      `this build${INGEST_THREADS === '' ? '' : `, traces.ingest_threads: ${INGEST_THREADS}`}${IN_PROCESS ? ', online.worker: false' : ''}`,
      built,
      `traces:\n  complete_on_arrival: true\n${INGEST_THREADS === '' ? '' : `  ingest_threads: ${Number(INGEST_THREADS)}\n`}${IN_PROCESS ? 'online:\n  worker: false\n' : ''}`,
    ],
  ];
  if (BASELINE !== undefined && BASELINE !== '') servers.unshift(['baseline', BASELINE, '']);
  console.log(
    `${TRACES} one-span traces, ${PER_REQUEST} per OTLP protobuf request, ${IN_FLIGHT} in flight; SQLite; policy "${POLICY}" (tool-errors) on every trace`,
  );
  for (const shape of ['random', 'time-ordered'] as const) {
    // The first request's traces warm each server up; the rest are measured.
    const [warmUp, ...payload] = bodies(shape, TRACES + PER_REQUEST);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [label, main, config] of servers) {
        console.log(line(label, shape, await run(main, payload, warmUp as Buffer, config)));
      }
    }
  }
}
