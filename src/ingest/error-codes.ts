import { defineErrors } from '../core/index.js';

export const IngestErrors = defineErrors({
  TRACE_NOT_FOUND: {
    kind: 'not_found',
    doc: 'No completed trace with that id in the project, or the caller’s grant does not cover it.',
  },
  TRACE_CHANGED: {
    kind: 'aborted',
    doc: 'The trace changed (late spans completed it again) while its trajectory was read page by page; read it again from the first page.',
  },
  INGEST_WORKER_STOPPED: {
    kind: 'unavailable',
    retryable: true,
    doc: 'The worker thread preparing an OTLP request (decoding, redaction, normalization) stopped before the request was stored, as when it runs out of memory; nothing of the request was kept. Send it again; the worker is started again.',
  },
  OTLP_UNSUPPORTED_ENCODING: {
    kind: 'unsupported_media_type',
    doc: 'The OTLP body uses a Content-Encoding other than gzip, deflate or identity.',
  },
});
