import {
  CoreErrors,
  declaredErrors,
  type ErrorDetail,
  type ErrorKind,
  isTouchstoneError,
  TouchstoneError,
} from '../../core/index.js';
import { type IdempotencyOutcome, StoreErrors } from '../../store/index.js';
import { IdempotencyErrors } from './error-codes.js';

/** `status` of a stored TouchstoneError (a caller without HTTP statuses, e.g. RPC `execute`). */
export const ERROR_OUTCOME_STATUS = 0;

/**
 * Failures that are the request's own answer, not the server's trouble: stored and replayed like
 * successes. Anything retryable (429, 409 STORE_CONFLICT, 503) or internal releases the key, so
 * a retry runs the operation again.
 */
const STORED_ERROR_KINDS: ReadonlySet<ErrorKind> = new Set<ErrorKind>([
  'invalid_argument',
  'failed_precondition',
  'not_found',
  'already_exists',
  'aborted',
  'permission_denied',
  'unauthenticated',
  'payload_too_large',
  'unsupported_media_type',
]);

export function isStoredError(err: unknown): err is TouchstoneError {
  return isTouchstoneError(err) && !err.retryable && STORED_ERROR_KINDS.has(err.kind);
}

/** The database failed after the operation's write or COMMIT was sent. */
export function isOutcomeUnknown(err: unknown): boolean {
  return isTouchstoneError(err) && err.code === StoreErrors.STORE_OUTCOME_UNKNOWN.code;
}

const JSON_TYPE = 'application/json';

export function jsonOutcome(status: number, body: unknown): IdempotencyOutcome {
  return {
    status,
    headers: { 'content-type': JSON_TYPE },
    body: Buffer.from(JSON.stringify(body) ?? 'null'),
  };
}

export function errorOutcome(err: TouchstoneError): IdempotencyOutcome {
  return jsonOutcome(ERROR_OUTCOME_STATUS, {
    error: {
      code: err.code,
      message: err.message,
      ...(err.details.length > 0 ? { details: err.details } : {}),
    },
  });
}

/** The TouchstoneError an error outcome stored, built again from the catalogue. */
export function errorFromOutcome(outcome: IdempotencyOutcome): TouchstoneError {
  const stored = JSON.parse(Buffer.from(outcome.body).toString('utf8')) as {
    error: { code: string; message: string; details?: ErrorDetail[] };
  };
  const def = declaredErrors().find((d) => d.code === stored.error.code);
  const options = stored.error.details === undefined ? {} : { details: stored.error.details };
  // A code a newer build declared and this one does not know still answers, as a plain refusal.
  return def === undefined
    ? CoreErrors.FAILED_PRECONDITION(stored.error.message, options)
    : new TouchstoneError(def, stored.error.message, options);
}

/**
 * Removes `fields` (top-level members of a JSON object body) before the response is stored:
 * what is returned only once (a generated secret) must not rest in the database in the clear.
 * Returns the fields actually removed.
 */
export function withhold(
  body: Uint8Array,
  fields: readonly string[],
): { body: Uint8Array; withheld: string[] } {
  if (fields.length === 0) return { body, withheld: [] };
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(body).toString('utf8'));
  } catch {
    return { body, withheld: [] };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { body, withheld: [] };
  }
  const object = parsed as Record<string, unknown>;
  const withheld = fields.filter((f) => Object.hasOwn(object, f));
  if (withheld.length === 0) return { body, withheld };
  for (const f of withheld) delete object[f];
  return { body: Buffer.from(JSON.stringify(object)), withheld };
}

/** The id of what a stored body describes: its `id`, or the `id` of its first object member. */
function describedId(body: Uint8Array): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(body).toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const object = parsed as Record<string, unknown>;
  if (typeof object.id === 'string') return object.id;
  for (const value of Object.values(object)) {
    const id = (value as { id?: unknown } | null)?.id;
    if (typeof value === 'object' && typeof id === 'string') return id;
  }
  return undefined;
}

/**
 * The answer to a replay of a success whose response held a secret returned only once: the
 * secret is not stored, so the response cannot be repeated. Names the created resource (its id
 * is not secret) so the caller can find or revoke it.
 */
export function secretNotReplayed(outcome: IdempotencyOutcome): TouchstoneError {
  const id = describedId(outcome.body);
  const fields = (outcome.withheld ?? []).map((f) => `"${f}"`).join(', ');
  const created = id === undefined ? 'already succeeded' : `already created ${id}`;
  return IdempotencyErrors.IDEMPOTENCY_SECRET_NOT_REPLAYED(
    `the request with this Idempotency-Key ${created}; its response field ${fields} is returned only once and is not stored, so it cannot be replayed. Use the value from the first response, or revoke ${id ?? 'the resource'} and create another with a new Idempotency-Key`,
    { details: (outcome.withheld ?? []).map((f) => ({ path: f, message: 'returned only once' })) },
  );
}

/** The error a keyed request whose outcome nobody can know answers. */
export function outcomeUncertain(why: string): TouchstoneError {
  return IdempotencyErrors.IDEMPOTENCY_OUTCOME_UNCERTAIN(
    `the outcome of the request with this Idempotency-Key is unknown: ${why}. Check whether the operation took effect, then retry with the same Idempotency-Key (never a new one): the retry runs the operation again and its outcome is stored`,
    { retryAfterSeconds: 1 },
  );
}
