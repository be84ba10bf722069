import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { verifyWebhookSignature, WebhookSignatureError } from './index.js';

const SECRET = 'whsec_test-secret-0123456789';
const NOW = Date.parse('2026-03-01T12:00:00Z');
const T = NOW / 1000;
const BODY = '{"id":"whd_1","type":"ping","created_at":"2026-03-01T12:00:00.000Z","project":"p"}';

function sign(body: string, t = T, secret = SECRET): string {
  return createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
}

function reason(fn: () => void): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof WebhookSignatureError) return err.reason;
    throw err;
  }
  return 'accepted';
}

const verify = (header: string | undefined, payload: string | Uint8Array = BODY, now = NOW) =>
  reason(() => verifyWebhookSignature({ payload, header, secret: SECRET, now }));

describe('verifyWebhookSignature', () => {
  it('accepts a valid signature over the raw body, given as text or bytes', () => {
    expect(verify(`t=${T},v1=${sign(BODY)}`)).toBe('accepted');
    expect(verify(`t=${T},v1=${sign(BODY)}`, Buffer.from(BODY))).toBe('accepted');
    expect(verify(` t=${T} , v1=${sign(BODY).toUpperCase()} `)).toBe('accepted');
  });

  it('refuses a changed body, another secret or a re-serialized body', () => {
    expect(verify(`t=${T},v1=${sign(BODY)}`, BODY.replace('ping', 'pong'))).toBe(
      'signature_mismatch',
    );
    expect(verify(`t=${T},v1=${sign(BODY, T, 'whsec_other-secret-000000')}`)).toBe(
      'signature_mismatch',
    );
    const reparsed = JSON.stringify(JSON.parse(BODY), null, 1);
    expect(verify(`t=${T},v1=${sign(BODY)}`, reparsed)).toBe('signature_mismatch');
  });

  it('binds the timestamp: a signature moved to another t fails', () => {
    expect(verify(`t=${T + 1},v1=${sign(BODY)}`)).toBe('signature_mismatch');
  });

  it('refuses timestamps more than the tolerance away (default five minutes), either way', () => {
    expect(verify(`t=${T - 300},v1=${sign(BODY, T - 300)}`)).toBe('accepted');
    expect(verify(`t=${T - 301},v1=${sign(BODY, T - 301)}`)).toBe('timestamp_out_of_tolerance');
    expect(verify(`t=${T + 301},v1=${sign(BODY, T + 301)}`)).toBe('timestamp_out_of_tolerance');
    expect(
      reason(() =>
        verifyWebhookSignature({
          payload: BODY,
          header: `t=${T - 30},v1=${sign(BODY, T - 30)}`,
          secret: SECRET,
          now: NOW,
          toleranceSeconds: 10,
        }),
      ),
    ).toBe('timestamp_out_of_tolerance');
  });

  it('accepts any of several v1 values (secret rotation) and ignores other schemes', () => {
    const old = sign(BODY, T, 'whsec_previous-secret-000');
    expect(verify(`t=${T},v1=${old},v1=${sign(BODY)}`)).toBe('accepted');
    expect(verify(`t=${T},v0=${sign(BODY)},v1=${old}`)).toBe('signature_mismatch');
  });

  it('refuses a missing or malformed header', () => {
    expect(verify(undefined)).toBe('missing_header');
    expect(verify('')).toBe('missing_header');
    expect(verify(`v1=${sign(BODY)}`)).toBe('malformed_header');
    expect(verify(`t=${T}`)).toBe('malformed_header');
    expect(verify(`t=${T},v1=abc`)).toBe('malformed_header');
    expect(verify(`t=soon,v1=${sign(BODY)}`)).toBe('malformed_header');
    expect(verify('garbage')).toBe('malformed_header');
  });

  it('says nothing about the secret or the expected signature in its errors', () => {
    try {
      verifyWebhookSignature({
        payload: 'x',
        header: `t=${T},v1=${'0'.repeat(64)}`,
        secret: SECRET,
        now: NOW,
      });
    } catch (err) {
      const text = `${(err as Error).message} ${JSON.stringify(err)}`;
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain(sign('x'));
      return;
    }
    throw new Error('expected a refusal');
  });
});
