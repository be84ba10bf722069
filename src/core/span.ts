/**
 * The span model every ingest door produces (OTLP protobuf and JSON, the SDK, pulled traces) and
 * normalization reads. Close to OTLP, flattened: each span carries its resource and scope.
 */

/**
 * An attribute value. OTLP int64 values are numbers when they fit in 2^53, else decimal strings;
 * bytes stay bytes (dropped by redaction); kvlists become plain objects.
 */
export type AttributeValue =
  | string
  | number
  | boolean
  | Uint8Array
  | AttributeValue[]
  | { [key: string]: AttributeValue };

export type Attributes = Record<string, AttributeValue>;

export const SPAN_KINDS = [
  'unspecified',
  'internal',
  'server',
  'client',
  'producer',
  'consumer',
] as const;

/** OTLP status codes: 0 unset, 1 ok, 2 error. */
export type StatusCode = 0 | 1 | 2;

export interface SpanEvent {
  name: string;
  timeUnixNano: string;
  attributes: Attributes;
  /** Attributes left out, by the sender or by the ingest limits; absent when none. */
  droppedAttributesCount?: number;
}

/**
 * Events of one span that reached Touchstone apart from it: OpenTelemetry GenAI events sent as
 * OTLP log records. They are stored with the trace and added to the span's events when the trace
 * is read, whichever of the two arrived first.
 */
export interface DetachedEvents {
  spanId: string;
  events: SpanEvent[];
}

export interface SpanLink {
  traceId: string;
  spanId: string;
  attributes: Attributes;
  /** Attributes left out, by the sender or by the ingest limits; absent when none. */
  droppedAttributesCount?: number;
}

export interface InstrumentationScope {
  name: string;
  version: string;
}

export interface Span {
  /** 32 lowercase hex characters, never all zeros. */
  traceId: string;
  /** 16 lowercase hex characters, never all zeros. */
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** Index into SPAN_KINDS. */
  kind: number;
  /** Unix nanoseconds as a decimal string (exact; numbers would lose precision). */
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Attributes;
  events: SpanEvent[];
  links: SpanLink[];
  status: { code: StatusCode; message: string };
  /** Resource attributes, shared by the spans of one resource. */
  resource: Attributes;
  scope: InstrumentationScope;
  /**
   * Attributes, events and links left out, by the sender (OTLP's `dropped_*_count`) plus those the
   * ingest limits dropped (`traces.limits`); each absent when none.
   */
  droppedAttributesCount?: number;
  droppedEventsCount?: number;
  droppedLinksCount?: number;
}

/** Nanosecond string → milliseconds since the epoch (sub-microsecond precision is dropped). */
export function nanosToMs(nanos: string): number {
  if (nanos.length <= 6) return Number(nanos) / 1e6;
  return Number(nanos.slice(0, -6)) + Number(nanos.slice(-6)) / 1e6;
}

/** Nanosecond string → RFC 3339 with milliseconds. */
export function nanosToIso(nanos: string): string {
  return new Date(Math.floor(nanosToMs(nanos))).toISOString();
}

export const ZERO_TRACE_ID = '0'.repeat(32);
export const ZERO_SPAN_ID = '0'.repeat(16);

/** The service name of a span (resource `service.name`), '' when absent. */
export function serviceName(span: Span): string {
  const v = span.resource['service.name'];
  return typeof v === 'string' ? v : '';
}

/** Whether an attribute value (or anything nested in it) holds bytes, which JSON cannot. */
export function holdsBytes(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (value instanceof Uint8Array) return true;
  // for-in allocates no array of values (span attributes have no inherited enumerable keys).
  for (const key in value) if (holdsBytes((value as Record<string, unknown>)[key])) return true;
  return false;
}

/**
 * The spans with detached events added to the span they name (a copy of each span that gets
 * some). An event sent twice (an exporter's retry) is added once; events whose span is not among
 * `spans` are left out (their span may arrive later). A span keeps at most `maxEvents` events (its
 * own first, `traces.limits.max_events_per_span`): the detached ones past it are counted in its
 * `droppedEventsCount`, as the ingest limits count span events past it.
 */
export function attachDetachedEvents(
  spans: readonly Span[],
  detached: readonly DetachedEvents[],
  maxEvents = Number.POSITIVE_INFINITY,
): Span[] {
  const bySpan = new Map<string, SpanEvent[]>();
  for (const d of detached) {
    const list = bySpan.get(d.spanId);
    if (list === undefined) bySpan.set(d.spanId, [...d.events]);
    else list.push(...d.events);
  }
  return spans.map((span) => {
    const events = bySpan.get(span.spanId);
    if (events === undefined) return span;
    const seen = new Set(span.events.map((e) => JSON.stringify(e)));
    const added = events.filter((e) => {
      const key = JSON.stringify(e);
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
    if (added.length === 0) return span;
    const room = Math.max(0, maxEvents - span.events.length);
    if (added.length <= room) return { ...span, events: [...span.events, ...added] };
    return {
      ...span,
      events: [...span.events, ...added.slice(0, room)],
      droppedEventsCount: (span.droppedEventsCount ?? 0) + added.length - room,
    };
  });
}
