import { defineErrors } from '../../core/index.js';

/** Errors of the OTLP decoders. Messages name a byte offset, JSON position or field path, never content. */
export const OtlpErrors = defineErrors({
  OTLP_DECODE_FAILED: {
    kind: 'invalid_argument',
    doc: 'The OTLP request body is not a decodable ExportTraceServiceRequest or ExportLogsServiceRequest (truncated or corrupt protobuf, malformed OTLP/JSON, or values nested too deeply); the message names the byte offset or field path. Fix the exporter; retrying the same body cannot help.',
  },
});
