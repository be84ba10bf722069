/**
 * Normalization (conventions → Record + Trajectory + summary) per span, warm, on the ingest
 * bench's agent traces as completion reads them back from the store (spans parsed from their
 * chunk's JSON). Prints µs per span (median of rounds), wall clock and the process's CPU time (on
 * a shared, loaded machine the CPU time is the steadier figure), with the load average; with
 * BENCH_CPU_PROFILE=<path> also writes a V8 CPU profile of the timed rounds.
 * Budget (issue 24: normalization several times cheaper): was 32–39 µs per span warm at load
 * 11–18. In one sitting at load 3 (CPU, medians of 5 runs), the build (c74b632) 16.6 µs,
 * now 5.2 µs: 3.2 times cheaper, 18.2 → 4.1 KB allocated per span; docs/performance.md
 * "Normalization" has the figures. Run it as `dist/` runs (tsx adds a wrapper per nested function):
 * `npx esbuild bench/normalize.ts --bundle --platform=node --format=esm --target=node22
 * --packages=external --outfile=<dir>/normalize.mjs`, `<dir>` holding a node_modules link, then
 * `node -e "import('<dir>/normalize.mjs').then((m) => m.main())"`.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { loadavg } from 'node:os';
import type { Span } from '../src/core/index.js';
import { decodeOtlpProtobuf, normalizeStoredTrace } from '../src/ingest/index.js';
import type { PendingTrace } from '../src/store/index.js';
import { protobufBody, recordSpans } from '../test/support/otel.js';
import { agent } from './ingest.js';
import { fmt } from './stats.js';

const TRACES = Number(process.env.BENCH_TRACES ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const CPU_PROFILE = process.env.BENCH_CPU_PROFILE;

/** Each trace's spans as the store gives them back: one JSON text per trace, parsed per round. */
function storedTraces(): string[] {
  const spans = recordSpans({ 'service.name': 'svc' }, (t) => {
    for (let i = 0; i < TRACES; i++) agent(t, i);
  });
  const decoded = decodeOtlpProtobuf(protobufBody(spans), { maxAttributeBytes: 64 * 1024 });
  const byTrace = new Map<string, Span[]>();
  for (const span of decoded.spans) {
    const list = byTrace.get(span.traceId) ?? [];
    list.push(span);
    byTrace.set(span.traceId, list);
  }
  return [...byTrace.values()].map((list) => JSON.stringify(list));
}

function round(texts: readonly string[]): { ms: number; cpuMs: number; spans: number } {
  const traces = texts.map((t) => JSON.parse(t) as Span[]);
  let spans = 0;
  const start = performance.now();
  const cpu = process.cpuUsage();
  for (const trace of traces) {
    const pending: PendingTrace = {
      project: 'default',
      traceId: trace[0]?.traceId ?? '',
      lastSpanAt: 0,
      labels: {},
      source: 'otlp',
    };
    normalizeStoredTrace(trace, pending);
    spans += trace.length;
  }
  const used = process.cpuUsage(cpu);
  return { ms: performance.now() - start, cpuMs: (used.user + used.system) / 1000, spans };
}

export async function main(): Promise<void> {
  const texts = storedTraces();
  round(texts); // warm-up
  const session = CPU_PROFILE === undefined ? undefined : new Session();
  if (session !== undefined) {
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
  }
  const perSpan: number[] = [];
  const cpuPerSpan: number[] = [];
  let spans = 0;
  for (let r = 0; r < ROUNDS; r++) {
    const m = round(texts);
    perSpan.push((m.ms * 1000) / m.spans);
    cpuPerSpan.push((m.cpuMs * 1000) / m.spans);
    spans = m.spans;
  }
  if (session !== undefined && CPU_PROFILE !== undefined) {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(CPU_PROFILE, JSON.stringify(profile));
    session.disconnect();
  }
  perSpan.sort((a, b) => a - b);
  cpuPerSpan.sort((a, b) => a - b);
  const median = (list: number[]) => list[Math.floor(list.length / 2)] ?? 0;
  console.log(
    `normalize: ${fmt(median(perSpan), 1)} µs per span (median of ${ROUNDS} rounds of ${spans} ` +
      `spans, ${texts.length} traces; best ${fmt(perSpan[0] ?? 0, 1)}), CPU ` +
      `${fmt(median(cpuPerSpan), 1)} µs per span (best ${fmt(cpuPerSpan[0] ?? 0, 1)}), ` +
      `load ${loadavg()[0]?.toFixed(2)}`,
  );
}
