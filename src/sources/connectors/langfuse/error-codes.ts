import { defineErrors } from '../../../core/index.js';

/**
 * Errors of the Langfuse connector. Messages name the host, the operation, the HTTP status and
 * Langfuse's machine-readable `code` when it sent one (`rate_limited`), never a query, a key,
 * trace content or Langfuse's own message text (which can quote filter values).
 */
export const LangfuseErrors = defineErrors({
  LANGFUSE_UNAVAILABLE: {
    kind: 'unavailable',
    retryable: true,
    doc: 'The Langfuse server answered with a server error (5xx other than 501 and 505), a query timeout (422) or did not answer in time; the source backs off and retries, after `Retry-After` when Langfuse sent one.',
  },
  LANGFUSE_RATE_LIMITED: {
    kind: 'resource_exhausted',
    retryable: true,
    doc: "Langfuse's public API rate limit was reached (429); the source waits for `Retry-After` and retries. Lower `poll.maxRecordsPerSecond` or ask for a higher limit.",
  },
  LANGFUSE_ACCESS_DENIED: {
    kind: 'permission_denied',
    doc: "Langfuse refused the source's API keys (401 or 403), or the credential is missing or not written `<public key>:<secret key>`; create a project API key pair in Langfuse and store it as one value `pk-lf-…:sk-lf-…`.",
  },
  LANGFUSE_BAD_RESPONSE: {
    kind: 'failed_precondition',
    doc: 'The endpoint answered something that is not Langfuse JSON (an HTML page, invalid JSON, an unexpected shape, a redirect); check that the endpoint is the Langfuse base URL (`https://cloud.langfuse.com`, or your host) and not a login page or proxy.',
  },
  LANGFUSE_REQUEST_REFUSED: {
    kind: 'failed_precondition',
    doc: "Langfuse refused a request (a 4xx other than 401, 403, 404 and 429, or 501 or 505: the server will never do it), or a score cannot be written (a non-finite number); check the server's version and the source's settings.",
  },
  LANGFUSE_OBSERVATIONS_API_MISSING: {
    kind: 'unimplemented',
    doc: 'The Langfuse server does not serve `GET /api/public/v2/observations` (404): upgrade to Langfuse v4, or run v3 (3.179 or later) with `LANGFUSE_MIGRATION_V4_ALLOW_PREVIEW_OPT_IN=true` and `LANGFUSE_MIGRATION_V4_WRITE_MODE=dual`; also check that the endpoint is the base URL.',
  },
});
