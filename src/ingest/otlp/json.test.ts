import { describe, expect, it } from 'vitest';
import { isTouchstoneError } from '../../core/index.js';
import { decodeOtlpJson, decodeOtlpJsonInSlices, decodeOtlpProtobuf } from './index.js';
import {
  genAiSpans,
  overrideSpan,
  SMALL_COUNT_LIMITS,
  sdkTrace,
  toJson,
  toProtobuf,
  WITHIN_SMALL_COUNT_LIMITS,
} from './otel-spans.testkit.js';

const OPTS = { maxAttributeBytes: 64 * 1024 };

function failure(text: string): { message: string; details: unknown } {
  try {
    decodeOtlpJson(text, OPTS);
  } catch (err) {
    if (!isTouchstoneError(err)) throw err;
    expect(err.code).toBe('OTLP_DECODE_FAILED');
    expect(err.kind).toBe('invalid_argument');
    return { message: err.message, details: err.details };
  }
  throw new Error('expected OTLP_DECODE_FAILED');
}

/** A one-span request around `span` fields (ids filled in unless given). */
function oneSpan(span: Record<string, unknown>, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    resourceSpans: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: 'svc' } }] },
        scopeSpans: [
          {
            scope: { name: 's', version: '1' },
            spans: [
              {
                traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
                spanId: 'a3ce929d0e0e4736',
                name: 'n',
                startTimeUnixNano: '1767225600000000000',
                endTimeUnixNano: '1767225602400000000',
                ...span,
              },
            ],
          },
        ],
        ...extra,
      },
    ],
  });
}

