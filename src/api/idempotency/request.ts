import { createHash } from 'node:crypto';
import { IdempotencyErrors } from './error-codes.js';

export const IDEMPOTENCY_HEADER = 'idempotency-key';
/** Set on an answer that is a stored outcome rather than a new execution. */
export const REPLAYED_HEADER = 'idempotent-replayed';

const KEY_PATTERN = /^[\x20-\x7e]{1,255}$/;

/**
 * The Idempotency-Key of a request, or undefined when it sent none. Throws
 * IDEMPOTENCY_KEY_INVALID for an empty or overlong key or one with other than printable ASCII
 * (the message does not quote it: a key may be a client's secret-looking token).
 */
export function parseIdempotencyKey(
  value: string | readonly string[] | undefined,
): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') {
    throw IdempotencyErrors.IDEMPOTENCY_KEY_INVALID('send one Idempotency-Key header, not several');
  }
  if (!KEY_PATTERN.test(value)) {
    const why =
      value.length === 0
        ? 'is empty'
        : value.length > 255
          ? `is ${value.length} characters long`
          : 'holds characters other than printable ASCII';
    throw IdempotencyErrors.IDEMPOTENCY_KEY_INVALID(
      `Idempotency-Key ${why}; use 1 to 255 printable ASCII characters (a UUID fits)`,
    );
  }
  return value;
}

export function sha256Hex(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}

export const EMPTY_SHA256 = sha256Hex('');

/**
 * The request digest a key is bound to: method, path (with its parameters), the query string as
 * sent and the body bytes as sent (their sha256). No canonical form: the same request resent is
 * the same bytes, and anything else counts as a changed payload.
 */
export function requestDigest(parts: {
  method: string;
  path: string;
  query: string;
  bodySha256: string;
}): string {
  return sha256Hex(
    `${parts.method.toUpperCase()}\n${parts.path}\n${parts.query}\n${parts.bodySha256}`,
  );
}
