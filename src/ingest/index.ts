/**
 * @module ingest
 * Trace ingest: OTLP decoding (otlp/), conventions → Record (conventions/), the pipeline that
 * redacts and durably stores spans before acknowledging, the completer that turns open traces
 * into Records from database state, and trace queries. Imports core, auth, store ports and
 * redaction types only; never api/.
 */
import type { NormalizedTrace, Span } from '../core/index.js';
import type { PendingTrace } from '../store/index.js';
import { normalizeTrace } from './conventions/index.js';

export { IngestErrors } from './error-codes.js';
export { decodeOtlpJson, decodeOtlpProtobuf, OtlpErrors } from './otlp/index.js';
export {
  type CompleterDeps,
  type IngestDeps,
  type IngestObserver,
  type IngestResult,
  IngestService,
  type IngestTarget,
  recordDigest,
  type SpanRedactor,
  TraceCompleter,
  type TraceNormalizer,
} from './pipeline.js';
export { TraceQueries } from './queries.js';
export { traceSummaryView } from './summary.js';
export type { DecodedSpans, DecodeOptions } from './types.js';
export { normalizeTrace };

/**
 * Normalizes a stored trace and applies the labels of its ingest door (API key, source), which
 * win over `touchstone.label.*` attributes of the same key.
 */
export function normalizeStoredTrace(spans: Span[], pending: PendingTrace): NormalizedTrace {
  const normalized = normalizeTrace(spans, { project: pending.project });
  const labels = { ...normalized.summary.labels, ...pending.labels };
  return {
    record: { ...normalized.record, labels },
    summary: { ...normalized.summary, labels },
  };
}
