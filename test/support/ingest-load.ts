/**
 * Overload as exporters make it: many keep-alive connections each posting OTLP protobuf batches
 * as fast as answers come back, waiting `Retry-After` on 429/503 and sending the batch again, as
 * the OTLP/HTTP exporters do (run in a child process, so the load's own work does not delay the
 * caller's timers); reads timed beside them; the server's RSS sampled from /proc; and the spans
 * the server acknowledged looked up in its SQLite store afterwards. Shared by bench/overload.ts
 * and the adversarial suite.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { Pool } from 'undici';
import { agentTrace, protobufBody, recordSpans } from './otel.js';

/** A protobuf batch and where each of its trace ids sits, so copies can carry fresh ids. */
interface BatchTemplate {
  bytes: Buffer;
  /** Per trace: the byte offsets of its 16-byte id in `bytes`, and its span count. */
  traces: { offsets: number[]; spans: number }[];
  spans: number;
}

/** A batch of `traces` small agent traces (3 spans each), as the OpenTelemetry JS SDK encodes it. */
function batchTemplate(traces: number): BatchTemplate {
  const ids: string[] = [];
  const spans = recordSpans({ 'service.name': 'overload' }, (tracer) => {
    for (let i = 0; i < traces; i++) ids.push(agentTrace(tracer, { fail: i % 10 === 0 }));
  });
  const bytes = protobufBody(spans);
  const perTrace = ids.map((hex) => {
    const id = Buffer.from(hex, 'hex');
    const offsets: number[] = [];
    for (let at = bytes.indexOf(id); at !== -1; at = bytes.indexOf(id, at + id.length)) {
      offsets.push(at);
    }
    return { offsets, spans: spans.filter((s) => s.spanContext().traceId === hex).length };
  });
  return { bytes, traces: perTrace, spans: spans.length };
}

/** A copy of the template with new random trace ids; returns the body and its trace ids. */
function freshBatch(t: BatchTemplate): { body: Buffer; traceIds: string[] } {
  const body = Buffer.from(t.bytes);
  const traceIds = t.traces.map(({ offsets }) => {
    const id = randomBytes(16);
    for (const at of offsets) id.copy(body, at);
    return id.toString('hex');
  });
  return { body, traceIds };
}

export interface IngestFigures {
  /** Requests answered, by status (`error` for a connection failure or a client timeout). */
  statuses: Record<string, number>;
  /** Every attempt's time from sending to the end of its answer, in ms. */
  latencies: number[];
  /** Trace id → span count of every batch answered 2xx. */
  acknowledged: Map<string, number>;
  acknowledgedSpans: number;
  /** 429/503 answers without a Retry-After header. */
  withoutRetryAfter: number;
  seconds: number;
  /** One batch: its spans and protobuf bytes. */
  batch: { spans: number; bytes: number };
}

export interface IngestLoadOptions {
  base: string;
  connections: number;
  durationMs: number;
  /** Agent traces (3 spans each) per batch. */
  tracesPerBatch: number;
  /** A request unanswered this long is abandoned and counted as `error`. */
  timeoutMs?: number;
}

/** `connections` exporters, each sending batches back to back for `durationMs`. */
export async function ingestLoad(opts: IngestLoadOptions): Promise<IngestFigures> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const template = batchTemplate(opts.tracesPerBatch);
  const pool = new Pool(opts.base, {
    connections: opts.connections,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    keepAliveTimeout: 60_000,
  });
  const figures: IngestFigures = {
    statuses: {},
    latencies: [],
    acknowledged: new Map(),
    acknowledgedSpans: 0,
    withoutRetryAfter: 0,
    seconds: 0,
    batch: { spans: template.spans, bytes: template.bytes.length },
  };
  const count = (status: string) => {
    figures.statuses[status] = (figures.statuses[status] ?? 0) + 1;
  };
  const started = performance.now();
  const deadline = started + opts.durationMs;
  const exporter = async () => {
    let batch = freshBatch(template);
    while (performance.now() < deadline) {
      const sent = performance.now();
      let wait = 0;
      try {
        const res = await pool.request({
          path: '/v1/traces',
          method: 'POST',
          body: batch.body,
          headers: { 'content-type': 'application/x-protobuf' },
        });
        await res.body.arrayBuffer();
        figures.latencies.push(performance.now() - sent);
        count(String(res.statusCode));
        if (res.statusCode >= 200 && res.statusCode < 300) {
          batch.traceIds.forEach((id, k) => {
            figures.acknowledged.set(id, template.traces[k]?.spans ?? 0);
          });
          figures.acknowledgedSpans += template.spans;
          batch = freshBatch(template);
        } else if (res.statusCode === 429 || res.statusCode === 503) {
          const after = Number(res.headers['retry-after']);
          if (res.headers['retry-after'] === undefined) figures.withoutRetryAfter++;
          wait = Number.isFinite(after) ? after * 1000 : 1000;
        } else {
          wait = 1000;
        }
      } catch {
        figures.latencies.push(performance.now() - sent);
        count('error');
        wait = 1000;
      }
      // Exporters jitter their backoff (±20%), so retries do not arrive in lockstep.
      if (wait > 0) await sleep(Math.min(wait * (0.8 + Math.random() * 0.4), deadline - sent));
    }
  };
  await Promise.all(Array.from({ length: opts.connections }, exporter));
  figures.seconds = (performance.now() - started) / 1000;
  await pool.close();
  return figures;
}

