import { describe, expect, it } from 'vitest';
import { otelSpanId, otelTraceId, SCORE_NAMESPACE, scoreId, uuidV5 } from './ids.js';

describe('ids', () => {
  it('keeps OpenTelemetry-shaped ids', () => {
    expect(otelTraceId('6a1f0c3e9b2d4f5a8c7e1d2b3a4f5e6d')).toBe(
      '6a1f0c3e9b2d4f5a8c7e1d2b3a4f5e6d',
    );
    expect(otelSpanId('0f1e2d3c4b5a6978')).toBe('0f1e2d3c4b5a6978');
  });

  it('maps any other id to a stable hash (UUIDs, upper case, the t-<trace> row, zeros)', () => {
    const uuid = '3f2b8c1e-7d4a-4e5b-9c6d-0a1b2c3d4e5f';
    expect(otelTraceId(uuid)).toMatch(/^[0-9a-f]{32}$/);
    expect(otelTraceId(uuid)).toBe(otelTraceId(uuid));
    expect(otelTraceId(uuid)).not.toBe(otelTraceId(uuid.toUpperCase()));
    expect(otelTraceId('6A1F0C3E9B2D4F5A8C7E1D2B3A4F5E6D')).not.toBe(
      '6a1f0c3e9b2d4f5a8c7e1d2b3a4f5e6d',
    );
    expect(otelTraceId('0'.repeat(32))).toMatch(/^(?!0+$)[0-9a-f]{32}$/);
    expect(otelSpanId(`t-${uuid}`)).toMatch(/^[0-9a-f]{16}$/);
    expect(otelSpanId(uuid)).not.toBe(otelSpanId(`t-${uuid}`));
    expect(otelSpanId('0'.repeat(16))).toMatch(/^(?!0+$)[0-9a-f]{16}$/);
    // Documented in docs/sources-langfuse.md: SHA-256 of a prefixed id, first hex digits.
    expect(otelTraceId('trace-1')).toBe('85b270850be4d552ce0f69e8b16eab7f');
    expect(otelSpanId('obs-1')).toBe('15c69b80d94a8215');
  });

  it('UUIDv5 is RFC 9562 (its DNS example)', () => {
    expect(uuidV5('www.example.com', '6ba7b810-9dad-11d1-80b4-00c04fd430c8')).toBe(
      '2ed6657d-e927-568b-95e1-2665a8aea6a2',
    );
  });

  it('a score id is one per (trace, observation, policy, metric)', () => {
    const base = { traceId: 'tr', policy: 'quality', metric: 'helpfulness' };
    const id = scoreId(base);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(scoreId(base)).toBe(id);
    expect(id).toBe(
      uuidV5(JSON.stringify(['tr', null, 'quality', 'helpfulness']), SCORE_NAMESPACE),
    );
    expect(scoreId({ ...base, observationId: 'o1' })).not.toBe(id);
    expect(scoreId({ ...base, policy: 'other' })).not.toBe(id);
    expect(scoreId({ ...base, metric: 'other' })).not.toBe(id);
    expect(scoreId({ ...base, traceId: 'tr2' })).not.toBe(id);
  });
});
