/**
 * OTLP ingest over HTTP with protobuf bodies, redaction on (defaults, so every secret detector, +
 * every PII detector), into SQLite and (when TOUCHSTONE_TEST_PG or TOUCHSTONE_BENCH_PG is set)
 * PostgreSQL. Prints spans/s stored (the answer comes only after the spans are durable), p95
 * request latency and CPU per span; then the same against the compiled server in its own process,
 * on SQLite and on PostgreSQL: spans/s, its CPU per span (main thread, all threads), its peak RSS
 * and how long after the last answer every trace was complete; a PostgreSQL server on this machine
 * also gets its CPU per span printed, and each PostgreSQL run a schema of its own. CPU per span is
 * the figure to compare on a shared machine: spans/s moves with the load average, which every
 * line prints. Then the cost of the secret detectors: SQLite runs with them off and on,
 * alternately (BENCH_SECRETS_ROUNDS pairs, default 3; 0 skips), compared by their medians.
 * Budget: ≥ 30k spans/s on SQLite, ≥ 20k on PostgreSQL (2 cores), server RSS ≤ 300 MB; the
 * secret detectors cost ≤ 15% of ingest.
 *
 * Last, the peers (bench/peers/README.md): the compiled server beside Arize Phoenix and beside
 * MLflow 3's OTLP endpoint, each pair on the same slice of this payload (its first
 * BENCH_PHOENIX_SPANS, default 5000, and BENCH_MLFLOW_SPANS, default 22000, rounded up to whole
 * requests) one right after the other, BENCH_PEER_ROUNDS times (default 1); spans/s counts only
 * what each server gives back when asked, and the ratio is taken within a pair only.
 * `npm run bench -- ingest --peers` runs only that part, `--no-peers` all but that part;
 * `--servers` only the compiled servers' runs (BENCH_INGEST_THREADS compares thread counts).
 *
 * The payload mix imitates the captured fixtures: agent traces of 12 spans (root agent, LLM calls
 * with GenAI message JSON, OpenInference-style tool spans, a retrieval), 50 traces per request.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { context, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import Database from 'better-sqlite3';
import { pino } from 'pino';
import { createApp } from '../src/app/index.js';
import { loadConfig } from '../src/config/index.js';
import { SQLITE_FILE_NAME } from '../src/store/index.js';
import { STORED_CHUNKS } from '../test/support/ingest-load.js';
import { protobufBody, recordSpans } from '../test/support/otel.js';
import { freePort, serveArgs } from '../test/support/process.js';
import { freshPgSchema } from '../test/support/stores.js';
import { buildServer, completionTail, startBuiltServer } from './built-server.js';
import { mlflowIngest } from './peers/mlflow.js';
import { countSpans, phoenixIngest } from './peers/phoenix.js';
import { type IngestFigures, postBodies, storedAtAnswer } from './peers/post.js';
import { cpuSeconds, fmt, load, percentile, processesCpuSeconds } from './stats.js';

const TOTAL_SPANS = Number(process.env.BENCH_SPANS ?? 400_000);
const TRACES_PER_REQUEST = 50;
const PHOENIX_SPANS = Number(process.env.BENCH_PHOENIX_SPANS ?? 5000);
const MLFLOW_SPANS = Number(process.env.BENCH_MLFLOW_SPANS ?? 22_000);
const PEER_ROUNDS = Number(process.env.BENCH_PEER_ROUNDS ?? 1);
const IN_FLIGHT = 4;
const SECRETS_ROUNDS = Number(process.env.BENCH_SECRETS_ROUNDS ?? 3);
const PII = ['email', 'us-ssn', 'credit-card', 'phone'];
/**
 * A path prefix: the in-process runs write a V8 CPU profile of their timed section (main thread),
 * the compiled server one per thread into `PREFIX-server-N/`.
 */
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
  /** The process name of the database server beside the bench (its CPU per span printed). */
  dbProcess?: string | undefined;
}

