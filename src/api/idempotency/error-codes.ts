import { defineErrors } from '../../core/index.js';

export const IdempotencyErrors = defineErrors({
  IDEMPOTENCY_KEY_INVALID: {
    kind: 'invalid_argument',
    doc: 'The `Idempotency-Key` header is empty, longer than 255 characters, or holds characters other than printable ASCII.',
  },
  IDEMPOTENCY_KEY_REUSED: {
    kind: 'already_exists',
    doc: 'The `Idempotency-Key` was already used by this caller for this operation with a different request (method, path, query or body); use a new key for a new request.',
  },
  IDEMPOTENCY_REQUEST_IN_FLIGHT: {
    kind: 'aborted',
    retryable: true,
    doc: 'A request with the same `Idempotency-Key` is still running; retry after `Retry-After` to get its stored outcome.',
  },
  IDEMPOTENCY_OUTCOME_UNCERTAIN: {
    kind: 'unavailable',
    retryable: true,
    doc: 'Whether the keyed request took effect is unknown (the database failed after the write was sent, or the server running it stopped); check whether the operation happened, then retry with the same `Idempotency-Key`, never a new one.',
  },
  IDEMPOTENCY_SCOPE_FULL: {
    kind: 'resource_exhausted',
    retryable: true,
    doc: 'This caller already has 1024 keyed requests of this operation running at once, so none can be evicted; retry after `Retry-After`.',
  },
  IDEMPOTENCY_RESPONSE_TOO_LARGE: {
    kind: 'failed_precondition',
    doc: 'The response to a keyed request would exceed 64 MiB, the most that is stored for replay; send smaller requests (fewer records) or omit `Idempotency-Key`.',
  },
  IDEMPOTENCY_SECRET_NOT_REPLAYED: {
    kind: 'already_exists',
    doc: 'The keyed request already succeeded, and its response held a secret that is returned only once and never stored; use the secret from the first response, or revoke the resource the message names and create another with a new key.',
  },
  IDEMPOTENCY_STREAM_TOO_LARGE: {
    kind: 'payload_too_large',
    doc: 'A keyed write stream sent more than 64 MiB or more than 100001 messages; split the upload.',
  },
});
