/**
 * Span chunk formats (src/store/chunk-format.ts), encode and parse, per span: the ingest bench's
 * agent traces decoded from OTLP protobuf (requests of 50 traces, one chunk per trace as ingest
 * stores them), each format encoded and then read back, the formats alternating round by round.
 * Prints per format the median CPU µs per span to encode and to decode, and the chunk characters
 * per span, with the load average. Also the cost of holding ids as bytes (hex → base64 and back,
 * per span: its span id and parent id), which format 2 does not do.
 */
import { loadavg } from 'node:os';
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
  const load = loadavg()[0]?.toFixed(2);
  for (const f of [1, 2] as const) {
    const m = figures[f];
    console.log(
      `chunk format ${f}: encode ${fmt(median(m.encode), 2)} µs, parse ${fmt(median(m.decode), 2)} µs CPU per span ` +
        `(median of ${ROUNDS} rounds of ${spans} spans), ${fmt(m.chars, 0)} characters per span, load ${load}`,
    );
  }
  console.log(
    `ids as bytes (hex → base64 → hex, span and parent id): ${fmt(median(idCost), 2)} µs CPU per span, ` +
      `saves 8 characters of ${fmt(figures[2].chars, 0)}; load ${load}`,
  );
}
