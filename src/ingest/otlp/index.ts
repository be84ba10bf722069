/**
 * OTLP decoding: binary protobuf and OTLP/JSON `ExportTraceServiceRequest` bodies → `Span[]`
 * with per-span refusals (partial success), and `ExportLogsServiceRequest` bodies → the GenAI
 * events they carry. Pure functions over an already decompressed, size-capped
 * body; no I/O. Imports only core and ingest types.
 */

export { OtlpErrors } from './error-codes.js';
export { decodeOtlpJson, decodeOtlpJsonInSlices } from './json.js';
export { decodeOtlpLogsJson } from './logs-json.js';
export { decodeOtlpLogsProtobuf } from './logs-protobuf.js';
export { decodeOtlpProtobuf, decodeOtlpProtobufInSlices } from './protobuf.js';
export { truncationMarker } from './truncate.js';
