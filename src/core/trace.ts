import type { EvalRecord } from './record.js';
import type { Attributes } from './span.js';

/** The summary of a trace: list views, filters, selectors, webhook payloads. */
export interface TraceSummary {
  traceId: string;
  /** Resource `service.name` of the root span (or of the first span). */
  service: string;
  /** Name of the root span (or of the first span). */
  name: string;
  /** RFC 3339. */
  startTime: string;
  /** Milliseconds from the first start to the last end. */
  durationMs: number;
  /** Number of steps in the trajectory. */
  steps: number;
  /** True when any span has status ERROR or an exception event. */
  error: boolean;
  /** From `touchstone.label.<key>` attributes, the ingest key's labels and the source. */
  labels: Record<string, string>;
}

/**
 * What policy selectors read beyond the summary and the record: the root span's attributes and
 * its resource (bytes as base64 text, so the value survives JSON).
 */
export interface TraceRoot {
  attributes: Attributes;
  resource: Attributes;
}

/** A trace read into the Record every evaluator sees, plus its summary. */
export interface NormalizedTrace {
  record: EvalRecord;
  summary: TraceSummary;
  /** Absent for traces normalized without their root (tests, direct records). */
  root?: TraceRoot;
}
