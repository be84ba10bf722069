/**
 * OTLP ingest over HTTP with protobuf bodies, redaction on (defaults, so every secret detector, +
 * every PII detector), into SQLite and (when TOUCHSTONE_TEST_PG or TOUCHSTONE_BENCH_PG is set)
 * PostgreSQL. Prints spans/s stored (the answer comes only after the spans are durable), p95
 * request latency and CPU per span; then the same on SQLite against the compiled server in its own
 * process: spans/s, its CPU per span (main thread, all threads) and its peak RSS. CPU per span is
 * the figure to compare on a shared machine: spans/s moves with the load average, which every
 * line prints. Then the cost of the secret detectors: SQLite runs with them off and on,
 * alternately (BENCH_SECRETS_ROUNDS pairs, default 3; 0 skips), compared by their medians.
 * Budget: ≥ 30k spans/s on SQLite, ≥ 20k on PostgreSQL (2 cores), server RSS ≤ 300 MB; the
 * secret detectors cost ≤ 15% of ingest.
 *
 * The payload mix imitates the captured fixtures: agent traces of 12 spans (root agent, LLM calls
 * with GenAI message JSON, OpenInference-style tool spans, a retrieval), 50 traces per request.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { context, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import { pino } from 'pino';
import { createApp } from '../src/app/index.js';
import { loadConfig } from '../src/config/index.js';
import { protobufBody, recordSpans } from '../test/support/otel.js';
import { freePort, serveArgs } from '../test/support/process.js';
import { buildServer, startBuiltServer } from './built-server.js';
import { phoenixIngest } from './peers/phoenix.js';
import { fmt, percentile } from './stats.js';

const TOTAL_SPANS = Number(process.env.BENCH_SPANS ?? 400_000);
const TRACES_PER_REQUEST = 50;
const PHOENIX_SPANS = Number(process.env.BENCH_PHOENIX_SPANS ?? 5000);
const IN_FLIGHT = 4;
const SECRETS_ROUNDS = Number(process.env.BENCH_SECRETS_ROUNDS ?? 3);
const PII = ['email', 'us-ssn', 'credit-card', 'phone'];
/** Writes a V8 CPU profile of the timed section (main thread) to this path prefix when set. */
const CPU_PROFILE = process.env.BENCH_CPU_PROFILE;

async function profiled<T>(path: string | undefined, fn: () => Promise<T>): Promise<T> {
  if (path === undefined || path === '') return fn();
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  try {
    return await fn();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(path, JSON.stringify(profile));
    session.disconnect();
  }
}

export function agent(tracer: Tracer, i: number): void {
  tracer.startActiveSpan(
    'invoke_agent travel',
    {
      attributes: {
        'gen_ai.operation.name': 'invoke_agent',
        'gen_ai.agent.name': 'travel',
        'touchstone.label.workflow': 'travel',
      },
    },
    (root) => {
      const ctx = trace.setSpan(context.active(), root);
      for (let step = 0; step < 4; step++) {
        const llm = tracer.startSpan(
          'chat gpt-4o-mini',
          {
            attributes: {
              'gen_ai.operation.name': 'chat',
              'gen_ai.request.model': 'gpt-4o-mini',
              'gen_ai.usage.input_tokens': 300 + step,
              'gen_ai.usage.output_tokens': 40,
              'gen_ai.input.messages': JSON.stringify([
                {
                  role: 'system',
                  parts: [{ type: 'text', content: 'You are a travel assistant. Be brief.' }],
                },
                {
                  role: 'user',
                  parts: [
                    {
                      type: 'text',
                      content: `Plan a weekend in Lisbon for request ${i}; email me at jo${i}@example.com`,
                    },
                  ],
                },
              ]),
              'gen_ai.output.messages': JSON.stringify([
                {
                  role: 'assistant',
                  parts: [
                    {
                      type: 'tool_call',
                      id: `call_${step}`,
                      name: 'search',
                      arguments: { q: 'Lisbon hotels' },
                    },
                  ],
                },
              ]),
              'http.request.header.authorization': 'Bearer sk-test-abcdefghijklmnop1234',
            },
          },
          ctx,
        );
        llm.end();
        const tool = tracer.startSpan(
          'search',
          {
            attributes: {
              'openinference.span.kind': 'TOOL',
              'tool.name': 'search',
              'input.value': '{"q":"Lisbon hotels"}',
              'output.value':
                'Hotel A (4.5), Hotel B (4.1), Hotel C (3.9) — call +1 415 555 0100 to book',
            },
          },
          ctx,
        );
        if (step === 3 && i % 10 === 0)
          tool.setStatus({ code: SpanStatusCode.ERROR, message: 'search timed out' });
        tool.end();
      }
      const retrieval = tracer.startSpan(
        'retrieve',
        { attributes: { 'openinference.span.kind': 'RETRIEVER', 'input.value': 'Lisbon' } },
        ctx,
      );
      retrieval.end();
      const final = tracer.startSpan(
        'chat gpt-4o-mini',
        {
          attributes: {
            'gen_ai.operation.name': 'chat',
            'gen_ai.request.model': 'gpt-4o-mini',
            'gen_ai.usage.input_tokens': 900,
            'gen_ai.usage.output_tokens': 120,
          },
        },
        ctx,
      );
      final.end();
      root.end();
    },
  );
}

