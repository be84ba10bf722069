import { defineErrors } from '../core/index.js';

export const IngestErrors = defineErrors({
  TRACE_NOT_FOUND: {
    kind: 'not_found',
    doc: 'No completed trace with that id in the project, or the caller’s grant does not cover it.',
  },
  OTLP_UNSUPPORTED_ENCODING: {
    kind: 'unsupported_media_type',
    doc: 'The OTLP body uses a Content-Encoding other than gzip, deflate or identity.',
  },
});
