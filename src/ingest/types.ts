import type { Span, SpanEvent } from '../core/index.js';
import type { RejectedSpan } from './otlp/rejections.js';

/** What an OTLP decoder hands the pipeline: valid spans, and what it refused (partial success). */
export interface DecodedSpans {
  spans: Span[];
  /** Spans refused one by one (zero or malformed ids); the rest of the request is kept. */
  rejected: number;
  /** Distinct reasons, for the OTLP partial-success message; never span content. */
  rejectReasons: string[];
  /** The refused spans one by one (position and ids, at most 1000); absent when none was. */
  rejectedSpans?: RejectedSpan[];
}

/** A GenAI event that arrived as an OTLP log record, as the span event it describes. */
export interface LogEvent {
  traceId: string;
  spanId: string;
  event: SpanEvent;
}

/** What an OTLP logs decoder hands the pipeline (docs/ingest.md, "The endpoint: POST /v1/logs"). */
export interface DecodedLogs {
  /** GenAI events (`gen_ai.*` event names) with valid trace and span ids, in request order. */
  events: LogEvent[];
  /** GenAI events refused one by one: without a valid trace or span id they join no span. */
  rejected: number;
  /** Distinct reasons, for the OTLP partial-success message; never log content. */
  rejectReasons: string[];
  /** Valid log records that are not GenAI events: accepted, not stored. */
  ignored: number;
}

export interface DecodeOptions {
  /** Longest string attribute value kept (UTF-8 bytes); longer ones are cut with a marker. */
  maxAttributeBytes: number;
  /**
   * Count limits (`traces.limits`) applied while decoding, so that what is over them is never
   * built (it is skipped and counted in the span's dropped counts). Absent: none here; the
   * pipeline applies them all the same, after decoding.
   */
  limits?: SpanCountLimits;
}

/** The count limits of `SpanLimits`, which the decoders apply. */
export interface SpanCountLimits {
  maxAttributesPerSpan: number;
  maxEventsPerSpan: number;
  maxLinksPerSpan: number;
  maxAttributesPerEvent: number;
  maxAttributesPerLink: number;
}

export type { NormalizedTrace, TraceSummary } from '../core/index.js';
export type { RejectedSpan } from './otlp/rejections.js';
