import { describe, expect, it } from 'vitest';
import { principalId } from '../../auth/index.js';
import { CoreErrors } from '../../core/index.js';
import { StoreErrors } from '../../store/index.js';
import {
  ERROR_OUTCOME_STATUS,
  errorFromOutcome,
  errorOutcome,
  isOutcomeUnknown,
  isStoredError,
  secretNotReplayed,
  withhold,
} from './outcome.js';
import { parseIdempotencyKey, requestDigest, sha256Hex } from './request.js';
import { readKeyedStream, unaryDigest } from './stream.js';

function thrown(fn: () => unknown): Error & { code?: string } {
  try {
    fn();
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('expected a throw');
}

async function* messages(...parts: string[]): AsyncGenerator<Uint8Array> {
  for (const p of parts) yield Buffer.from(p);
}

describe('Idempotency-Key header', () => {
  it('accepts 1 to 255 printable ASCII characters and no header at all', () => {
    expect(parseIdempotencyKey(undefined)).toBeUndefined();
    expect(parseIdempotencyKey('a')).toBe('a');
    expect(parseIdempotencyKey('3f0c1c2e-9d7b-4a51-9d0e-2b4f2f1f9a10')).toBe(
      '3f0c1c2e-9d7b-4a51-9d0e-2b4f2f1f9a10',
    );
    expect(parseIdempotencyKey('~'.repeat(255))).toHaveLength(255);
    expect(parseIdempotencyKey('deploy 42: create run')).toBe('deploy 42: create run');
  });

  it('refuses empty, overlong, non-ASCII, control characters and repeated headers, without quoting', () => {
    for (const bad of ['', 'x'.repeat(256), 'clé-secrète', 'tab\there', 'nl\nx', 'del\x7f']) {
      const err = thrown(() => parseIdempotencyKey(bad));
      expect(err.code).toBe('IDEMPOTENCY_KEY_INVALID');
      if (bad.length > 3) expect(err.message).not.toContain(bad);
    }
    expect(thrown(() => parseIdempotencyKey(['a', 'b'])).code).toBe('IDEMPOTENCY_KEY_INVALID');
  });
});

describe('scope and digest', () => {
  it('names the principal by key id, other identities by kind, and no auth as anonymous', () => {
    expect(principalId({ kind: 'key', id: 'key_abc' })).toBe('key_abc');
    expect(principalId({ kind: 'open', id: 'open' })).toBe('anonymous');
    expect(
      principalId({ kind: 'oidc' as 'key', id: 'user@example.com' } as { kind: 'key'; id: string }),
    ).toBe('oidc:user@example.com');
  });

  it('binds method, path, query and body bytes; any change is another digest', () => {
    const base = { method: 'POST', path: '/v1alpha1/runs', query: 'project=p', bodySha256: '' };
    const d = requestDigest({ ...base, bodySha256: sha256Hex('{"a":1}') });
    const variants = [
      { ...base, method: 'PUT', bodySha256: sha256Hex('{"a":1}') },
      { ...base, path: '/v1alpha1/runs/x', bodySha256: sha256Hex('{"a":1}') },
      { ...base, query: 'project=q', bodySha256: sha256Hex('{"a":1}') },
      { ...base, bodySha256: sha256Hex('{"a": 1}') },
    ];
    for (const v of variants) expect(requestDigest(v)).not.toBe(d);
    expect(requestDigest({ ...base, method: 'post', bodySha256: sha256Hex('{"a":1}') })).toBe(d);
  });
});

describe('keyed write streams', () => {
  const method = 'touchstone.v1alpha1.DatasetService/UploadDataset';
  const identity = (m: Uint8Array) => m;

  it('reads to the end and digests every message with its length', async () => {
    const a = await readKeyedStream(messages('config', 'ab', 'cd'), identity, method);
    expect(a.messages).toHaveLength(3);
    expect(a.bytes).toBe(10);
    const same = await readKeyedStream(messages('config', 'ab', 'cd'), identity, method);
    expect(same.digest).toBe(a.digest);
    const resplit = await readKeyedStream(messages('config', 'abc', 'd'), identity, method);
    expect(resplit.digest).not.toBe(a.digest);
    const other = await readKeyedStream(messages('config', 'ab', 'cd'), identity, 'x/Y');
    expect(other.digest).not.toBe(a.digest);
    expect(unaryDigest(method, Buffer.from('m'))).not.toBe(unaryDigest('x/Y', Buffer.from('m')));
  });

  it('refuses more messages or bytes than the limits (100001 messages, 64 MiB by default)', async () => {
    const limits = { maxBytes: 10, maxMessages: 3 };
    await expect(
      readKeyedStream(messages('a', 'b', 'c'), identity, method, limits),
    ).resolves.toMatchObject({ bytes: 3 });
    await expect(
      readKeyedStream(messages('a', 'b', 'c', 'd'), identity, method, limits),
    ).rejects.toMatchObject({ code: 'IDEMPOTENCY_STREAM_TOO_LARGE', kind: 'payload_too_large' });
    await expect(
      readKeyedStream(messages('12345', '678901'), identity, method, limits),
    ).rejects.toMatchObject({ code: 'IDEMPOTENCY_STREAM_TOO_LARGE' });
  });
});

describe('stored outcomes', () => {
  it('stores a request’s own errors and rebuilds them from the catalogue', () => {
    const err = CoreErrors.INVALID_ARGUMENT('trials must be at least 1', {
      details: [{ path: 'spec.trials', message: 'must be ≥ 1' }],
    });
    expect(isStoredError(err)).toBe(true);
    const outcome = errorOutcome(err);
    expect(outcome.status).toBe(ERROR_OUTCOME_STATUS);
    const back = errorFromOutcome(outcome);
    expect(back).toMatchObject({
      code: 'INVALID_ARGUMENT',
      kind: 'invalid_argument',
      message: err.message,
      details: err.details,
    });
    expect(isStoredError(StoreErrors.STORE_UNAVAILABLE('down'))).toBe(false);
    expect(isStoredError(StoreErrors.STORE_CONFLICT('deadlock'))).toBe(false);
    expect(isStoredError(CoreErrors.INTERNAL('bug'))).toBe(false);
    expect(isStoredError(new Error('plain'))).toBe(false);
    expect(isOutcomeUnknown(StoreErrors.STORE_OUTCOME_UNKNOWN('cut'))).toBe(true);
    expect(isOutcomeUnknown(StoreErrors.STORE_UNAVAILABLE('down'))).toBe(false);
  });

  it('withholds once-only fields and names the created resource on replay', () => {
    const body = Buffer.from(
      JSON.stringify({ key: { id: 'key_123', name: 'ci' }, secret: 'tsk_s3cr3t' }),
    );
    const kept = withhold(body, ['secret', 'absent']);
    expect(kept.withheld).toEqual(['secret']);
    expect(Buffer.from(kept.body).toString()).not.toContain('tsk_s3cr3t');
    expect(JSON.parse(Buffer.from(kept.body).toString())).toEqual({
      key: { id: 'key_123', name: 'ci' },
    });
    const err = secretNotReplayed({
      status: 200,
      headers: {},
      body: kept.body,
      withheld: kept.withheld,
    });
    expect(err).toMatchObject({ code: 'IDEMPOTENCY_SECRET_NOT_REPLAYED', kind: 'already_exists' });
    expect(err.message).toContain('key_123');
    // Nothing to withhold: the body is stored as sent.
    const plain = Buffer.from('{"key":{"id":"k"}}');
    expect(withhold(plain, ['secret'])).toEqual({ body: plain, withheld: [] });
    expect(withhold(Buffer.from('not json'), ['secret']).withheld).toEqual([]);
  });
});
