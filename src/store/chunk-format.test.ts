import { describe, expect, it } from 'vitest';
import type { Attributes, DetachedEvents, Span } from '../core/index.js';
import {
  CHUNK_FORMAT,
  decodeChunk,
  encodeChunk,
  encodeChunkV1,
  encodeChunkV2,
} from './chunk-format.js';
import type { SpanBatch } from './ports.js';

const T = 'a'.repeat(32);
const RESOURCE: Attributes = { 'service.name': 'svc', raw: new Uint8Array([1, 2]) };
const OTHER: Attributes = { 'service.name': 'other' };

/** Every field of the span model set, bytes among the attributes of span, event and link. */
function full(spanId: string, overrides: Partial<Span> = {}): Span {
  return {
    traceId: T,
    spanId,
    parentSpanId: '1'.repeat(16),
    name: 'chat "gpt" \u2028 ✓',
    kind: 3,
    startTimeUnixNano: '1767225600000000001',
    endTimeUnixNano: '1767225600500000002',
    attributes: {
      s: 'text',
      n: 1.5,
      big: '9007199254740993',
      b: true,
      bytes: new Uint8Array([0, 255]),
      list: ['x', 2, false, new Uint8Array([7])],
      map: { inner: { deep: 'y' } },
    },
    events: [
      { name: 'e1', timeUnixNano: '1767225600100000000', attributes: { k: 'v' } },
      {
        name: 'e2',
        timeUnixNano: '1767225600200000000',
        attributes: { raw: new Uint8Array([3]) },
        droppedAttributesCount: 2,
      },
    ],
    links: [
      { traceId: 'b'.repeat(32), spanId: 'c'.repeat(16), attributes: {} },
      {
        traceId: 'd'.repeat(32),
        spanId: 'e'.repeat(16),
        attributes: { why: 'retry' },
        droppedAttributesCount: 1,
      },
    ],
    status: { code: 2, message: 'boom' },
    resource: RESOURCE,
    scope: { name: 'openinference', version: '1.2' },
    droppedAttributesCount: 4,
    droppedEventsCount: 5,
    droppedLinksCount: 6,
    ...overrides,
  };
}

function plain(spanId: string, overrides: Partial<Span> = {}): Span {
  return {
    traceId: T,
    spanId,
    parentSpanId: '',
    name: 'root',
    kind: 1,
    startTimeUnixNano: '1',
    endTimeUnixNano: '2',
    attributes: {},
    events: [],
    links: [],
    status: { code: 0, message: '' },
    resource: OTHER,
    scope: { name: 's', version: '' },
    ...overrides,
  };
}

function batch(spans: Span[], extra: Partial<SpanBatch> = {}): SpanBatch {
  return { project: 'p', traceId: T, spans, labels: {}, source: '', ...extra };
}

const resourceIds = new Map<Attributes, string>([
  [RESOURCE, 'r1'],
  [OTHER, 'r2'],
]);
const refOf = (r: Attributes) => resourceIds.get(r) ?? 'unknown';
const byId = new Map([...resourceIds].map(([r, id]) => [id, r]));

/** A chunk read as the store reads it: each span given the resource it names. */
function read(format: number, text: string): { spans: Span[]; detached: unknown } {
  const chunk = decodeChunk(format, text, T);
  chunk.spans.forEach((s, i) => {
    const ref = chunk.refs[i];
    if (ref !== undefined) s.resource = byId.get(ref) ?? {};
  });
  return { spans: chunk.spans, detached: chunk.detached };
}

