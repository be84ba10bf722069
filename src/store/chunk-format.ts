/**
 * The text of a span chunk (`span_chunks.spans`) and the format it is written in
 * (`span_chunks.format`, migration 17). See docs/architecture.md "Span chunk formats".
 *
 * Format 1: a JSON array of span objects as the span model has them, each naming its resource by
 * `resourceRef` (chunks from before migration 11 hold the resource itself), and detached events
 * as `{"eventsOf": <span id>, "events": […]}` entries.
 *
 * Format 2: one JSON object per chunk,
 * `{"r": [resource ids], "c": [[scope name, version]], "s": [spans], "d": [detached]}`: the
 * chunk's distinct resources and scopes once, each span a positional array naming them by index,
 * without its trace id (the row's), events and links as positional arrays too, so no key is
 * repeated per span. Both hold bytes as {"$bytes": base64}.
 */
import {
  type Attributes,
  type AttributeValue,
  type DetachedEvents,
  holdsBytes,
  type InstrumentationScope,
  type Span,
  type SpanEvent,
  type SpanLink,
  type StatusCode,
} from '../core/index.js';
import { StoreErrors } from './error-codes.js';
import type { SpanBatch } from './ports.js';

/** The format this build writes; it reads 1 and 2. */
export const CHUNK_FORMAT = 2;

/** JSON with bytes kept: Uint8Array ↔ {"$bytes": base64}. The replacer is slow: only when asked. */
export function toJson(value: unknown, bytes: boolean): string {
  if (!bytes) return JSON.stringify(value);
  return JSON.stringify(value, (_key, v: unknown) =>
    v instanceof Uint8Array ? { $bytes: Buffer.from(v).toString('base64') } : v,
  );
}

/** What `toJson` wrote, bytes restored. */
export function fromJson<T>(text: string): T {
  // The reviver makes JSON.parse several times slower; only text that held bytes needs it.
  if (!text.includes('"$bytes"')) return JSON.parse(text) as T;
  return JSON.parse(text, (_key, value: unknown) => {
    if (typeof value === 'object' && value !== null && '$bytes' in value) {
      const b = (value as { $bytes: unknown }).$bytes;
      if (typeof b === 'string') return new Uint8Array(Buffer.from(b, 'base64')) as AttributeValue;
    }
    return value;
  }) as T;
}

/** Whether a span holds bytes outside its resource (resources are encoded on their own). */
function spanHasBytes(span: Span): boolean {
  return (
    holdsBytes(span.attributes) ||
    span.events.some((e) => holdsBytes(e.attributes)) ||
    span.links.some((l) => holdsBytes(l.attributes))
  );
}

function batchHasBytes(batch: SpanBatch): boolean {
  return (
    batch.spans.some(spanHasBytes) ||
    (batch.detachedEvents ?? []).some((d) => d.events.some((e) => holdsBytes(e.attributes)))
  );
}

/**
 * Where a format-1 entry holds detached events instead of a span: the key names the span they
 * belong to. No span has it, so a chunk stays one JSON array of entries.
 */
const DETACHED = 'eventsOf';

interface StoredDetached {
  [DETACHED]: string;
  events: SpanEvent[];
}

/**
 * Where a format-1 span names its resource (a `span_resources` id) instead of holding it. Chunks
 * written before migration 11 hold `resource` itself, and read as they did.
 */
const RESOURCE_REF = 'resourceRef';

type StoredSpan = Omit<Span, 'resource'> & { resource?: Attributes; [RESOURCE_REF]?: string };

/** Names a resource: its `span_resources` id (the row is stored by the caller). */
export type ResourceRef = (resource: Attributes) => string;

/** A batch's chunk in format 1 (what builds before migration 17 wrote). */
export function encodeChunkV1(batch: SpanBatch, refOf: ResourceRef): string {
  const entries: (StoredSpan | StoredDetached)[] = batch.spans.map((span) => ({
    ...span,
    // Left out by JSON.stringify: the chunk holds the reference only.
    resource: undefined,
    [RESOURCE_REF]: refOf(span.resource),
  }));
  for (const d of batch.detachedEvents ?? []) {
    entries.push({ [DETACHED]: d.spanId, events: d.events });
  }
  return toJson(entries, batchHasBytes(batch));
}

