import { createHash } from 'node:crypto';
import {
  type Attributes,
  type EvalRecord,
  holdsBytes,
  nanosToMs,
  type TraceRoot,
} from '../core/index.js';
import { encodeChunk, toJson } from './chunk-format.js';
import type {
  EncodedAppend,
  EncodedChunk,
  EncodedTrace,
  EncodedWhole,
  SpanBatch,
  WholeTrace,
} from './ports.js';
import type { SpanResourcesTable } from './schema.js';
import { toMillis } from './times.js';

/** A stored root: its resource held, or named when larger than ROOT_RESOURCE_INLINE_MAX. */
export type StoredRoot = Omit<TraceRoot, 'resource'> & {
  resource?: Attributes;
  resourceRef?: string;
};

/**
 * Characters of resource JSON a trace's `root` column holds itself; a larger one is stored once
 * in `span_resources`. Typical resources (service, SDK, host, process) are a few hundred: they
 * stay inline and cost completion no extra statement.
 */
export const ROOT_RESOURCE_INLINE_MAX = 2048;

/** Spans per chunk at most: a larger batch is stored as several chunks of its trace. */
const SPANS_PER_CHUNK = 1000;

/**
 * Characters of chunk JSON encoded or written between two pauses of `appendSpans` (a few ms of
 * work), when it is given a pause.
 */
export const PAUSE_CHARS = 1 << 20;

/**
 * The resources of one call: each distinct resource object is encoded and hashed once however
 * many spans share it, and each (project, resource) becomes one row.
 */
class ResourceRows {
  private readonly encoded = new Map<Attributes, { id: string; text: string }>();
  readonly rows = new Map<string, SpanResourcesTable>();

  refOf(project: string, resource: Attributes): string {
    let known = this.encoded.get(resource);
    if (known === undefined) {
      const text = toJson(resource, holdsBytes(resource));
      known = { id: createHash('sha256').update(text).digest('hex'), text };
      this.encoded.set(resource, known);
    }
    const key = `${project}\u0000${known.id}`;
    if (!this.rows.has(key)) this.rows.set(key, { project, id: known.id, attributes: known.text });
    return known.id;
  }
}

/**
 * The `root` columns of one call's whole traces, as `complete` writes them: the traces of one
 * OTLP resource share its object, so it is measured, encoded and hashed once, and a large one
 * stored once, however many traces of the request name it.
 */
class RootColumns {
  private readonly inline = new Map<Attributes, boolean>();

  constructor(private readonly resources: ResourceRows) {}

  column(project: string, root: TraceRoot): string {
    let small = this.inline.get(root.resource);
    if (small === undefined) {
      small = JSON.stringify(root.resource).length <= ROOT_RESOURCE_INLINE_MAX;
      this.inline.set(root.resource, small);
    }
    if (small) return JSON.stringify(root);
    // Plain JSON: a root's bytes were made base64 text before it reached the store.
    const ref = this.resources.refOf(project, root.resource);
    return JSON.stringify({ attributes: root.attributes, resourceRef: ref } satisfies StoredRoot);
  }
}

/** A batch cut into parts of SPANS_PER_CHUNK spans; its detached events go with the first. */
function partsOf(batch: SpanBatch): SpanBatch[] {
  if (batch.spans.length <= SPANS_PER_CHUNK) return [batch];
  const parts: SpanBatch[] = [];
  for (let at = 0; at < batch.spans.length; at += SPANS_PER_CHUNK) {
    const spans = batch.spans.slice(at, at + SPANS_PER_CHUNK);
    const { detachedEvents: _detached, ...rest } = batch;
    parts.push(at === 0 ? { ...batch, spans } : { ...rest, spans });
  }
  return parts;
}

/** The earliest start of a batch: its spans', else its detached events'; null when neither has one. */
function batchStartMs(batch: SpanBatch): number | null {
  let start = Number.POSITIVE_INFINITY;
  for (const s of batch.spans) start = Math.min(start, nanosToMs(s.startTimeUnixNano));
  if (start === Number.POSITIVE_INFINITY) {
    for (const d of batch.detachedEvents ?? []) {
      for (const e of d.events) {
        const at = nanosToMs(e.timeUnixNano);
        if (at > 0) start = Math.min(start, at);
      }
    }
  }
  return start === Number.POSITIVE_INFINITY ? null : Math.floor(start);
}

/** A trace's key in the maps of one call or read: project NUL trace id. */
export function traceKey(project: string, traceId: string): string {
  return `${project}\u0000${traceId}`;
}

