import { defineErrors } from '../core/index.js';

export const ApiErrors = defineErrors({
  BODY_INVALID: {
    kind: 'invalid_argument',
    doc: 'The request body is not valid JSON or does not fit the schema; the message gives the position or `details` the fields.',
  },
  BODY_TOO_LARGE: {
    kind: 'payload_too_large',
    doc: 'The request body exceeds `limits.max_body_bytes`; split the request.',
  },
  UNSUPPORTED_MEDIA_TYPE: {
    kind: 'unsupported_media_type',
    doc: 'The Content-Type is not one the endpoint accepts.',
  },
  OVERLOADED: {
    kind: 'unavailable',
    retryable: true,
    doc: 'Load shed: the server is at `limits.max_inflight_write_requests` or `limits.max_inflight_write_bytes`, or an OTLP request would wait (or waited) over 3 s for its turn to be stored; retry after `Retry-After`.',
  },
  ROUTE_NOT_FOUND: { kind: 'not_found', doc: 'No endpoint at that method and path.' },
  UI_NOT_BUILT: {
    kind: 'unavailable',
    doc: 'The web UI has not been built in this installation (`npm run build` in a checkout writes `dist/ui`; the published package ships it), or `ui.assets_dir` names a directory without `index.html`.',
  },
  INTERNAL_ERROR: {
    kind: 'internal',
    doc: 'An unexpected failure; nothing about it is shown, the server log has it under the request id.',
  },
});
