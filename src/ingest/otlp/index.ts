/**
 * OTLP trace decoding: binary protobuf and OTLP/JSON `ExportTraceServiceRequest` bodies → `Span[]`
 * with per-span refusals (partial success). Pure functions over an already decompressed, size-capped
 * body; no I/O. Imports only core and ingest types.
 */

export { OtlpErrors } from './error-codes.js';
export { decodeOtlpJson } from './json.js';
export { decodeOtlpProtobuf } from './protobuf.js';
export { truncationMarker } from './truncate.js';
