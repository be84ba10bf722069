import { describe, expect, it } from 'vitest';
import { annotationIdentifier, evaluatorOf, scoreSpanId } from './annotations.js';
import { otelTraceId } from './connector.js';
import { isoToMs, isoToNanos, msToIso, restoreAttributes, rootLabels } from './spans.js';

describe('Phoenix times', () => {
  it('ISO 8601 with microseconds and an offset is exact to the nanosecond', () => {
    expect(isoToNanos('2026-11-22T01:07:33.161929+00:00')).toBe(
      BigInt(Date.parse('2026-11-22T01:07:33Z') / 1000) * 1_000_000_000n + 161_929_000n,
    );
    expect(isoToNanos('2026-11-22T03:07:33.161929+02:00')).toBe(
      isoToNanos('2026-11-22T01:07:33.161929Z'),
    );
    expect(isoToNanos('2026-11-21T20:37:33.5-0430')).toBe(isoToNanos('2026-11-22T01:07:33.5Z'));
    // No zone is UTC (Phoenix's rule for query parameters); nine digits are kept.
    expect(isoToNanos('2026-11-22T01:07:33.123456789')).toBe(
      BigInt(Date.parse('2026-11-22T01:07:33Z') / 1000) * 1_000_000_000n + 123_456_789n,
    );
    for (const bad of ['', 'yesterday', '2026-11-22', 42, null]) {
      expect(isoToNanos(bad)).toBeUndefined();
    }
  });

  it('milliseconds drop the sub-millisecond digits; query bounds are ISO with Z', () => {
    expect(isoToMs('2026-11-22T01:07:33.161929+00:00')).toBe(
      Date.parse('2026-11-22T01:07:33.161Z'),
    );
    expect(msToIso(Date.parse('2026-11-22T01:07:33.161Z'))).toBe('2026-11-22T01:07:33.161Z');
  });
});

describe('OpenInference attributes restored from Phoenix', () => {
  it('puts the span kind back, except Phoenix’s default UNKNOWN', () => {
    expect(restoreAttributes({ 'input.value': 'q' }, 'LLM')).toEqual({
      'input.value': 'q',
      'openinference.span.kind': 'LLM',
    });
    expect(restoreAttributes({}, 'UNKNOWN')).toEqual({});
  });

  it('metadata back to JSON text with its keys whole (label keys hold dots)', () => {
    const out = restoreAttributes(
      {
        'metadata.touchstone.label.team': 'search',
        'metadata.session_id': 's1',
        'metadata.n': 3,
        'session.id': 's1',
      },
      'CHAIN',
    );
    expect(JSON.parse(out.metadata as string)).toEqual({
      'touchstone.label.team': 'search',
      session_id: 's1',
      n: 3,
    });
    expect(out['session.id']).toBe('s1');
    expect(Object.keys(out).filter((k) => k.startsWith('metadata.'))).toEqual([]);
  });

  it('tool.parameters and prompt template variables re-nested, index runs back to arrays', () => {
    const out = restoreAttributes(
      {
        'tool.parameters.type': 'object',
        'tool.parameters.required': ['city'],
        'tool.parameters.properties.city.type': 'string',
        'llm.prompt_template.variables.items.0.name': 'a',
        'llm.prompt_template.variables.items.1.name': 'b',
      },
      'TOOL',
    );
    expect(JSON.parse(out['tool.parameters'] as string)).toEqual({
      type: 'object',
      required: ['city'],
      properties: { city: { type: 'string' } },
    });
    expect(JSON.parse(out['llm.prompt_template.variables'] as string)).toEqual({
      items: [{ name: 'a' }, { name: 'b' }],
    });
  });

  it('document metadata inside retrieval documents, per document', () => {
    const out = restoreAttributes(
      {
        'retrieval.documents.0.document.content': 'doc',
        'retrieval.documents.0.document.metadata.source': 'wiki',
        'retrieval.documents.1.document.metadata.source': 'kb',
      },
      'RETRIEVER',
    );
    expect(out['retrieval.documents.0.document.content']).toBe('doc');
    expect(JSON.parse(out['retrieval.documents.0.document.metadata'] as string)).toEqual({
      source: 'wiki',
    });
    expect(JSON.parse(out['retrieval.documents.1.document.metadata'] as string)).toEqual({
      source: 'kb',
    });
  });

  it('metadata Phoenix could not parse stays the text it is', () => {
    expect(restoreAttributes({ metadata: 'not json' }, undefined)).toEqual({
      metadata: 'not json',
    });
  });
});

describe('labels of a root span', () => {
  it('the span attribute wins over the same key in metadata; only scalars', () => {
    expect(
      rootLabels({
        attributes: {
          'touchstone.label.env': 'prod',
          'metadata.touchstone.label.env': 'dev',
          'metadata.touchstone.label.team': 'search',
          'metadata.touchstone.label.n': 2,
          'metadata.touchstone.label.ok': true,
          'touchstone.label.list': ['a'],
          'touchstone.label.': 'empty key',
          'other.touchstone.label.x': 'no',
        },
      }),
    ).toEqual({
      'touchstone.label.env': 'prod',
      'touchstone.label.team': 'search',
      'touchstone.label.n': '2',
      'touchstone.label.ok': 'true',
    });
    expect(rootLabels(undefined)).toEqual({});
  });
});

describe('ids and identifiers', () => {
  it('OTel hex trace ids are kept; anything else gets a stable derived id', () => {
    expect(otelTraceId('6A1F0C3E9B2D4F5A8C7E1D2B3A4F5E6D')).toBe(
      '6a1f0c3e9b2d4f5a8c7e1d2b3a4f5e6d',
    );
    const derived = otelTraceId('my-trace');
    expect(derived).toMatch(/^[0-9a-f]{32}$/);
    expect(otelTraceId('my-trace')).toBe(derived);
    expect(otelTraceId('0'.repeat(32))).not.toBe('0'.repeat(32));
  });

  it('one identifier per (policy, evaluator); a score names its span by metadata.spanId', () => {
    expect(evaluatorOf('helpfulness.passed')).toBe('helpfulness');
    expect(evaluatorOf('tool-errors')).toBe('tool-errors');
    expect(annotationIdentifier('quality', 'latency.within')).toBe('touchstone/quality/latency');
    expect(scoreSpanId({ name: 'x', value: 1, metadata: { spanId: 'ABCDEF0123456789' } })).toBe(
      'abcdef0123456789',
    );
    for (const spanId of ['xyz', '0000000000000000', 42]) {
      expect(scoreSpanId({ name: 'x', value: 1, metadata: { spanId } })).toBeUndefined();
    }
  });
});
