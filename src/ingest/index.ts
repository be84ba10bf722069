/**
 * @module ingest
 * Trace ingest: OTLP decoding (otlp/), conventions → Record (conventions/), the pipeline that
 * redacts and durably stores spans before acknowledging, the completer that turns open traces
 * into Records from database state, and trace queries. Imports core, auth, store ports and
 * redaction types only; never api/.
 */
export { CompleterThread } from './completer-thread.js';
export { normalizeTrace } from './conventions/index.js';
export { IngestErrors } from './error-codes.js';
export { limitSpans, type SpanLimits, spanLimitsFromConfig } from './limits.js';
export { normalizeStoredTrace } from './normalize-stored.js';
export {
  decodeOtlpJson,
  decodeOtlpJsonInSlices,
  decodeOtlpLogsJson,
  decodeOtlpLogsProtobuf,
  decodeOtlpProtobuf,
  decodeOtlpProtobufInSlices,
  OtlpErrors,
} from './otlp/index.js';
export {
  type CompleterDeps,
  type IngestDeps,
  type IngestObserver,
  type IngestResult,
  IngestService,
  type IngestTarget,
  type LogIngestResult,
  nextTurn,
  type PulledTrace,
  PulledTraceWriter,
  type SpanRedactor,
  TraceCompleter,
  type TraceNormalizer,
} from './pipeline.js';
export {
  type PrepareRequest,
  PrepareThreads,
  receiveOtlpTraces,
  type WriteTurn,
} from './prepare-thread.js';
export { TraceQueries, type TrajectoryPage } from './queries.js';
export { traceSummaryView } from './summary.js';
export type {
  DecodedLogs,
  DecodedSpans,
  DecodeOptions,
  LogEvent,
  RejectedSpan,
} from './types.js';