describe('decodeOtlpJson', () => {
  it('decodes the OTLP/JSON example of the conventions reference', () => {
    const text = `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"travel-app"}}]},
  "scopeSpans":[{"scope":{"name":"openinference.instrumentation.openai_agents","version":"1.4.0"},
   "spans":[{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"a3ce929d0e0e4736","name":"travel-helper",
     "kind":1,"startTimeUnixNano":"1767225600000000000","endTimeUnixNano":"1767225602400000000",
     "attributes":[{"key":"openinference.span.kind","value":{"stringValue":"AGENT"}},
                   {"key":"llm.token_count.prompt","value":{"intValue":"120"}},
                   {"key":"tag.tags","value":{"arrayValue":{"values":[{"stringValue":"travel"}]}}}],
     "status":{"code":2,"message":"rate limited"}}]}]}]}`;
    expect(decodeOtlpJson(text, OPTS)).toEqual({
      spans: [
        {
          traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
          spanId: 'a3ce929d0e0e4736',
          parentSpanId: '',
          name: 'travel-helper',
          kind: 1,
          startTimeUnixNano: '1767225600000000000',
          endTimeUnixNano: '1767225602400000000',
          attributes: {
            'openinference.span.kind': 'AGENT',
            'llm.token_count.prompt': 120,
            'tag.tags': ['travel'],
          },
          events: [],
          links: [],
          status: { code: 2, message: 'rate limited' },
          resource: { 'service.name': 'travel-app' },
          scope: { name: 'openinference.instrumentation.openai_agents', version: '1.4.0' },
        },
      ],
      rejected: 0,
      rejectReasons: [],
    });
  });

  it('gives the same spans as the protobuf decoder for the same SDK trace', async () => {
    const { root, child, other } = await sdkTrace();
    const rich = overrideSpan(root, {
      attributes: {
        ...root.attributes,
        big: 2 ** 60,
        bigNegative: -(2 ** 60),
        twoTo53: 2 ** 53,
        bytes: new Uint8Array([0, 1, 254, 255]),
        nested: { a: [1, 'two', { three: false }] },
        unicode: 'naïve – 日本語 🚀',
      },
    });
    const spans = [other, child, rich];
    const fromJson = decodeOtlpJson(toJson(spans), OPTS);
    const fromProtobuf = decodeOtlpProtobuf(toProtobuf(spans), OPTS);
    expect(fromJson).toEqual(fromProtobuf);
    expect(fromJson.spans[2]!.attributes.big).toBe('1152921504606846976');
    expect(fromJson.spans[0]!.resource).toBe(fromJson.spans[2]!.resource);
    expect(fromJson.spans[0]!.scope).toBe(fromJson.spans[1]!.scope);
    // The realistic GenAI workload too.
    const workload = await genAiSpans(200);
    expect(decodeOtlpJson(toJson(workload), OPTS)).toEqual(
      decodeOtlpProtobuf(toProtobuf(workload), OPTS),
    );
  });

  it('decodes in slices, pausing after parsing and between spans, to what it decodes at once', async () => {
    const spans = Array.from({ length: 3500 }, (_, i) => ({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: (i + 1).toString(16).padStart(16, '0'),
      name: 'n',
      startTimeUnixNano: '1767225600000000000',
      endTimeUnixNano: '1767225602400000000',
    }));
    const body = JSON.stringify({
      resourceSpans: [
        {
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'svc' } }] },
          scopeSpans: [{ spans: spans.slice(0, 1500) }, { spans: spans.slice(1500) }],
        },
      ],
    });
    let pauses = 0;
    const pause = async () => {
      pauses++;
    };
    const sliced = await decodeOtlpJsonInSlices(body, OPTS, pause);
    // After parsing, then after every 1000 spans.
    expect(pauses).toBe(4);
    expect(sliced).toEqual(decodeOtlpJson(body, OPTS));

    const bad = body.replace('"name":"n"', '"name":7');
    const error = await decodeOtlpJsonInSlices(bad, OPTS, pause).catch((err) => err);
    expect(error.code).toBe('OTLP_DECODE_FAILED');
    expect(error.message).toBe(failure(bad).message);
  });

  it('accepts snake_case keys, enum names, upper-case hex, base64 ids and numeric int64s', () => {
    const text = JSON.stringify({
      resource_spans: [
        {
          scope_spans: [
            {
              spans: [
                {
                  trace_id: '4BF92F3577B34DA6A3CE929D0E0E4736',
                  span_id: Buffer.from('a3ce929d0e0e4736', 'hex').toString('base64'),
                  parent_span_id: '00F067AA0BA902B7',
                  name: 'snake',
                  kind: 'SPAN_KIND_CLIENT',
                  start_time_unix_nano: 1767225600000000,
                  end_time_unix_nano: '1767225600000000001',
                  attributes: [
                    { key: 'i', value: { int_value: 7 } },
                    { key: 's', value: { int_value: '-9007199254740993' } },
                    { key: 'd', value: { double_value: 'NaN' } },
                    { key: 'inf', value: { doubleValue: '-Infinity' } },
                    { key: 'b', value: { bytes_value: 'AAH+/w==' } },
                    {
                      key: 'kv',
                      value: {
                        kvlist_value: { values: [{ key: 'x', value: { bool_value: true } }] },
                      },
                    },
                  ],
                  events: [{ time_unix_nano: '5', name: 'e' }],
                  links: [
                    {
                      trace_id: Buffer.alloc(16, 1).toString('base64'),
                      span_id: '0102030405060708',
                    },
                  ],
                  status: { code: 'STATUS_CODE_OK' },
                },
              ],
            },
          ],
        },
      ],
    });
    const [span] = decodeOtlpJson(text, OPTS).spans;
    expect(span).toEqual({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: 'a3ce929d0e0e4736',
      parentSpanId: '00f067aa0ba902b7',
      name: 'snake',
      kind: 3,
      startTimeUnixNano: '1767225600000000',
      endTimeUnixNano: '1767225600000000001',
      attributes: {
        i: 7,
        s: '-9007199254740993',
        d: Number.NaN,
        inf: Number.NEGATIVE_INFINITY,
        b: new Uint8Array([0, 1, 254, 255]),
        kv: { x: true },
      },
      events: [{ name: 'e', timeUnixNano: '5', attributes: {} }],
      links: [{ traceId: '01'.repeat(16), spanId: '0102030405060708', attributes: {} }],
      status: { code: 1, message: '' },
      resource: {},
      scope: { name: '', version: '' },
    });
  });

  it('ignores unknown fields and reads null as absent', () => {
    const text = oneSpan(
      {
        parentSpanId: null,
        status: {},
        kind: null,
        flags: 257,
        droppedAttributesCount: 3,
        futureField: { anything: [1, 2] },
        attributes: [
          { key: 'empty', value: {} },
          { key: 'nullValue', value: null },
          { key: 'nullString', value: { stringValue: null } },
          { key: 'ok', value: { stringValue: 'yes', futureValue: 1 } },
        ],
      },
      { schemaUrl: 'https://opentelemetry.io/schemas/1.26.0', unknown: true },
    );
    const [span] = decodeOtlpJson(text, OPTS).spans;
    expect(span!.attributes).toEqual({ ok: 'yes' });
    expect(span!.status).toEqual({ code: 0, message: '' });
    expect(span!.parentSpanId).toBe('');
  });

  it('keeps the dropped counts a sender reports, in either spelling, camelCase first', () => {
    const [span] = decodeOtlpJson(
      oneSpan({
        droppedAttributesCount: 3,
        dropped_attributes_count: 9,
        dropped_events_count: '2',
        droppedLinksCount: 1,
        events: [
          { name: 'e', timeUnixNano: '5', droppedAttributesCount: 4 },
          { name: 'clean', droppedAttributesCount: 0 },
        ],
        links: [
          {
            traceId: '01'.repeat(16),
            spanId: '0102030405060708',
            dropped_attributes_count: 6,
          },
        ],
      }),
      OPTS,
    ).spans;
    expect(span).toMatchObject({
      droppedAttributesCount: 3,
      droppedEventsCount: 2,
      droppedLinksCount: 1,
      events: [{ name: 'e', droppedAttributesCount: 4 }, { name: 'clean' }],
      links: [{ droppedAttributesCount: 6 }],
    });
    expect(span!.events[1]).not.toHaveProperty('droppedAttributesCount');
    expect(decodeOtlpJson(oneSpan({}), OPTS).spans[0]).not.toHaveProperty('droppedEventsCount');
  });

  it('skips what is over the count limits unread and counts it as dropped', () => {
    const kv = (key: string, n: number) => ({ key, value: { intValue: n } });
    const link = { traceId: '01'.repeat(16), spanId: '0102030405060708' };
    const [span] = decodeOtlpJson(
      oneSpan({
        // The fourth is not even a KeyValue: past the limit, it is never read.
        attributes: [kv('a', 1), kv('b', 2), kv('c', 3), 'not a KeyValue'],
        droppedAttributesCount: 5,
        events: [{ name: 'e1', attributes: [kv('x', 1), kv('y', 2)] }, 'not an event'],
        links: [
          { ...link, attributes: [kv('x', 1), kv('y', 2)], droppedAttributesCount: 1 },
          { traceId: '00'.repeat(16), spanId: '0102030405060708' },
        ],
      }),
      { ...OPTS, limits: SMALL_COUNT_LIMITS },
    ).spans;
    expect(span).toMatchObject(WITHIN_SMALL_COUNT_LIMITS);
  });

  it('refuses a dropped count that is not an unsigned 32-bit integer, naming the field', () => {
    for (const bad of [-1, 1.5, 2 ** 32, 'x', {}]) {
      expect(failure(oneSpan({ droppedEventsCount: bad })).message).toContain(
        'spans[0]: droppedEventsCount must be an unsigned 32-bit integer',
      );
    }
    expect(
      failure(oneSpan({ events: [{ name: 'e', droppedAttributesCount: -2 }] })).message,
    ).toContain('events[0]: droppedAttributesCount must be an unsigned 32-bit integer');
  });

  it('refuses spans with invalid or all-zero ids and keeps the others', () => {
    const spans = [
      { traceId: '4bf92f3577b34da6a3ce929d0e0e473', spanId: 'a3ce929d0e0e4736' },
      { traceId: 'zzf92f3577b34da6a3ce929d0e0e4736', spanId: 'a3ce929d0e0e4736' },
      { traceId: '00000000000000000000000000000000', spanId: 'a3ce929d0e0e4736' },
      { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '0000000000000000' },
      { traceId: '4bf92f3577b34da6a3ce929d0e0e4736' },
      {
        traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
        spanId: 'a3ce929d0e0e4736',
        parentSpanId: 'abc',
      },
      { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: 'a3ce929d0e0e4736', name: 'kept' },
      { traceId: 42, spanId: 'a3ce929d0e0e4736' },
    ];
    const text = JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans }] }] });
    const out = decodeOtlpJson(text, OPTS);
    expect(out.spans.map((s) => s.name)).toEqual(['kept']);
    expect(out.rejected).toBe(7);
    expect(out.rejectReasons).toEqual([
      'span with a trace id that is not 16 bytes (32 hex characters)',
      'span with an all-zero trace id',
      'span with an all-zero span id',
      'span with a span id that is not 8 bytes (16 hex characters)',
      'span with a parent span id that is neither empty nor 8 bytes',
    ]);
  });

  it('cuts long attribute strings, event attributes and the status message', () => {
    const long = `${'a'.repeat(99)}🚀🚀`;
    const text = oneSpan({
      attributes: [{ key: 'k', value: { arrayValue: { values: [{ stringValue: long }] } } }],
      events: [{ name: 'e', attributes: [{ key: 'k', value: { stringValue: long } }] }],
      status: { code: 2, message: long },
    });
    const [span] = decodeOtlpJson(text, { maxAttributeBytes: 102 }).spans;
    const cut = `${'a'.repeat(99)}…[truncated 8 bytes]`;
    expect(span!.attributes.k).toEqual([cut]);
    expect(span!.events[0]!.attributes.k).toBe(cut);
    expect(span!.status.message).toBe(cut);
  });

  it('fails malformed JSON with its position only, never the content', () => {
    for (const text of ['{"resourceSpans": [sk-SECRET]}', '{"a": "sk-SECRET"', '', 'sk-SECRET']) {
      const { message } = failure(text);
      expect(message).toMatch(/^OTLP\/JSON body is not valid JSON/);
      expect(message).not.toContain('SECRET');
    }
    expect(failure('{"a": "sk-SECRET"').message).toBe(
      'OTLP/JSON body is not valid JSON (at position 17)',
    );
  });

  it('fails a wrong shape with the field path, never the content', () => {
    const cases: [string, string][] = [
      ['[]', 'OTLP/JSON body is not an ExportTraceServiceRequest: the body must be a JSON object'],
      [
        '"sk-SECRET"',
        'OTLP/JSON body is not an ExportTraceServiceRequest: the body must be a JSON object',
      ],
      [
        '{"resourceSpans": {"sk-SECRET": 1}}',
        'OTLP/JSON body is not an ExportTraceServiceRequest: resourceSpans must be an array',
      ],
      [
        oneSpan({ name: 42, attributes: [{ key: 'sk-SECRET', value: { stringValue: 'x' } }] }),
        'OTLP/JSON body is not an ExportTraceServiceRequest: resourceSpans[0].scopeSpans[0].spans[0]: name must be a string',
      ],
      [
        oneSpan({
          attributes: [
            { key: 'ok', value: { stringValue: 'x' } },
            { key: 'sk-SECRET', value: { intValue: 'sk-SECRET' } },
          ],
        }),
        'OTLP/JSON body is not an ExportTraceServiceRequest: resourceSpans[0].scopeSpans[0].spans[0].attributes[1]: intValue must be a 64-bit integer',
      ],
      [
        oneSpan({ attributes: [{ key: 'k', value: { intValue: '9223372036854775808' } }] }),
        'OTLP/JSON body is not an ExportTraceServiceRequest: resourceSpans[0].scopeSpans[0].spans[0].attributes[0]: intValue must be a 64-bit integer',
      ],
      [
        oneSpan({ startTimeUnixNano: '-1' }),
        'OTLP/JSON body is not an ExportTraceServiceRequest: resourceSpans[0].scopeSpans[0].spans[0]: startTimeUnixNano must be an unsigned 64-bit integer',
      ],
      [
        oneSpan({
          events: [{}, { attributes: [{ key: 'k', value: { bytesValue: 'not base64!' } }] }],
        }),
        'OTLP/JSON body is not an ExportTraceServiceRequest: resourceSpans[0].scopeSpans[0].spans[0].events[1].attributes[0]: bytesValue must be base64',
      ],
    ];
    for (const [text, expected] of cases) {
      const { message, details } = failure(text);
      expect(message).toBe(expected);
      expect(JSON.stringify(details)).not.toContain('SECRET');
    }
  });

  it('limits AnyValue nesting depth', () => {
    const nest = (depth: number): unknown => {
      let v: unknown = { stringValue: 'leaf' };
      for (let i = 0; i < depth; i++) v = { arrayValue: { values: [v] } };
      return v;
    };
    expect(
      decodeOtlpJson(oneSpan({ attributes: [{ key: 'k', value: nest(31) }] }), OPTS).spans,
    ).toHaveLength(1);
    expect(failure(oneSpan({ attributes: [{ key: 'k', value: nest(32) }] })).message).toMatch(
      /attributes\[0\](\.arrayValue\.values\[0\]){32}: attribute values nested too deeply$/,
    );
    // Far deeper than any stack: JSON.parse copes, the decoder stops at the limit.
    const depth = 100_000;
    const deep = `${'{"arrayValue":{"values":['.repeat(depth)}{"stringValue":"x"}${']}}'.repeat(depth)}`;
    const text = oneSpan({ attributes: [{ key: 'k', value: 'DEEP' }] }).replace('"DEEP"', deep);
    expect(failure(text).message).toMatch(/nested too deeply$/);
  });

  it('treats an empty object as an empty request', () => {
    expect(decodeOtlpJson('{}', OPTS)).toEqual({ spans: [], rejected: 0, rejectReasons: [] });
    expect(decodeOtlpJson('{"resourceSpans": null}', OPTS).spans).toEqual([]);
    expect(decodeOtlpJson('\uFEFF{"resourceSpans": []}', OPTS).spans).toEqual([]);
  });
});