interface Payload {
  bodies: Buffer[];
  spansPerBody: number;
}

/** Distinct payloads (distinct trace ids), built before any timing starts. */
function buildPayload(totalSpans: number): Payload {
  const spansPerTrace = recordSpans({ 'service.name': 'probe' }, (t) => agent(t, 0)).length;
  const requests = Math.ceil(totalSpans / (spansPerTrace * TRACES_PER_REQUEST));
  const bodies: Buffer[] = [];
  for (let r = 0; r < requests; r++) {
    const spans = recordSpans({ 'service.name': `svc-${r % 5}` }, (t) => {
      for (let k = 0; k < TRACES_PER_REQUEST; k++) agent(t, r * TRACES_PER_REQUEST + k);
    });
    bodies.push(protobufBody(spans));
  }
  return { bodies, spansPerBody: TRACES_PER_REQUEST * spansPerTrace };
}

interface Measured {
  spansPerSecond: number;
  /** CPU of this process (server and client) per 1k spans while the requests ran. */
  cpuMsPer1k: number;
  /** The same, main thread only (where redaction runs; completion's worker left out). */
  mainMsPer1k: number;
}

interface RunOptions {
  /** `traces.redaction.secrets` (default true). */
  secrets?: boolean;
  /** Wait for (and report) trace completion after the last answer (default true). */
  completion?: boolean;
}