/** [name, timeUnixNano, attributes, droppedAttributesCount?] */
type EventRow = [string, string, Attributes, number?];
/** [traceId, spanId, attributes, droppedAttributesCount?] */
type LinkRow = [string, string, Attributes, number?];
/**
 * [spanId, parentSpanId, name, kind, start, end, attributes, events, links, status code,
 * status message, resource index, scope index, droppedAttributesCount, droppedEventsCount,
 * droppedLinksCount]; the three counts are null when absent, and left out when all are.
 */
type SpanRow = [
  string,
  string,
  string,
  number,
  string,
  string,
  Attributes,
  EventRow[],
  LinkRow[],
  StatusCode,
  string,
  number,
  number,
  (number | null)?,
  (number | null)?,
  (number | null)?,
];

interface ChunkV2 {
  /** Resource ids (`span_resources`). */
  r: string[];
  /** Scopes: [name, version]. */
  c: [string, string][];
  s: SpanRow[];
  /** Detached events: [span id, events]. */
  d?: [string, EventRow[]][];
}

function eventRow(e: SpanEvent): EventRow {
  return e.droppedAttributesCount === undefined
    ? [e.name, e.timeUnixNano, e.attributes]
    : [e.name, e.timeUnixNano, e.attributes, e.droppedAttributesCount];
}

function linkRow(l: SpanLink): LinkRow {
  return l.droppedAttributesCount === undefined
    ? [l.traceId, l.spanId, l.attributes]
    : [l.traceId, l.spanId, l.attributes, l.droppedAttributesCount];
}

const NO_EVENTS: EventRow[] = [];
const NO_LINKS: LinkRow[] = [];

/**
 * A batch's chunk in format 2, or undefined when a span's trace id is not the batch's (format 2
 * takes every span's from the row; format 1 keeps each its own).
 */
export function encodeChunkV2(batch: SpanBatch, refOf: ResourceRef): string | undefined {
  const refs: string[] = [];
  const byResource = new Map<Attributes, number>();
  const refIndex = new Map<string, number>();
  const scopes: [string, string][] = [];
  const scopeIndex = new Map<string, number>();
  const rows: SpanRow[] = new Array(batch.spans.length);
  for (let i = 0; i < batch.spans.length; i++) {
    const span = batch.spans[i]!;
    if (span.traceId !== batch.traceId) return undefined;
    let r = byResource.get(span.resource);
    if (r === undefined) {
      const ref = refOf(span.resource);
      r = refIndex.get(ref);
      if (r === undefined) {
        r = refs.push(ref) - 1;
        refIndex.set(ref, r);
      }
      byResource.set(span.resource, r);
    }
    const scopeKey = `${span.scope.name}\u0000${span.scope.version}`;
    let c = scopeIndex.get(scopeKey);
    if (c === undefined) {
      c = scopes.push([span.scope.name, span.scope.version]) - 1;
      scopeIndex.set(scopeKey, c);
    }
    const row: SpanRow = [
      span.spanId,
      span.parentSpanId,
      span.name,
      span.kind,
      span.startTimeUnixNano,
      span.endTimeUnixNano,
      span.attributes,
      span.events.length === 0 ? NO_EVENTS : span.events.map(eventRow),
      span.links.length === 0 ? NO_LINKS : span.links.map(linkRow),
      span.status.code,
      span.status.message,
      r,
      c,
    ];
    const { droppedAttributesCount: da, droppedEventsCount: de, droppedLinksCount: dl } = span;
    if (da !== undefined || de !== undefined || dl !== undefined) {
      row.push(da ?? null, de ?? null, dl ?? null);
    }
    rows[i] = row;
  }
  const chunk: ChunkV2 = { r: refs, c: scopes, s: rows };
  const detached = batch.detachedEvents ?? [];
  if (detached.length > 0) chunk.d = detached.map((d) => [d.spanId, d.events.map(eventRow)]);
  return toJson(chunk, batchHasBytes(batch));
}

/** A batch's chunk: its format and text (format 2 whenever it can hold the batch). */
export function encodeChunk(
  batch: SpanBatch,
  refOf: ResourceRef,
): { format: number; text: string } {
  const text = encodeChunkV2(batch, refOf);
  return text === undefined
    ? { format: 1, text: encodeChunkV1(batch, refOf) }
    : { format: CHUNK_FORMAT, text };
}

