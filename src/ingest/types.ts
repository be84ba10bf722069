import type { Span } from '../core/index.js';

/** What an OTLP decoder hands the pipeline: valid spans, and what it refused (partial success). */
export interface DecodedSpans {
  spans: Span[];
  /** Spans refused one by one (zero or malformed ids); the rest of the request is kept. */
  rejected: number;
  /** Distinct reasons, for the OTLP partial-success message; never span content. */
  rejectReasons: string[];
}

export interface DecodeOptions {
  /** Longest string attribute value kept (UTF-8 bytes); longer ones are cut with a marker. */
  maxAttributeBytes: number;
}

export type { NormalizedTrace, TraceSummary } from '../core/index.js';