async function run(
  label: string,
  store: Record<string, unknown>,
  payload: Payload,
  { secrets = true, completion = true }: RunOptions = {},
): Promise<Measured> {
  const dataDir = mkdtempSync(join(tmpdir(), 'touchstone-bench-ingest-'));
  const config = loadConfig({
    overrides: {
      data_dir: dataDir,
      listen: '127.0.0.1:0',
      log_level: 'silent',
      store,
      limits: { max_body_bytes: 64 * 1024 * 1024 },
      traces: { redaction: { pii: PII, secrets } },
    },
  });
  const app = await createApp(config, {
    env: {},
    processMetrics: false,
    logger: pino({ level: 'silent' }),
  });
  const url = `http://${await app.listen()}/v1/traces`;
  try {
    const { bodies } = payload;
    const requests = bodies.length;
    const spanCount = requests * payload.spansPerBody;
    const mb = bodies.reduce((n, b) => n + b.length, 0) / 1e6;

    const latencies: number[] = [];
    let next = 0;
    let failures = 0;
    const cpu0 = process.cpuUsage();
    const main0 = cpuSeconds(process.pid, process.pid);
    const t0 = performance.now();
    const profilePath =
      CPU_PROFILE === undefined ? undefined : `${CPU_PROFILE}-${label}.cpuprofile`;
    await profiled(profilePath, () =>
      Promise.all(
        Array.from({ length: IN_FLIGHT }, async () => {
          while (next < bodies.length) {
            const body = bodies[next++] as Buffer;
            const s = performance.now();
            const res = await fetch(url, {
              method: 'POST',
              body,
              headers: { 'content-type': 'application/x-protobuf' },
            });
            await res.arrayBuffer();
            latencies.push(performance.now() - s);
            if (res.status !== 200) failures++;
          }
        }),
      ),
    );
    const secs = (performance.now() - t0) / 1000;
    const tEnd = performance.now();
    // Load-independent: main-thread + worker CPU of this process (client included) per 1k spans.
    const cpu = process.cpuUsage(cpu0);
    const cpuMsPer1k = ((cpu.user + cpu.system) / 1000 / spanCount) * 1000;
    const mainMsPer1k = ((cpuSeconds(process.pid, process.pid) - main0) * 1e6) / spanCount;
    console.log(
      `${label}: ${spanCount} spans (${fmt(mb, 1)} MB protobuf, ${requests} requests of ${payload.spansPerBody} spans, ${IN_FLIGHT} in flight): ` +
        `${fmt(spanCount / secs, 0)} spans/s stored, request p50 ${fmt(percentile(latencies, 50), 1)} ms, p95 ${fmt(percentile(latencies, 95), 1)} ms, ` +
        `CPU ${fmt(cpuMsPer1k, 1)} ms per 1k spans (main thread, client included, ${fmt(mainMsPer1k, 1)})` +
        `${failures > 0 ? `, FAILED requests: ${failures}` : ''}; RSS ${fmt(process.memoryUsage().rss / 1e6, 0)} MB; ` +
        `load average ${loadavg()
          .map((l) => fmt(l, 1))
          .join(' ')}`,
    );
    if (!completion) return { spansPerSecond: spanCount / secs, cpuMsPer1k, mainMsPer1k };
    // Completion runs off the request path (a worker thread); report how far behind it was.
    while ((await app.store.traces.countOpen()) > 0 && performance.now() - tEnd < 120_000) {
      await new Promise((r) => setTimeout(r, 100));
    }
    const cpuAll = process.cpuUsage(cpu0);
    console.log(
      `${label}: ${(await app.store.traces.countOpen()) === 0 ? 'all' : 'NOT all'} traces completed ${fmt((performance.now() - tEnd) / 1000, 1)} s after the last answer ` +
        `(completion grace ${config.traces.completion_grace} ms); CPU incl. completion ${fmt(((cpuAll.user + cpuAll.system) / 1000 / spanCount) * 1000, 1)} ms per 1k spans`,
    );
    return { spansPerSecond: spanCount / secs, cpuMsPer1k, mainMsPer1k };
  } finally {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Peak RSS (VmHWM) of a process, in MB, from /proc (Linux). */
function peakRssMb(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m === null ? Number.NaN : Number(m[1]) / 1024;
}

/** Clock ticks per second of /proc CPU times (USER_HZ: 100 on every Linux build Node runs on). */
const USER_HZ = 100;

/**
 * CPU seconds (user + system) of a process, or of one of its threads when `tid` is given, from
 * /proc (Linux): the server's own cost, apart from the client's and from other work on the host.
 */
function cpuSeconds(pid: number, tid?: number): number {
  const path = tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`;
  // Fields after the parenthesised command name (which may hold spaces): utime is the 12th.
  const stat = readFileSync(path, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / USER_HZ;
}

/** Waits until a process has used under 2% of a core for 3 s (its trace completion is done). */
async function settled(pid: number, deadlineMs: number): Promise<void> {
  const until = performance.now() + deadlineMs;
  let before = cpuSeconds(pid);
  while (performance.now() < until) {
    await new Promise((r) => setTimeout(r, 3000));
    const now = cpuSeconds(pid);
    if (now - before < 0.06) return;
    before = now;
  }
}

/** The real `touchstone serve` process (SQLite), so its CPU and memory are measured apart from the client. */
async function runServerProcess(payload: Payload): Promise<void> {
  const main = buildServer('server');
  if (main === undefined) {
    console.log(
      'SQLite, separate server process: skipped (tsc emitted no bench/out/server/main.js)',
    );
    return;
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'touchstone-bench-proc-'));
  writeFileSync(
    join(dataDir, 'config.yaml'),
    'log_level: warn\nlimits:\n  max_body_bytes: 67108864\ntraces:\n  redaction:\n    pii: [email, us-ssn, credit-card, phone]\n',
  );
  const port = await freePort();
  const proc = await startBuiltServer(main, serveArgs(dataDir, port, join(dataDir, 'config.yaml')));
  const pid = proc.pid as number;
  try {
    const url = `http://127.0.0.1:${port}/v1/traces`;
    let next = 0;
    const main0 = cpuSeconds(pid, pid);
    const all0 = cpuSeconds(pid);
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < payload.bodies.length) {
          const res = await fetch(url, {
            method: 'POST',
            body: payload.bodies[next++] as Buffer,
            headers: { 'content-type': 'application/x-protobuf' },
          });
          await res.arrayBuffer();
        }
      }),
    );
    const secs = (performance.now() - t0) / 1000;
    const spans = payload.bodies.length * payload.spansPerBody;
    const perSpan = (seconds: number) => fmt((seconds * 1e6) / spans, 1);
    const mainCpu = perSpan(cpuSeconds(pid, pid) - main0);
    const allCpu = perSpan(cpuSeconds(pid) - all0);
    await settled(pid, 120_000);
    console.log(
      `SQLite, separate server process: ${fmt(spans / secs, 0)} spans/s stored; server CPU per span ${mainCpu} µs on the main thread, ` +
        `${allCpu} µs all threads while ingesting, ${perSpan(cpuSeconds(pid) - all0)} µs including the rest of trace completion; ` +
        `server peak RSS ${fmt(peakRssMb(pid), 0)} MB (budget ≤ 300 MB); load average ${loadavg()
          .map((l) => fmt(l, 1))
          .join(' ')}`,
    );
  } finally {
    proc.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * The secret detectors' cost: SQLite runs with them off and on, alternately (the host's load
 * drifts), without waiting for completion, compared by the medians of main-thread CPU per span
 * (the steadiest figure: redaction runs there, completion does not), of process CPU per span and
 * of spans/s.
 */