async function run(
  label: string,
  store: Record<string, unknown>,
  payload: Payload,
  { secrets = true, completion = true, dbProcess }: RunOptions = {},
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
    const db0 = processesCpuSeconds(dbProcess);
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
    const db1 = processesCpuSeconds(dbProcess);
    console.log(
      `${label}: ${spanCount} spans (${fmt(mb, 1)} MB protobuf, ${requests} requests of ${payload.spansPerBody} spans, ${IN_FLIGHT} in flight): ` +
        `${fmt(spanCount / secs, 0)} spans/s stored, request p50 ${fmt(percentile(latencies, 50), 1)} ms, p95 ${fmt(percentile(latencies, 95), 1)} ms, ` +
        `CPU ${fmt(cpuMsPer1k, 1)} ms per 1k spans (main thread, client included, ${fmt(mainMsPer1k, 1)})` +
        `${db0 === undefined || db1 === undefined ? '' : `, database server ${fmt(((db1 - db0) * 1e6) / spanCount, 1)} µs per span (its processes on this machine)`}` +
        `${failures > 0 ? `, FAILED requests: ${failures}` : ''}; RSS ${fmt(process.memoryUsage().rss / 1e6, 0)} MB; ` +
        `load average ${load()}`,
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

interface TouchstoneProcess {
  base: string;
  pid: number;
  dataDir: string;
  stop(): Promise<void>;
}

let serverRuns = 0;

/**
 * Node options for the compiled server (BENCH_SERVER_NODE_ARGS, split at spaces): V8's heap flags
 * given here replace those `serve` sets for itself (src/main.ts), to measure them.
 */
const SERVER_NODE_ARGS = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);

/**
 * The compiled `touchstone serve` (redaction as in-process) in a fresh data dir: on its SQLite, or
 * on the store `storeConfig` (YAML lines) names.
 */
async function startTouchstone(main: string, storeConfig = ''): Promise<TouchstoneProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), 'touchstone-bench-proc-'));
  writeFileSync(
    join(dataDir, 'config.yaml'),
    `log_level: warn\nlimits:\n  max_body_bytes: 67108864\ntraces:\n  redaction:\n    pii: [email, us-ssn, credit-card, phone]\n${storeConfig}`,
  );
  const port = await freePort();
  // Profiled, every thread of the server writes a V8 CPU profile as it exits (a graceful stop).
  const profile =
    CPU_PROFILE === undefined || CPU_PROFILE === ''
      ? []
      : ['--cpu-prof', `--cpu-prof-dir=${resolve(`${CPU_PROFILE}-server-${++serverRuns}`)}`];
  const proc = await startBuiltServer(
    main,
    serveArgs(dataDir, port, join(dataDir, 'config.yaml')),
    undefined,
    [...SERVER_NODE_ARGS, ...profile],
  );
  return {
    base: `http://127.0.0.1:${port}`,
    pid: proc.pid as number,
    dataDir,
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise((r) => proc.once('exit', r));
        proc.kill(profile.length > 0 ? 'SIGTERM' : 'SIGKILL');
        await exited;
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Spans in a format-1 chunk (a JSON array of entries) or a format-2 one (an object; `s`). */
const STORED_SPANS = `case json_type(spans) when 'object' then '$.s' else '$' end`;

/** Where the separate server stores: its config, and the spans found there. */
interface ServerStore {
  label: string;
  /** YAML lines of the server's config (none: SQLite in its data dir). */
  config: string;
  /** The process name of its database server on this machine (CPU per span printed). */
  dbProcess?: string;
  storedSpans(dataDir: string): Promise<number>;
  dispose(): Promise<void>;
}

/**
 * The server's SQLite database, read back from the file while it runs: the entries of every span
 * chunk, in `span_chunks` and in whole traces' `traces.spans` (the bench's spans have no detached
 * events, the other kind of entry of a format-1 chunk), or the `s` array of a format-2 chunk (a
 * JSON object; store/chunk-format.ts).
 */
const sqliteServerStore: ServerStore = {
  label: 'SQLite',
  config: '',
  async storedSpans(dataDir) {
    const db = new Database(join(dataDir, SQLITE_FILE_NAME), { readonly: true });
    try {
      const row = db
        .prepare(
          `select coalesce(sum(json_array_length(spans, ${STORED_SPANS})), 0) as n
             from ${STORED_CHUNKS}`,
        )
        .get() as { n: number };
      return row.n;
    } finally {
      db.close();
    }
  },
  dispose: async () => undefined,
};

/**
 * A new schema on the PostgreSQL server at `url` for one run (`scoped` selects it), so that no run
 * meets another's rows; dropped after the run.
 */
async function postgresServerStore(url: string): Promise<{ scoped: string; store: ServerStore }> {
  const schema = await freshPgSchema(url);
  return {
    scoped: schema.url,
    store: {
      label: 'PostgreSQL',
      config: `store:\n  driver: postgres\n  url: '${schema.url}'\n`,
      dbProcess: 'postgres',
      async storedSpans() {
        const { rows } = await schema.admin.query<{ n: string }>(
          `select coalesce(sum(case when json_typeof(spans::json) = 'object'
             then json_array_length(spans::json -> 's') else json_array_length(spans::json) end), 0) as n
           from (select spans from ${schema.name}.span_chunks
             union all select spans from ${schema.name}.traces where spans is not null) c`,
        );
        return Number(rows[0]?.n ?? 0);
      },
      dispose: () => schema.drop(),
    },
  };
}

/** The real `touchstone serve` process, so its CPU and memory are measured apart from the client. */
async function runServerProcess(payload: Payload, main: string, store: ServerStore): Promise<void> {
  const server = await startTouchstone(main, store.config).catch(async (err: unknown) => {
    await store.dispose();
    throw err;
  });
  try {
    const main0 = cpuSeconds(server.pid, server.pid);
    const all0 = cpuSeconds(server.pid);
    const db0 = processesCpuSeconds(store.dbProcess);
    const posted = await postBodies(`${server.base}/v1/traces`, payload.bodies, {
      inFlight: IN_FLIGHT,
    });
    const spans = payload.bodies.length * payload.spansPerBody;
    const perSpan = (seconds: number) => fmt((seconds * 1e6) / spans, 1);
    const mainCpu = perSpan(cpuSeconds(server.pid, server.pid) - main0);
    const allCpu = perSpan(cpuSeconds(server.pid) - all0);
    const db1 = processesCpuSeconds(store.dbProcess);
    const stored = await store.storedSpans(server.dataDir);
    const tail = await completionTail(server.base);
    await settled(server.pid, 120_000);
    console.log(
      `${store.label}, separate server process: ${fmt(stored / posted.seconds, 0)} spans/s stored (${stored} of ${spans} read back from its database); ` +
        `server CPU per span ${mainCpu} µs on the main thread, ` +
        `${allCpu} µs all threads while ingesting, ${perSpan(cpuSeconds(server.pid) - all0)} µs including the rest of trace completion` +
        `${db0 === undefined || db1 === undefined ? '' : `, database server ${perSpan(db1 - db0)} µs while ingesting (its processes on this machine)`}; ` +
        `server peak RSS ${fmt(peakRssMb(server.pid), 0)} MB (budget ≤ 300 MB); ` +
        `every trace complete ${fmt(tail, 1)} s after the last answer; load average ${load()}`,
    );
  } finally {
    await server.stop();
    await store.dispose();
  }
}

/**
 * `traces.ingest_threads` of the compiled server's runs (BENCH_INGEST_THREADS, comma-separated,
 * e.g. `1,0,1,0`: one run each, in that order, to compare them alternating); the default when unset.
 */
const INGEST_THREADS = (process.env.BENCH_INGEST_THREADS ?? '').split(',').filter(Boolean);

async function runServerProcesses(
  payload: Payload,
  main: string,
  store: () => Promise<ServerStore>,
): Promise<void> {
  if (INGEST_THREADS.length === 0) return runServerProcess(payload, main, await store());
  for (const n of INGEST_THREADS) {
    const s = await store();
    await runServerProcess(payload, main, {
      ...s,
      label: `${s.label} (traces.ingest_threads ${n})`,
      config: `  ingest_threads: ${Number(n)}\n${s.config}`,
    });
  }
}

/** The compiled server on one slice: spans/s stored, and how long trace completion trailed. */
async function touchstoneIngest(
  main: string,
  bodies: Buffer[],
  warmUp: Buffer,
): Promise<IngestFigures & { completionSeconds: number }> {
  const server = await startTouchstone(main);
  try {
    const url = `${server.base}/v1/traces`;
    await postBodies(url, [warmUp], { inFlight: 1 });
    const spans = bodies.reduce((n, b) => n + countSpans(b), 0);
    const posted = await postBodies(url, bodies, { inFlight: IN_FLIGHT });
    const stored = (await sqliteServerStore.storedSpans(server.dataDir)) - countSpans(warmUp);
    return {
      ...storedAtAnswer(posted, spans, stored),
      completionSeconds: await completionTail(server.base),
    };
  } finally {
    await server.stop();
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

type PeerResult = (IngestFigures & { version: string; note: string }) | { skipped: string };

interface Peer {
  name: string;
  /** Spans of its slice (whole requests: rounded up to a multiple of a request's spans). */
  spans: number;
  run(bodies: Buffer[], warmUp: Buffer): Promise<PeerResult>;
}

const PEERS: Peer[] = [
  {
    name: 'Phoenix',
    spans: PHOENIX_SPANS,
    run: async (bodies, warmUp) => {
      const r = await phoenixIngest(bodies, { inFlight: IN_FLIGHT, warmUp });
      if ('skipped' in r) return r;
      const note = `its SQLite; counted by its GraphQL API; it answers before storing: ${fmt(r.ackSpansPerSecond, 0)} spans/s acknowledged`;
      return { ...r, note };
    },
  },
  {
    name: 'MLflow',
    spans: MLFLOW_SPANS,
    run: async (bodies, warmUp) => {
      const r = await mlflowIngest(bodies, { inFlight: IN_FLIGHT, warmUp });
      if ('skipped' in r) return r;
      const note =
        'OTLP endpoint /v1/traces, SQLite backend, stores before answering; counted by its REST API (traces search + batchGet)';
      return { ...r, note };
    },
  },
];

function figures(label: string, f: IngestFigures, extra: string): string {
  const lost = f.stored < f.spans ? `, ONLY ${f.stored} of ${f.spans} stored` : '';
  return (
    `  ${label}: ${fmt(f.spansPerSecond, 0)} spans/s stored (${f.stored} read back${lost}; ${extra}), ` +
    `${fmt(f.seconds, 1)} s, request p95 ${fmt(f.p95Ms, 1)} ms` +
    `${f.retries > 0 ? `, ${f.retries} retried 503/429` : ''} [load ${load()}]`
  );
}

/**
 * Touchstone beside each peer on the same slice of the same payload (its first requests) in the
 * same round, one right after the other (the order alternates between rounds, as the host's load
 * drifts); the ratio is taken only between those two runs. Each run starts a fresh server with an
 * empty store; start-up and one warm-up request (one agent trace, stored and then left out of the
 * count) are not timed.
 */
async function comparePeers(payload: Payload, main: string): Promise<void> {
  // One agent trace of its own (fresh ids), sent to each server before its timed slice.
  const warmUp = protobufBody(recordSpans({ 'service.name': 'warm-up' }, (t) => agent(t, 0)));
  const ratios = new Map<string, number[]>();
  for (let round = 0; round < PEER_ROUNDS; round++) {
    for (const peer of PEERS) {
      const bodies = payload.bodies.slice(0, Math.ceil(peer.spans / payload.spansPerBody));
      const spans = bodies.length * payload.spansPerBody;
      console.log(
        `round ${round + 1}/${PEER_ROUNDS}, Touchstone and ${peer.name} on the same slice: the first ${spans} spans of the payload ` +
          `(${bodies.length} requests of ${payload.spansPerBody} spans, ${IN_FLIGHT} in flight)`,
      );
      let ours: Awaited<ReturnType<typeof touchstoneIngest>> | undefined;
      let theirs: PeerResult | undefined;
      const runOurs = async () => {
        ours = await touchstoneIngest(main, bodies, warmUp);
        console.log(
          figures(
            'Touchstone (compiled server, SQLite)',
            ours,
            `counted in its database; every trace complete ${fmt(ours.completionSeconds, 1)} s after the last answer`,
          ),
        );
      };
      const runTheirs = async () => {
        theirs = await peer.run(bodies, warmUp);
        if ('skipped' in theirs) console.log(`  ${peer.name}: skipped (${theirs.skipped})`);
        else console.log(figures(`${peer.name} ${theirs.version}`, theirs, theirs.note));
      };
      for (const step of round % 2 === 0 ? [runOurs, runTheirs] : [runTheirs, runOurs])
        await step();
      if (ours === undefined || theirs === undefined || 'skipped' in theirs) continue;
      const ratio = ours.spansPerSecond / theirs.spansPerSecond;
      ratios.set(peer.name, [...(ratios.get(peer.name) ?? []), ratio]);
      console.log(
        `  ratio (same ${spans}-span slice, same round): Touchstone stores ${fmt(ratio, 1)}× ${peer.name}'s spans/s`,
      );
    }
  }
  for (const [name, rs] of ratios) {
    console.log(
      `Touchstone / ${name}, like for like: ${rs.map((r) => `${fmt(r, 1)}×`).join(', ')}` +
        `${rs.length > 2 ? ` (median ${fmt(percentile(rs, 50), 1)}×)` : ''}`,
    );
  }
}

export async function main(): Promise<void> {
  const peersOnly = process.argv.includes('--peers');
  const payload = buildPayload(peersOnly ? Math.max(...PEERS.map((p) => p.spans)) : TOTAL_SPANS);
  const server = buildServer('server');
  if (server === undefined)
    console.log('compiled server: skipped (tsc emitted no bench/out/server/main.js)');
  const serversOnly = process.argv.includes('--servers');
  if (!peersOnly) {
    if (!serversOnly) await run('SQLite', { driver: 'sqlite' }, payload);
    if (server !== undefined)
      await runServerProcesses(payload, server, async () => sqliteServerStore);
    const pgUrl = process.env.TOUCHSTONE_BENCH_PG ?? process.env.TOUCHSTONE_TEST_PG;
    if (pgUrl === undefined)
      console.log(
        'PostgreSQL: skipped (set TOUCHSTONE_BENCH_PG to a connection URL; each run gets a schema of its own)',
      );
    else {
      if (!serversOnly) {
        const inProcess = await postgresServerStore(pgUrl);
        try {
          await run('PostgreSQL', { driver: 'postgres', url: inProcess.scoped }, payload, {
            dbProcess: inProcess.store.dbProcess,
          });
        } finally {
          await inProcess.store.dispose();
        }
      }
      if (server !== undefined) {
        await runServerProcesses(
          payload,
          server,
          async () => (await postgresServerStore(pgUrl)).store,
        );
      }
    }
    if (SECRETS_ROUNDS > 0 && !serversOnly) await compareSecrets(payload);
  }
  if (server !== undefined && !process.argv.includes('--no-peers')) {
    await comparePeers(payload, server);
  }
}
