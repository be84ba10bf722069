import type { Span } from '../core/index.js';
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