const CHILD = fileURLToPath(new URL('./ingest-load-child.ts', import.meta.url));

/** `ingestLoad` in a child process (its figures come back as JSON on its stdout). */
export async function ingestLoadInChild(opts: IngestLoadOptions): Promise<IngestFigures> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, JSON.stringify(opts)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`the load generator exited with ${code}`);
  const parsed = JSON.parse(out) as Omit<IngestFigures, 'acknowledged'> & {
    acknowledged: [string, number][];
  };
  return { ...parsed, acknowledged: new Map(parsed.acknowledged) };
}

export interface ReadFigures {
  /** Latency of every read, in ms. */
  latencies: number[];
  /** Reads answered other than 200, or not at all. */
  failures: number;
}

/**
 * Reads `paths` in turn, one at a time on their own connection (a person at the UI), every
 * `intervalMs`, until `until` resolves.
 */
export async function readWhile(
  base: string,
  paths: readonly string[],
  until: Promise<unknown>,
  intervalMs = 100,
  timeoutMs = 30_000,
): Promise<ReadFigures> {
  const pool = new Pool(base, {
    connections: 1,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
  const figures: ReadFigures = { latencies: [], failures: 0 };
  let done = false;
  void until.finally(() => {
    done = true;
  });
  for (let i = 0; !done; i++) {
    const sent = performance.now();
    try {
      const res = await pool.request({ path: paths[i % paths.length] as string, method: 'GET' });
      await res.body.arrayBuffer();
      if (res.statusCode !== 200) figures.failures++;
    } catch {
      figures.failures++;
    }
    figures.latencies.push(performance.now() - sent);
    await sleep(intervalMs);
  }
  await pool.close();
  return figures;
}

/** Samples a process's resident set (VmRSS, Linux) every `intervalMs`; `stop()` gives the peak in MB. */
export function sampleRss(pid: number, intervalMs = 100): { stop(): number } {
  let peak = 0;
  const read = () => {
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (m !== null) peak = Math.max(peak, Number(m[1]) / 1024);
    } catch {
      // The process ended; the peak so far stands.
    }
  };
  read();
  const timer = setInterval(read, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      read();
      return peak;
    },
  };
}

/**
 * Every span chunk of a SQLite store as (trace_id, spans, format) rows: the `span_chunks` rows and
 * whole traces' own chunks (`traces.spans`, migration 22).
 */
export const STORED_CHUNKS = `(select trace_id, spans, format from span_chunks union all
  select trace_id, spans, spans_format from traces where spans is not null)`;

/**
 * Acknowledged spans missing from the server's SQLite store (`<dataDir>/touchstone.db`), read
 * through a connection of its own: per acknowledged trace, the spans acknowledged beyond the
 * distinct span ids stored.
 */
export function lostSpans(dataDir: string, acknowledged: ReadonlyMap<string, number>): number {
  const db = new Database(join(dataDir, 'touchstone.db'));
  try {
    db.pragma('busy_timeout = 30000');
    const rows = db
      .prepare(
        // Format-1 chunks are arrays of span objects; format-2 chunks hold span arrays under
        // `s`, the span id first (store/chunk-format.ts).
        `select c.trace_id as id, count(distinct json_extract(s.value,
             case c.format when 2 then '$[0]' else '$.spanId' end)) as n
           from ${STORED_CHUNKS} c,
             json_each(c.spans, case c.format when 2 then '$.s' else '$' end) s
           group by c.trace_id`,
      )
      .all() as { id: string; n: number }[];
    const stored = new Map(rows.map((r) => [r.id, r.n]));
    let lost = 0;
    for (const [id, spans] of acknowledged) lost += Math.max(0, spans - (stored.get(id) ?? 0));
    return lost;
  } finally {
    db.close();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.max(0, ms)));
}

export interface ServerFigures {
  /** Longest event-loop delay since the previous scrape, in ms (prom-client's histogram max). */
  eventLoopLagMaxMs: number;
  /** OTLP requests the server took longer than 5 s and 10 s to answer (from headers to answer). */
  otlpOver5s: number;
  otlpOver10s: number;
  /** `touchstone_requests_shed_total` by reason. */
  shed: Record<string, number>;
}

/** Figures the server reports about itself on /metrics. */
export async function serverFigures(base: string): Promise<ServerFigures> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const sum = (pattern: RegExp) =>
    text
      .split('\n')
      .filter((line) => pattern.test(line))
      .reduce((n, line) => n + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
  const bucket = (le: string) =>
    sum(
      new RegExp(
        `^touchstone_http_request_duration_seconds_bucket\\{(?=.*route="/v1/traces")(?=.*le="${le}").*\\}`,
      ),
    );
  const shed: Record<string, number> = {};
  for (const m of text.matchAll(/^touchstone_requests_shed_total\{reason="(\w+)"\} (\d+)/gm)) {
    shed[m[1] as string] = Number(m[2]);
  }
  const all = bucket('\\+Inf');
  return {
    eventLoopLagMaxMs: sum(/^nodejs_eventloop_lag_max_seconds /) * 1000,
    otlpOver5s: all - bucket('5'),
    otlpOver10s: all - bucket('10'),
    shed,
  };
}
