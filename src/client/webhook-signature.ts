import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Verifies the `Touchstone-Signature` header of a webhook delivery:
 * `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>" keyed with the secret>`.
 * Several `v1=` values may appear (while a secret is being rotated); one match is enough.
 */

export type WebhookSignatureFailure =
  | 'missing_header'
  | 'malformed_header'
  | 'timestamp_out_of_tolerance'
  | 'signature_mismatch';

/** Why a delivery failed verification; answer it with a 4xx and do not act on the payload. */
export class WebhookSignatureError extends Error {
  override readonly name = 'WebhookSignatureError';
  constructor(
    readonly reason: WebhookSignatureFailure,
    message: string,
  ) {
    super(message);
  }
}

export interface VerifyWebhookOptions {
  /** The request body exactly as received, before any JSON parsing. */
  payload: string | Uint8Array;
  /** The `Touchstone-Signature` header value. */
  header: string | undefined;
  /** The webhook's secret (`whsec_…` or the one you set). */
  secret: string;
  /** Oldest (and furthest in the future) timestamp accepted, in seconds. Default 300. */
  toleranceSeconds?: number;
  /** Current time in ms since the epoch; defaults to `Date.now()`. */
  now?: number;
}

const HEX_SHA256 = /^[0-9a-f]{64}$/i;

/**
 * Throws a WebhookSignatureError unless the header carries a valid, fresh signature of `payload`.
 * Comparison is constant-time; the timestamp check stops replays of an old delivery.
 */
export function verifyWebhookSignature(options: VerifyWebhookOptions): void {
  const { payload, header, secret } = options;
  const tolerance = options.toleranceSeconds ?? 300;
  const now = options.now ?? Date.now();
  if (header === undefined || header.trim() === '') {
    throw new WebhookSignatureError('missing_header', 'no Touchstone-Signature header');
  }
  let timestamp: number | undefined;
  const candidates: Buffer[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (eq <= 0) continue;
    if (key === 't' && /^\d{1,12}$/.test(value)) timestamp = Number(value);
    else if (key === 'v1' && HEX_SHA256.test(value)) candidates.push(Buffer.from(value, 'hex'));
  }
  if (timestamp === undefined || candidates.length === 0) {
    throw new WebhookSignatureError(
      'malformed_header',
      'Touchstone-Signature needs t=<unix seconds> and at least one v1=<hex>',
    );
  }
  if (Math.abs(now / 1000 - timestamp) > tolerance) {
    throw new WebhookSignatureError(
      'timestamp_out_of_tolerance',
      `the signature timestamp is more than ${tolerance} s away from now`,
    );
  }
  const expected = createHmac('sha256', secret)
    .update(`${timestamp}.`)
    .update(typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload)
    .digest();
  // Every candidate is compared (no early exit), so timing says nothing about which one matched.
  let matched = false;
  for (const candidate of candidates) matched = timingSafeEqual(candidate, expected) || matched;
  if (!matched) {
    throw new WebhookSignatureError('signature_mismatch', 'no v1 signature matches the payload');
  }
}
