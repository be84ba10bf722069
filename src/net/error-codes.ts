import { defineErrors } from '../core/index.js';

/** Errors of the outbound HTTP client. Messages name the method and host only, never a path,
 * query, header or body, because those may carry credentials or user content. */
export const NetErrors = defineErrors({
  OUTBOUND_INVALID_URL: {
    kind: 'invalid_argument',
    doc: 'An outbound URL is malformed or uses a scheme other than http or https; fix the configured URL.',
  },
  OUTBOUND_INVALID_REQUEST: {
    kind: 'invalid_argument',
    doc: 'An outbound request could not be built (for example a header value with control characters); fix the configured value.',
  },
  OUTBOUND_TARGET_REFUSED: {
    kind: 'permission_denied',
    doc: 'Outbound network rules refused the destination (for example a private address); allow the host or use another URL.',
  },
  OUTBOUND_TIMEOUT: {
    kind: 'deadline_exceeded',
    retryable: true,
    doc: 'A remote server did not connect or answer in time; retry later or raise the timeout.',
  },
  OUTBOUND_UNAVAILABLE: {
    kind: 'unavailable',
    retryable: true,
    doc: 'A remote server could not be reached or dropped the connection; retry later.',
  },
  OUTBOUND_TLS_FAILED: {
    kind: 'failed_precondition',
    doc: "A remote server's TLS certificate could not be verified; fix the server's certificate or the URL.",
  },
  OUTBOUND_TOO_MANY_REDIRECTS: {
    kind: 'failed_precondition',
    doc: 'A remote server redirected more times than the caller follows (often a redirect loop); point the configured URL at the final location.',
  },
  OUTBOUND_RESPONSE_TOO_LARGE: {
    kind: 'resource_exhausted',
    doc: 'A remote server answered with a body larger than the configured cap; the response was discarded.',
  },
});

/** Errors of credential references and grants. Messages name the variable or the secret/key and
 * the project and host, never the value. */
export const CredentialErrors = defineErrors({
  CREDENTIAL_INVALID_REF: {
    kind: 'invalid_argument',
    doc: 'A credential reference is malformed: `env` must be a variable name and `file` must be `<secret>/<key>` (no `.`, `..` or further slashes).',
  },
  CREDENTIAL_NOT_GRANTED: {
    kind: 'permission_denied',
    doc: 'The credential is not granted to the project, or not for the endpoint host; add an entry to `credentials.grants` in the server config (file credentials as `env: "file:<secret>/<key>"`).',
  },
  CREDENTIAL_UNREADABLE: {
    kind: 'failed_precondition',
    doc: 'The credential named by a reference has no value: the environment variable is unset or blank, or the file under `sources.dir` is missing, empty, too large or unreadable.',
  },
});
