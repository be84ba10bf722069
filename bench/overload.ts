/**
 * Overload soak: BENCH_CONNECTIONS (200) exporters post OTLP protobuf batches to the compiled
 * server (SQLite) as fast as it answers for BENCH_SECONDS (60), retrying 429/503 after
 * Retry-After; a reader lists traces and scores beside them. Prints the answers by status, the
 * longest wait of any request, read p50/p99, acknowledged spans missing from the store (must be
 * 0) and the server's peak RSS. Goals: no request waits over 10 s, read p99 ≤ 1 s, nothing
 * acknowledged lost, RSS ≤ 300 MB. BENCH_SERVER_MAIN=<main.js> measures another build (one
 * compiled elsewhere, e.g. an earlier commit) instead of this checkout; BENCH_INGEST_THREADS=N
 * sets `traces.ingest_threads`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ingestLoadInChild,
  lostSpans,
  readWhile,
  sampleRss,
  serverFigures,
} from '../test/support/ingest-load.js';
import { freePort, serveArgs } from '../test/support/process.js';
import { buildServer, startBuiltServer } from './built-server.js';
import { fmt, percentile } from './stats.js';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 200);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 60);
/** Traces of 3 spans per batch: 170 makes 510 spans, about what a BatchSpanProcessor sends. */
const TRACES_PER_BATCH = Number(process.env.BENCH_TRACES_PER_BATCH ?? 170);
const INGEST_THREADS = process.env.BENCH_INGEST_THREADS ?? '';

export async function main(): Promise<void> {
  const main = process.env.BENCH_SERVER_MAIN ?? buildServer('overload');
  if (main === undefined) {
    console.log('overload: skipped (tsc emitted no bench/out/overload/main.js)');
    return;
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'touchstone-bench-overload-'));
  const configFile = join(dataDir, 'config.yaml');
  writeFileSync(
    configFile,
    `log_level: warn\n${INGEST_THREADS === '' ? '' : `traces:\n  ingest_threads: ${Number(INGEST_THREADS)}\n`}`,
  );
  const port = await freePort();
  const proc = await startBuiltServer(main, serveArgs(dataDir, port, configFile));
  const base = `http://127.0.0.1:${port}`;
  try {
    const rss = sampleRss(proc.pid as number);
    const load = ingestLoadInChild({
      base,
      connections: CONNECTIONS,
      durationMs: SECONDS * 1000,
      tracesPerBatch: TRACES_PER_BATCH,
    });
    const reads = readWhile(
      base,
      ['/v1alpha1/traces?page_size=50', '/v1alpha1/scores?page_size=50'],
      load,
    );
    const ingest = await load;
    const read = await reads;
    const peakRss = rss.stop();
    const server = await serverFigures(base);
    const lost = lostSpans(dataDir, ingest.acknowledged);
    const statuses = Object.entries(ingest.statuses)
      .map(([s, n]) => `${s}: ${n}`)
      .join(', ');
    console.log(
      `${CONNECTIONS} connections for ${fmt(ingest.seconds, 1)} s, ${ingest.batch.spans}-span batches of ${fmt(ingest.batch.bytes / 1024, 0)} KiB: ` +
        `answers ${statuses}; ${fmt(ingest.acknowledgedSpans / ingest.seconds, 0)} spans/s acknowledged; ` +
        `request p50 ${fmt(percentile(ingest.latencies, 50), 0)} ms, p99 ${fmt(percentile(ingest.latencies, 99), 0)} ms, ` +
        `longest wait ${fmt(Math.max(0, ...ingest.latencies) / 1000, 2)} s (goal ≤ 10 s)` +
        `${ingest.withoutRetryAfter > 0 ? `, ${ingest.withoutRetryAfter} refusals WITHOUT Retry-After` : ''}`,
    );
    console.log(
      `server side: shed ${JSON.stringify(server.shed)}; OTLP requests answered after over 5 s: ${server.otlpOver5s}, over 10 s: ${server.otlpOver10s}; ` +
        `longest event-loop stall ${fmt(server.eventLoopLagMaxMs, 0)} ms`,
    );
    console.log(
      `reads (traces, scores; one at a time): ${read.latencies.length} reads, p50 ${fmt(percentile(read.latencies, 50), 0)} ms, ` +
        `p99 ${fmt(percentile(read.latencies, 99), 0)} ms (goal ≤ 1000), max ${fmt(Math.max(0, ...read.latencies), 0)} ms, ${read.failures} failed; ` +
        `acknowledged spans lost: ${lost} of ${ingest.acknowledgedSpans} (goal 0); server peak RSS ${fmt(peakRss, 0)} MB (goal ≤ 300); ` +
        `load average ${loadavg()
          .map((l) => fmt(l, 1))
          .join(' ')}`,
    );
  } finally {
    proc.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }
}
