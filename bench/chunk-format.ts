/**
 * Span chunk formats (src/store/chunk-format.ts), encode and parse, per span: the ingest bench's
 * agent traces decoded from OTLP protobuf (requests of 50 traces, one chunk per trace as ingest
 * stores them), each format encoded and then read back, the formats alternating round by round.
 * Prints per format the median CPU µs per span to encode and to decode, and the chunk characters
 * per span, with the load average. Also the cost of holding ids as bytes (hex → base64 and back,
 * per span: its span id and parent id), which format 2 does not do. Then what the size does to
 * the write: each format's chunks inserted into a SQLite table like `span_chunks` (WAL,
 * synchronous NORMAL as the store opens it; one transaction and one multi-row INSERT per request
 * of 50 traces, as ingest writes them), CPU µs per span for INSERT plus COMMIT, and the bytes of
 * WAL written, formats alternating.
 *
 * Measured on the 2-core machine at load 7–11 (docs/performance.md, Compact span chunks): format
 * 1 → 2, characters 758 → 460 per span, encode 3.5–4.2 → 2.2–3.0 µs, parse 3.2–4.1 → 1.9–2.8 µs,
 * INSERT + COMMIT 2.8 → 1.8–1.9 µs, WAL 851 → 553 bytes; ids as bytes 1.3–1.6 µs per span for 8
 * characters saved (not done).
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { Span } from '../src/core/index.js';
import { decodeOtlpProtobuf } from '../src/ingest/index.js';
import {
  decodeChunk,
  encodeChunkV1,
  encodeChunkV2,
  type ResourceRef,
} from '../src/store/chunk-format.js';
import type { SpanBatch } from '../src/store/index.js';
import { protobufBody, recordSpans } from '../test/support/otel.js';
import { agent } from './ingest.js';
import { fmt } from './stats.js';

const TRACES = Number(process.env.BENCH_TRACES ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const PER_REQUEST = 50;

function batchesOf(): SpanBatch[] {
  const out: SpanBatch[] = [];
  for (let r = 0; r < TRACES / PER_REQUEST; r++) {
    const spans = recordSpans({ 'service.name': `svc-${r % 5}` }, (t) => {
      for (let k = 0; k < PER_REQUEST; k++) agent(t, r * PER_REQUEST + k);
    });
    const decoded = decodeOtlpProtobuf(protobufBody(spans), { maxAttributeBytes: 64 * 1024 });
    const byTrace = new Map<string, Span[]>();
    for (const span of decoded.spans) {
      const list = byTrace.get(span.traceId) ?? [];
      list.push(span);
      byTrace.set(span.traceId, list);
    }
    for (const [traceId, list] of byTrace) {
      out.push({ project: 'default', traceId, spans: list, labels: {}, source: 'otlp' });
    }
  }
  return out;
}

const refOf: ResourceRef = () => 'a'.repeat(64);

function cpuUs(fn: () => void): number {
  const before = process.cpuUsage();
  fn();
  const used = process.cpuUsage(before);
  return used.user + used.system;
}

interface Figures {
  encode: number[];
  decode: number[];
  chars: number;
}

function round(batches: SpanBatch[], format: 1 | 2, spans: number, into: Figures): void {
  let texts: string[] = [];
  into.encode.push(
    cpuUs(() => {
      texts =
        format === 1
          ? batches.map((b) => encodeChunkV1(b, refOf))
          : batches.map((b) => encodeChunkV2(b, refOf) as string);
    }) / spans,
  );
  let read = 0;
  into.decode.push(
    cpuUs(() => {
      for (let i = 0; i < texts.length; i++) {
        read += decodeChunk(format, texts[i]!, batches[i]!.traceId).spans.length;
      }
    }) / spans,
  );
  if (read !== spans) throw new Error(`format ${format} read ${read} of ${spans} spans`);
  into.chars = texts.reduce((n, t) => n + t.length, 0) / spans;
}

const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!;

/** Each format's chunks written to a fresh SQLite file, a request (50 chunks) per transaction. */
function writeRound(texts: string[], spans: number): { cpu: number; walBytes: number } {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-bench-chunks-'));
  const db = new Database(join(dir, 'db'));
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('wal_autocheckpoint = 0');
    db.exec(`create table span_chunks (project text not null, trace_id text not null,
      chunk text not null, spans text not null, format integer not null default 1,
      primary key (project, trace_id, chunk))`);
    const values = Array.from({ length: PER_REQUEST }, () => '(?, ?, ?, ?, ?)').join(', ');
    const insert = db.prepare(`insert into span_chunks values ${values}`);
    const write = db.transaction((rows: unknown[]) => insert.run(...rows));
    const cpu = cpuUs(() => {
      for (let at = 0; at + PER_REQUEST <= texts.length; at += PER_REQUEST) {
        const rows: unknown[] = [];
        for (let i = at; i < at + PER_REQUEST; i++) {
          rows.push('default', String(i).padStart(32, '0'), `c${i}`, texts[i], 1);
        }
        write(rows);
      }
    });
    return { cpu: cpu / spans, walBytes: statSync(join(dir, 'db-wal')).size / spans };
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function main(): Promise<void> {
  const batches = batchesOf();
  const spans = batches.reduce((n, b) => n + b.spans.length, 0);
  const figures: Record<1 | 2, Figures> = {
    1: { encode: [], decode: [], chars: 0 },
    2: { encode: [], decode: [], chars: 0 },
  };
  // Warm-up, then the formats alternately.
  round(batches, 1, spans, { encode: [], decode: [], chars: 0 });
  round(batches, 2, spans, { encode: [], decode: [], chars: 0 });
  for (let r = 0; r < ROUNDS; r++) {
    for (const f of r % 2 === 0 ? ([1, 2] as const) : ([2, 1] as const)) {
      round(batches, f, spans, figures[f]);
    }
  }
  const ids = batches.flatMap((b) => b.spans.map((s) => [s.spanId, s.parentSpanId] as const));
  const idCost: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    idCost.push(
      cpuUs(() => {
        for (const [id, parent] of ids) {
          const a = Buffer.from(id, 'hex').toString('base64');
          const b = parent === '' ? '' : Buffer.from(parent, 'hex').toString('base64');
          if (Buffer.from(a, 'base64').toString('hex') !== id) throw new Error('id');
          if (b !== '' && Buffer.from(b, 'base64').toString('hex') !== parent)
            throw new Error('id');
        }
      }) / spans,
    );
  }
  const texts: Record<1 | 2, string[]> = {
    1: batches.map((b) => encodeChunkV1(b, refOf)),
    2: batches.map((b) => encodeChunkV2(b, refOf) as string),
  };
  const writes: Record<1 | 2, { cpu: number[]; wal: number }> = {
    1: { cpu: [], wal: 0 },
    2: { cpu: [], wal: 0 },
  };
  for (let r = 0; r < ROUNDS; r++) {
    for (const f of r % 2 === 0 ? ([1, 2] as const) : ([2, 1] as const)) {
      const w = writeRound(texts[f], spans);
      writes[f].cpu.push(w.cpu);
      writes[f].wal = w.walBytes;
    }
  }
  const load = loadavg()[0]?.toFixed(2);
  for (const f of [1, 2] as const) {
    const m = figures[f];
    console.log(
      `chunk format ${f}: encode ${fmt(median(m.encode), 2)} µs, parse ${fmt(median(m.decode), 2)} µs CPU per span ` +
        `(median of ${ROUNDS} rounds of ${spans} spans), ${fmt(m.chars, 0)} characters per span, load ${load}`,
    );
  }
  for (const f of [1, 2] as const) {
    console.log(
      `chunk format ${f} written to SQLite (INSERT + COMMIT, a transaction per 50 chunks): ` +
        `${fmt(median(writes[f].cpu), 2)} µs CPU per span, ${fmt(writes[f].wal, 0)} bytes of WAL per span, load ${load}`,
    );
  }
  console.log(
    `ids as bytes (hex → base64 → hex, span and parent id): ${fmt(median(idCost), 2)} µs CPU per span, ` +
      `saves 8 characters of ${fmt(figures[2].chars, 0)}; load ${load}`,
  );
}
