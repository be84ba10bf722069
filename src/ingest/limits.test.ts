import { describe, expect, it } from 'vitest';
import type { Attributes, Span, SpanEvent, SpanLink } from '../core/index.js';
import { DEFAULT_SPAN_LIMITS, limitSpans, type SpanLimits } from './limits.js';

function span(fields: Partial<Span> = {}): Span {
  return {
    traceId: '5b8efff798038103d269b633813fc60c',
    spanId: 'eee19b7ec3c1b174',
    parentSpanId: '',
    name: 'chat gpt-4o',
    kind: 1,
    startTimeUnixNano: '1',
    endTimeUnixNano: '2',
    attributes: { 'gen_ai.request.model': 'gpt-4o' },
    events: [],
    links: [],
    status: { code: 0, message: '' },
    resource: { 'service.name': 'svc' },
    scope: { name: 's', version: '1' },
    ...fields,
  };
}

const small: SpanLimits = {
  maxAttributeKeyBytes: 8,
  maxNameBytes: 6,
  maxAttributesPerSpan: 2,
  maxEventsPerSpan: 2,
  maxLinksPerSpan: 1,
  maxAttributesPerEvent: 1,
  maxAttributesPerLink: 1,
};

function many(n: number, prefix = 'k'): Attributes {
  const out: Attributes = {};
  for (let i = 0; i < n; i++) out[`${prefix}${i}`] = i;
  return out;
}

const event = (name: string, attributes: Attributes = {}): SpanEvent => ({
  name,
  timeUnixNano: '1',
  attributes,
});
const link = (attributes: Attributes = {}): SpanLink => ({
  traceId: '5b8efff798038103d269b633813fc60c',
  spanId: '0102030405060708',
  attributes,
});