async function compareSecrets(payload: Payload): Promise<void> {
  const off: Measured[] = [];
  const on: Measured[] = [];
  for (let round = 0; round < SECRETS_ROUNDS; round++) {
    const store = { driver: 'sqlite' };
    off.push(
      await run('SQLite, secret detectors off', store, payload, {
        secrets: false,
        completion: false,
      }),
    );
    on.push(await run('SQLite, secret detectors on', store, payload, { completion: false }));
  }
  const change = (f: (m: Measured) => number) => {
    const before = percentile(off.map(f), 50);
    const after = percentile(on.map(f), 50);
    return `${fmt(before, 1)} → ${fmt(after, 1)} (${after >= before ? '+' : ''}${fmt(((after - before) / before) * 100, 1)}%)`;
  };
  console.log(
    `secret detectors (medians of ${SECRETS_ROUNDS} alternating runs each, off → on): main-thread CPU ${change((m) => m.mainMsPer1k)} ms per 1k spans, ` +
      `process CPU ${change((m) => m.cpuMsPer1k)} ms per 1k spans, spans/s ${change((m) => m.spansPerSecond)}; budget: at most 15% of ingest`,
  );
}

export async function main(): Promise<void> {
  const payload = buildPayload(TOTAL_SPANS);
  const sqlite = (await run('SQLite', { driver: 'sqlite' }, payload)).spansPerSecond;
  await runServerProcess(payload);
  const pg = process.env.TOUCHSTONE_BENCH_PG ?? process.env.TOUCHSTONE_TEST_PG;
  if (pg === undefined)
    console.log(
      'PostgreSQL: skipped (set TOUCHSTONE_BENCH_PG to a connection URL of an empty database)',
    );
  else await run('PostgreSQL', { driver: 'postgres', url: pg }, payload);
  if (SECRETS_ROUNDS > 0) await compareSecrets(payload);

  // The peer: Arize Phoenix on the same payload. It stores ~50 spans/s here, so it gets a slice
  // (BENCH_PHOENIX_SPANS, default 5000); rates are per second, so they compare.
  const slice = Math.max(1, Math.ceil(PHOENIX_SPANS / payload.spansPerBody));
  const phoenix = await phoenixIngest(payload.bodies.slice(0, slice), { inFlight: IN_FLIGHT });
  if ('skipped' in phoenix) {
    console.log(`Phoenix: skipped (${phoenix.skipped})`);
    return;
  }
  console.log(
    `Phoenix ${phoenix.version} (its SQLite, same payload, first ${phoenix.spans} spans): ${fmt(phoenix.spansPerSecond, 0)} spans/s stored ` +
      `(${fmt(phoenix.ackSpansPerSecond, 0)} spans/s acknowledged; it answers before storing), request p95 ${fmt(phoenix.p95Ms, 1)} ms. ` +
      `Touchstone on SQLite stores ${fmt(sqlite / phoenix.spansPerSecond, 1)}× faster, and acknowledges only once stored.`,
  );
}
