import { defineErrors } from '../../../core/index.js';

/**
 * Errors of the Phoenix connector. Messages name the host, the operation and the status (and, for
 * a refused request, the request field Phoenix's validation named), never a path, query, API key,
 * trace content or Phoenix's own message text (which quotes trace ids and project names).
 */
export const PhoenixErrors = defineErrors({
  PHOENIX_UNAVAILABLE: {
    kind: 'unavailable',
    retryable: true,
    doc: 'The Phoenix server answered with a server error (5xx other than 501 and 505) or timed out; the source backs off and retries, after `Retry-After` when Phoenix sent one.',
  },
  PHOENIX_RATE_LIMITED: {
    kind: 'resource_exhausted',
    retryable: true,
    doc: 'The Phoenix server (or a proxy in front of it) answered 429; the source waits for `Retry-After` and retries.',
  },
  PHOENIX_ACCESS_DENIED: {
    kind: 'permission_denied',
    doc: "The Phoenix server refused the source's API key (401 or 403); create a system API key (or a user key) in Phoenix's settings that may read the project (and write annotations for write-back) and grant it to the source.",
  },
  PHOENIX_BAD_RESPONSE: {
    kind: 'failed_precondition',
    doc: 'The endpoint answered something that is not Phoenix JSON (an HTML page, invalid JSON, an unexpected shape); check that the endpoint is the Phoenix server base URL and not a login page or proxy.',
  },
  PHOENIX_REQUEST_REFUSED: {
    kind: 'failed_precondition',
    doc: "The Phoenix server refused a request (4xx, 422 naming the request field, or 501 or 505: the server will never do it); check the server's version (20.20 or newer is verified) and the source's settings.",
  },
  PHOENIX_PROJECT_NOT_FOUND: {
    kind: 'not_found',
    doc: 'The source location names no Phoenix project (by name or project id); fix `spec.locations` (one project per source).',
  },
  PHOENIX_TRACE_API_MISSING: {
    kind: 'unimplemented',
    doc: 'The Phoenix server has no trace list (`GET /v1/projects/{project}/traces`, Phoenix 13.15 and newer); upgrade Phoenix.',
  },
});