describe('span chunk formats', () => {
  const detachedEvents: DetachedEvents[] = [
    {
      spanId: '2'.repeat(16),
      events: [
        {
          name: 'gen_ai.user.message',
          timeUnixNano: '5',
          attributes: { raw: new Uint8Array([9]) },
        },
        { name: 'x', timeUnixNano: '6', attributes: {}, droppedAttributesCount: 3 },
      ],
    },
  ];
  const spans = [
    full('2'.repeat(16)),
    plain('1'.repeat(16)),
    full('3'.repeat(16), { droppedEventsCount: undefined, droppedAttributesCount: undefined }),
    plain('4'.repeat(16), { scope: { name: 'openinference', version: '1.2' }, resource: RESOURCE }),
  ];
  const input = batch(spans, { detachedEvents });

  it('writes format 2 and reads back every field of every span and detached event', () => {
    const { format, text } = encodeChunk(input, refOf);
    expect(format).toBe(CHUNK_FORMAT);
    expect(format).toBe(2);
    const out = read(format, text);
    expect(out.spans).toEqual(spans);
    expect(out.detached).toEqual(detachedEvents);
    // Absent counts stay absent (not undefined-valued keys, not zeros).
    expect(Object.keys(out.spans[1]!)).not.toContain('droppedAttributesCount');
    expect(out.spans[2]).not.toHaveProperty('droppedAttributesCount');
    expect(out.spans[2]?.droppedLinksCount).toBe(6);
    expect(out.spans[0]?.events[0]).not.toHaveProperty('droppedAttributesCount');
  });

  it('reads a span the same from either format, key order included', () => {
    const v1 = read(1, encodeChunkV1(input, refOf));
    const v2 = read(2, encodeChunkV2(input, refOf) as string);
    expect(v2.spans).toEqual(v1.spans);
    expect(v2.detached).toEqual(v1.detached);
    const text = (s: Span[]) =>
      JSON.stringify(s, (_k, v: unknown) => (v instanceof Uint8Array ? [...v] : v));
    expect(text(v2.spans)).toBe(text(v1.spans));
  });

  it('holds resources and scopes once per chunk, and no trace id or span keys per span', () => {
    // Two resource objects of equal content (one id): one entry.
    const copy = { ...RESOURCE };
    const many = Array.from({ length: 50 }, (_, i) =>
      plain((i + 1).toString(16).padStart(16, '0'), { resource: i % 2 === 0 ? RESOURCE : copy }),
    );
    const named: Attributes[] = [];
    const text = encodeChunkV2(batch(many), (r) => {
      named.push(r);
      return 'r1';
    }) as string;
    // Each resource object named once, not once per span.
    expect(named).toEqual([RESOURCE, copy]);
    const parsed = JSON.parse(text) as { r: string[]; c: unknown[]; s: unknown[][] };
    expect(parsed.r).toEqual(['r1']);
    expect(parsed.c).toEqual([['s', '']]);
    expect(parsed.s).toHaveLength(50);
    expect(text).not.toContain(T);
    expect(text).not.toContain('spanId');
    expect(text.length).toBeLessThan(encodeChunkV1(batch(many), () => 'r1').length / 2);
  });

  it('keeps format 1 for a batch holding a span of another trace, which it reads as written', () => {
    const stray = plain('5'.repeat(16), { traceId: 'f'.repeat(32) });
    const mixed = batch([plain('1'.repeat(16)), stray]);
    expect(encodeChunkV2(mixed, refOf)).toBeUndefined();
    const { format, text } = encodeChunk(mixed, refOf);
    expect(format).toBe(1);
    expect(read(format, text).spans.map((s) => s.traceId)).toEqual([T, 'f'.repeat(32)]);
  });

  it('reads format-1 chunks from before resources were stored apart', () => {
    const old = [full('2'.repeat(16)), plain('1'.repeat(16))];
    const text = JSON.stringify(old, (_k, v: unknown) =>
      v instanceof Uint8Array ? { $bytes: Buffer.from(v).toString('base64') } : v,
    );
    const chunk = decodeChunk(1, text, T);
    expect(chunk.refs).toEqual([undefined, undefined]);
    expect(chunk.spans).toEqual(old);
  });

  it('refuses a chunk format this build does not know instead of guessing', () => {
    const { text } = encodeChunk(input, refOf);
    expect(() => decodeChunk(3, text, T)).toThrow(
      expect.objectContaining({ code: 'STORE_SCHEMA_TOO_NEW' }),
    );
    expect(() => decodeChunk(0, text, T)).toThrow(/format 0/);
  });
});
