import { createHmac } from 'node:crypto';

/**
 * `Touchstone-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, keyed with
 * the webhook's secret (Stripe's and Svix's scheme: receivers verify the raw bytes and refuse old
 * timestamps). Every attempt signs with a fresh `t`, so a retried delivery stays verifiable.
 */
export function signatureHeader(secret: string, body: string, unixSeconds: number): string {
  const t = Math.floor(unixSeconds);
  const v1 = createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
  return `t=${t},v1=${v1}`;
}