/** What a chunk holds, read. */
export interface DecodedChunk {
  /**
   * Its spans in order; each `resource` is to be set by the caller from `refs` (a placeholder
   * until then) unless `refs[i]` is undefined (a chunk from before migration 11 held it).
   */
  spans: Span[];
  refs: (string | undefined)[];
  detached: DetachedEvents[];
}

/** A placeholder resource until the caller sets the one the span names. */
const UNSET: Attributes = Object.freeze({}) as Attributes;

function eventOf(e: EventRow): SpanEvent {
  const event: SpanEvent = { name: e[0], timeUnixNano: e[1], attributes: e[2] };
  if (e[3] !== undefined) event.droppedAttributesCount = e[3];
  return event;
}

function linkOf(l: LinkRow): SpanLink {
  const link: SpanLink = { traceId: l[0], spanId: l[1], attributes: l[2] };
  if (l[3] !== undefined) link.droppedAttributesCount = l[3];
  return link;
}

function decodeV2(text: string, traceId: string): DecodedChunk {
  const chunk = fromJson<ChunkV2>(text);
  const scopes: InstrumentationScope[] = chunk.c.map(([name, version]) => ({ name, version }));
  const spans: Span[] = new Array(chunk.s.length);
  const refs: (string | undefined)[] = new Array(chunk.s.length);
  for (let i = 0; i < chunk.s.length; i++) {
    const s = chunk.s[i]!;
    // Keys in the order format-1 chunks read in, so a span reads the same from either.
    const span: Span = {
      traceId,
      spanId: s[0],
      parentSpanId: s[1],
      name: s[2],
      kind: s[3],
      startTimeUnixNano: s[4],
      endTimeUnixNano: s[5],
      attributes: s[6],
      events: s[7].length === 0 ? [] : s[7].map(eventOf),
      links: s[8].length === 0 ? [] : s[8].map(linkOf),
      status: { code: s[9], message: s[10] },
      scope: scopes[s[12]]!,
      resource: UNSET,
    };
    if (s.length > 13) {
      // Set before `resource` is re-set by the caller, as format 1 orders them.
      const { resource: _r, ...rest } = span;
      const withCounts: Span = rest as Span;
      if (s[13] != null) withCounts.droppedAttributesCount = s[13];
      if (s[14] != null) withCounts.droppedEventsCount = s[14];
      if (s[15] != null) withCounts.droppedLinksCount = s[15];
      withCounts.resource = UNSET;
      spans[i] = withCounts;
    } else spans[i] = span;
    refs[i] = chunk.r[s[11]];
  }
  const detached = (chunk.d ?? []).map(([spanId, events]) => ({
    spanId,
    events: events.map(eventOf),
  }));
  return { spans, refs, detached };
}

function decodeV1(text: string): DecodedChunk {
  const spans: Span[] = [];
  const refs: (string | undefined)[] = [];
  const detached: DetachedEvents[] = [];
  for (const entry of fromJson<(StoredSpan | StoredDetached)[]>(text)) {
    if (DETACHED in entry) {
      detached.push({ spanId: entry[DETACHED], events: entry.events });
      continue;
    }
    const ref = entry[RESOURCE_REF];
    if (ref === undefined) {
      spans.push(entry as Span);
      refs.push(undefined);
      continue;
    }
    const { [RESOURCE_REF]: _ref, ...span } = entry;
    span.resource = UNSET;
    spans.push(span as Span);
    refs.push(ref);
  }
  return { spans, refs, detached };
}

/**
 * A stored chunk read: `format` as its row gives it, `traceId` its row's. A format this build
 * does not know (written by a newer one) is refused, never guessed at.
 */
export function decodeChunk(format: number, text: string, traceId: string): DecodedChunk {
  if (format === 2) return decodeV2(text, traceId);
  if (format === 1) return decodeV1(text);
  throw StoreErrors.STORE_SCHEMA_TOO_NEW(
    `span chunk format ${format} of trace ${traceId} was written by a newer Touchstone; this build reads formats 1 to ${CHUNK_FORMAT}`,
  );
}