/** A trace of one call: its batches merged, and whether it arrived whole. */
interface CallTrace {
  batch: SpanBatch;
  rootEnded: boolean;
  whole: WholeTrace | undefined;
}

/**
 * One entry per trace of a call (by `traceKey`). Several batches of one trace are merged, and
 * their union, no longer known to be whole, is left to the completer.
 */
function tracesOf(spanBatches: readonly SpanBatch[]): Map<string, CallTrace> {
  const traces = new Map<string, CallTrace>();
  for (const b of spanBatches) {
    const key = traceKey(b.project, b.traceId);
    const rootEnded = b.spans.some((s) => s.parentSpanId === '');
    const prev = traces.get(key);
    if (prev === undefined) traces.set(key, { batch: b, rootEnded, whole: b.whole });
    else {
      prev.batch = { ...prev.batch, labels: { ...prev.batch.labels, ...b.labels } };
      prev.rootEnded ||= rootEnded;
      prev.whole = undefined;
    }
  }
  return traces;
}

/** The record's token counts and cost for the `usage` column (null when it has none). */
export function usageColumn(record: EvalRecord): string | null {
  const { latencyMs: _latency, ...usage } = record.usage ?? {};
  return Object.keys(usage).length === 0 ? null : JSON.stringify(usage);
}

/** What `complete` writes of a whole trace, as encoded columns. */
function wholeColumns(project: string, whole: WholeTrace, roots: RootColumns): EncodedWhole {
  const s = whole.trace.summary;
  return {
    // The summary's start, not the earliest span's: what `complete` stores.
    startMs: toMillis(s.startTime, 'startTime'),
    columns: [
      // PostgreSQL text cannot hold NUL; span data is JSON (escaped), these columns are not.
      s.service.replaceAll('\u0000', '\ufffd'),
      s.name.replaceAll('\u0000', '\ufffd'),
      s.durationMs,
      s.steps,
      s.error ? 1 : 0,
      JSON.stringify(s.labels),
      whole.digest,
      whole.recordJson ?? JSON.stringify(whole.trace.record),
      whole.trace.root === undefined ? null : roots.column(project, whole.trace.root),
      usageColumn(whole.trace.record),
    ],
  };
}

/**
 * Encodes a call's batches: each batch's spans as chunks (cut at SPANS_PER_CHUNK), its
 * resources once, and its trace's row. A whole trace's one chunk goes in its row, not a
 * `span_chunks` row of its own. With `pause`, awaited after about PAUSE_CHARS of chunk JSON.
 */
export async function encodeAppend(
  spanBatches: readonly SpanBatch[],
  pause?: () => Promise<void>,
): Promise<EncodedAppend> {
  const traces = tracesOf(spanBatches);
  const resources = new ResourceRows();
  const roots = new RootColumns(resources);
  const chunks: EncodedChunk[] = [];
  const inline = new Map<string, { text: string; format: number; key: string }>();
  const refOf = (project: string) => (resource: Attributes) => resources.refOf(project, resource);
  let sincePause = 0;
  for (let i = 0; i < spanBatches.length; i++) {
    const batch = spanBatches[i]!;
    const key = String(i).padStart(5, '0');
    const parts = partsOf(batch);
    const trace = traceKey(batch.project, batch.traceId);
    const inlined = parts.length === 1 && traces.get(trace)?.whole !== undefined;
    for (const [n, part] of parts.entries()) {
      const { format, text } = encodeChunk(part, refOf(part.project));
      if (inlined) inline.set(trace, { text, format, key });
      else {
        chunks.push({
          project: part.project,
          traceId: part.traceId,
          key: n === 0 ? key : `${key}-${String(n).padStart(4, '0')}`,
          text,
          format,
        });
      }
      sincePause += text.length;
      if (pause !== undefined && sincePause >= PAUSE_CHARS) {
        await pause();
        sincePause = 0;
      }
    }
  }
  const rows: EncodedTrace[] = [];
  for (const [key, { batch, rootEnded, whole }] of traces) {
    const row: EncodedTrace = {
      project: batch.project,
      traceId: batch.traceId,
      source: batch.source,
      labels: JSON.stringify(batch.labels),
      rootEnded,
      startMs: batchStartMs(batch),
    };
    if (whole !== undefined) {
      row.whole = wholeColumns(batch.project, whole, roots);
      const chunk = inline.get(key);
      if (chunk !== undefined) row.whole.chunk = chunk;
    }
    rows.push(row);
  }
  return { resources: [...resources.rows.values()], chunks, traces: rows };
}