describe('limitSpans', () => {
  it('has the OpenTelemetry SDK counts and 1 KiB keys and names by default', () => {
    expect(DEFAULT_SPAN_LIMITS).toEqual({
      maxAttributeKeyBytes: 1024,
      maxNameBytes: 1024,
      maxAttributesPerSpan: 128,
      maxEventsPerSpan: 128,
      maxLinksPerSpan: 128,
      maxAttributesPerEvent: 128,
      maxAttributesPerLink: 128,
    });
  });

  it('returns spans within every limit as they are, and the same list', () => {
    const spans = [
      span({ events: [event('e', many(128))], links: [link(many(3))], attributes: many(128) }),
    ];
    expect(limitSpans(spans, DEFAULT_SPAN_LIMITS)).toBe(spans);
  });

  it('cuts long names and keys with the marker of cut values, at every depth', () => {
    const resource = { 'service.name': 'svc', 'touchstone.label.teamname': 'x' };
    const [out] = limitSpans(
      [
        span({
          name: 'a-long-name',
          attributes: {
            short: 1,
            'long-key-here': 'v',
            nested: { 'inner-long-key': { deepest_key_x: true } },
            list: [{ 'listed-long-key': 1 }, 'plain'],
          },
          events: [event('exception-event')],
          resource,
          scope: { name: 'scope-name', version: '1.2.3.4.5' },
        }),
      ],
      { ...small, maxAttributesPerSpan: 10 },
    );
    expect(out!.name).toBe('a-long…[truncated 5 bytes]');
    expect(out!.events[0]!.name).toBe('except…[truncated 9 bytes]');
    expect(out!.scope).toEqual({
      name: 'scope-…[truncated 4 bytes]',
      version: '1.2.3.…[truncated 3 bytes]',
    });
    expect(out!.attributes).toEqual({
      short: 1,
      'long-key…[truncated 5 bytes]': 'v',
      nested: { 'inner-lo…[truncated 6 bytes]': { 'deepest_…[truncated 5 bytes]': true } },
      list: [{ 'listed-l…[truncated 7 bytes]': 1 }, 'plain'],
    });
    expect(out!.resource).toEqual({
      'service.…[truncated 4 bytes]': 'svc',
      'touchsto…[truncated 17 bytes]': 'x',
    });
    expect(out).not.toHaveProperty('droppedAttributesCount');
  });

  it('cuts keys on a character boundary and keeps the last of keys that become equal', () => {
    const [out] = limitSpans([span({ attributes: { 'ééééé-a': 1, 'ééééé-b': 2 } })], {
      ...small,
      maxAttributesPerSpan: 10,
    });
    expect(out!.attributes).toEqual({ 'éééé…[truncated 4 bytes]': 2 });
  });

  it('keeps the first attributes, events and links and adds what it dropped to the counts', () => {
    const [out] = limitSpans(
      [
        span({
          attributes: { a: 1, b: 2, c: 3, d: 4 },
          droppedAttributesCount: 5,
          events: [event('e1', { x: 1, y: 2 }), event('e2'), event('e3')],
          droppedEventsCount: 1,
          links: [link({ x: 1, y: 2, z: 3 }), link()],
        }),
      ],
      small,
    );
    expect(out!.attributes).toEqual({ a: 1, b: 2 });
    expect(out!.droppedAttributesCount).toBe(7);
    expect(out!.events.map((e) => e.name)).toEqual(['e1', 'e2']);
    expect(out!.droppedEventsCount).toBe(2);
    expect(out!.events[0]).toMatchObject({ attributes: { x: 1 }, droppedAttributesCount: 1 });
    expect(out!.links).toHaveLength(1);
    expect(out!.droppedLinksCount).toBe(1);
    expect(out!.links[0]).toMatchObject({ attributes: { x: 1 }, droppedAttributesCount: 2 });
  });

  it('limits each distinct resource once and shares the result, without a count limit', () => {
    const resource = { ...many(500), 'a-very-long-key': 1 };
    const spans = [span({ resource }), span({ resource, spanId: '0102030405060708' })];
    const out = limitSpans(spans, small);
    expect(out[0]!.resource).toBe(out[1]!.resource);
    expect(Object.keys(out[0]!.resource)).toHaveLength(501);
  });

  it('keeps a `__proto__` key as data', () => {
    const attributes = JSON.parse('{"__proto__": {"polluted": 1}, "a": 1, "b": 2}') as Attributes;
    const limits = { ...DEFAULT_SPAN_LIMITS, maxAttributesPerSpan: 2 };
    const [out] = limitSpans([span({ attributes })], limits);
    expect(Object.hasOwn(out!.attributes, '__proto__')).toBe(true);
    expect(out!.attributes).toEqual(JSON.parse('{"__proto__": {"polluted": 1}, "a": 1}'));
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  // Its cost is measured where it counts, on a real server under a /healthz prober
  // (test/adversarial/keys-and-patterns.test.ts), not by a wall-clock bound here.
  it('drops 100k attributes and 10k events, never refusing the span', () => {
    const [out] = limitSpans(
      [
        span({
          attributes: many(100_000),
          events: Array.from({ length: 10_000 }, () => event('e')),
        }),
      ],
      DEFAULT_SPAN_LIMITS,
    );
    expect(Object.keys(out!.attributes)).toHaveLength(128);
    expect(out!.droppedAttributesCount).toBe(100_000 - 128);
    expect(out!.droppedEventsCount).toBe(10_000 - 128);
  });

  it('cuts a 1 MiB key and a 1 MiB name in linear time', () => {
    const huge = 'A'.repeat(1 << 20);
    const started = performance.now();
    const [out] = limitSpans(
      [
        span({
          name: huge,
          attributes: { [huge]: 1 },
          resource: { [`touchstone.label.${huge}`]: 'x' },
        }),
      ],
      DEFAULT_SPAN_LIMITS,
    );
    const cut = `${'A'.repeat(1024)}…[truncated ${(1 << 20) - 1024} bytes]`;
    expect(out!.name === cut).toBe(true);
    expect(Object.keys(out!.attributes)[0] === cut).toBe(true);
    expect(Object.keys(out!.resource)[0]!.length).toBeLessThan(1100);
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});
