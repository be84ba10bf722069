import { describe, expect, it } from 'vitest';
import { isTouchstoneError, type Span } from '../../core/index.js';
import {
  decodeOtlpJson,
  decodeOtlpProtobuf,
  decodeOtlpProtobufInSlices,
  truncationMarker,
} from './index.js';
import {
  genAiSpans,
  overrideSpan,
  type ReadableSpan,
  recorder,
  SMALL_COUNT_LIMITS,
  SpanStatusCode,
  sdkTrace,
  toJson,
  toProtobuf,
  WITHIN_SMALL_COUNT_LIMITS,
} from './otel-spans.testkit.js';
import {
  any,
  cat,
  fixed32,
  fixed64,
  group,
  hexBytes,
  keyValue,
  ld,
  request,
  SPAN_ID,
  span,
  TRACE_ID,
  varint,
} from './wire.testkit.js';

const OPTS = { maxAttributeBytes: 64 * 1024 };

function expectDecodeFailure(fn: () => unknown, forbidden: string[] = []): string {
  try {
    fn();
  } catch (err) {
    if (!isTouchstoneError(err)) throw err;
    expect(err.code).toBe('OTLP_DECODE_FAILED');
    expect(err.kind).toBe('invalid_argument');
    for (const f of forbidden) expect(err.message).not.toContain(f);
    return err.message;
  }
  throw new Error('expected OTLP_DECODE_FAILED');
}

describe('decodeOtlpProtobuf on bodies from the OpenTelemetry JS serializer', () => {
  it('decodes ids, exact times, kinds, attributes, events, links, status, scope and resource', async () => {
    const { root, child, other } = await sdkTrace();
    const out = decodeOtlpProtobuf(toProtobuf([other, child, root]), OPTS);
    expect(out.rejected).toBe(0);
    expect(out.rejectReasons).toEqual([]);
    expect(out.spans).toHaveLength(3);
    const resource = {
      'service.name': 'travel-app',
      'service.instance.id': 'i-1',
      'process.pid': 4242,
    };
    const scope = { name: 'openinference.instrumentation.openai_agents', version: '1.4.0' };
    const rootSpan: Span = {
      traceId: root.spanContext().traceId,
      spanId: root.spanContext().spanId,
      parentSpanId: '',
      name: 'travel-helper',
      kind: 2,
      startTimeUnixNano: '1767225600123456789',
      endTimeUnixNano: '1767225602400000001',
      attributes: {
        'openinference.span.kind': 'AGENT',
        'llm.token_count.prompt': 120,
        negative: -42,
        ratio: 0.25,
        ok: true,
        'tag.tags': ['travel', 'paris'],
        ints: [1, 2, 3],
        flags: [true, false],
        doubles: [1.5, -2.25],
      },
      events: [
        {
          name: 'exception',
          timeUnixNano: '1767225601999999999',
          attributes: { 'exception.message': 'rate limited', attempt: 2 },
        },
      ],
      links: [
        {
          traceId: other.spanContext().traceId,
          spanId: other.spanContext().spanId,
          attributes: { 'link.reason': 'follows' },
        },
      ],
      status: { code: 2, message: 'rate limited' },
      resource,
      scope,
    };
    expect(out.spans[2]).toEqual(rootSpan);
    expect(out.spans[1]).toEqual({
      traceId: root.spanContext().traceId,
      spanId: child.spanContext().spanId,
      parentSpanId: root.spanContext().spanId,
      name: 'chat gpt-4o-mini',
      kind: 3,
      startTimeUnixNano: '1767225600200000000',
      endTimeUnixNano: '1767225602000000001',
      attributes: {},
      events: [],
      links: [],
      status: { code: 1, message: '' },
      resource,
      scope,
    });
    expect(out.spans[0]).toMatchObject({
      name: 'other-trace',
      kind: 1,
      startTimeUnixNano: '1767225500000000000',
      endTimeUnixNano: '1767225500000000005',
      status: { code: 0, message: '' },
    });
    expect(root.spanContext().traceId).toMatch(/^[0-9a-f]{32}$/);
  });

  it('shares one resource object per resource and one scope object per scope', async () => {
    const a = recorder({ resource: { 'service.name': 'a' } });
    const b = recorder({ resource: { 'service.name': 'b' } });
    for (const r of [a, b]) {
      r.tracer.startSpan('one').end();
      r.tracer.startSpan('two').end();
    }
    const spans = [...(await a.finish()), ...(await b.finish())];
    const out = decodeOtlpProtobuf(toProtobuf(spans), OPTS).spans;
    expect(out.map((s) => s.resource['service.name'])).toEqual(['a', 'a', 'b', 'b']);
    expect(out[0]!.resource).toBe(out[1]!.resource);
    expect(out[2]!.resource).toBe(out[3]!.resource);
    expect(out[0]!.resource).not.toBe(out[2]!.resource);
    expect(out[0]!.scope).toBe(out[1]!.scope);
    expect(out[0]!.scope).toEqual({ name: 'touchstone-test', version: '1.0.0' });
  });

  it('decodes kvlists, bytes, mixed arrays and int64 values beyond 2^53', async () => {
    const { root } = await sdkTrace();
    const bytes = new Uint8Array([0, 1, 2, 250, 255]);
    const span = overrideSpan(root, {
      attributes: {
        big: 2 ** 60,
        bigNegative: -(2 ** 60),
        twoTo53: 2 ** 53,
        maxSafe: Number.MAX_SAFE_INTEGER,
        minSafe: Number.MIN_SAFE_INTEGER,
        int64Min: -(2 ** 63),
        bytes,
        nested: { model: 'gpt-4o', params: { temperature: 0.2, n: 1 }, stop: ['\n', 'END'] },
        mixed: ['a', 1, true, 2.5, { k: 'v' }, [1, [2]]],
        empty: [],
        emptyObject: {},
      },
    });
    const out = decodeOtlpProtobuf(toProtobuf([span]), OPTS).spans[0]!;
    expect(out.attributes).toEqual({
      big: '1152921504606846976',
      bigNegative: '-1152921504606846976',
      twoTo53: '9007199254740992',
      maxSafe: Number.MAX_SAFE_INTEGER,
      minSafe: Number.MIN_SAFE_INTEGER,
      int64Min: '-9223372036854775808',
      bytes,
      nested: { model: 'gpt-4o', params: { temperature: 0.2, n: 1 }, stop: ['\n', 'END'] },
      mixed: ['a', 1, true, 2.5, { k: 'v' }, [1, [2]]],
      empty: [],
      emptyObject: {},
    });
    expect(out.attributes.bytes).toBeInstanceOf(Uint8Array);
    // A copy, not a view that would keep the whole request body alive.
    expect((out.attributes.bytes as Uint8Array).buffer.byteLength).toBe(5);
  });

  it('refuses the span with an all-zero trace id and keeps the others', async () => {
    const { root, child, other } = await sdkTrace();
    const zero = overrideSpan(child, { traceId: '0'.repeat(32) });
    const out = decodeOtlpProtobuf(toProtobuf([other, zero, root]), OPTS);
    expect(out.spans.map((s) => s.name)).toEqual(['other-trace', 'travel-helper']);
    expect(out.rejected).toBe(1);
    expect(out.rejectReasons).toEqual(['span with an all-zero trace id']);
  });

  it('cuts long strings on a character boundary and says how many bytes it removed', async () => {
    const { root } = await sdkTrace();
    // 2 MB: 'é' is 2 bytes, so a 1001-byte cap falls in the middle of a character.
    const long = `${'é'.repeat(1_000_000)}tail`;
    const span = overrideSpan(root, {
      attributes: { long, nested: { inner: [long] }, short: 'short' },
    });
    const ended = Object.create(span, {
      events: { value: [{ name: 'e', time: [1767225601, 0], attributes: { long } }] },
      status: { value: { code: SpanStatusCode.ERROR, message: long } },
    }) as ReadableSpan;
    const max = 1001;
    const out = decodeOtlpProtobuf(toProtobuf([ended]), { maxAttributeBytes: max }).spans[0]!;
    const cut = `${'é'.repeat(500)}${truncationMarker(2_000_004 - 1000)}`;
    expect(out.attributes.long).toBe(cut);
    expect(out.attributes.nested).toEqual({ inner: [cut] });
    expect(out.attributes.short).toBe('short');
    expect(out.events[0]!.attributes.long).toBe(cut);
    expect(out.status.message).toBe(cut);
    expect(out.name).toBe('travel-helper');
    // The same through OTLP/JSON.
    const json = decodeOtlpJson(toJson([ended]), { maxAttributeBytes: max }).spans[0]!;
    expect(json).toEqual(out);
  });

  it('decodes 100k spans in one request correctly and fast', async () => {
    const base = await genAiSpans(2000);
    // 50 serialized copies of the same 2000 spans, each copy's span ids rewritten in place, joined
    // into one request (protobuf appends repeated fields of concatenated messages). Serializing
    // 100k spans with the SDK took 7 s of the test's time on a quiet machine, several times that
    // under load, and is not what this test is about.
    const one = Buffer.from(toProtobuf(base));
    // Span.span_id: field 2, length-delimited, 8 bytes; the spans are serialized in order.
    let from = 0;
    const idOffsets = base.map((s) => {
      const at = one.indexOf(Buffer.from(`1208${s.spanContext().spanId}`, 'hex'), from);
      expect(at).toBeGreaterThanOrEqual(0);
      from = at + 10;
      return at + 2;
    });
    const body = Buffer.allocUnsafe(50 * one.length);
    for (let copy = 0; copy < 50; copy++) {
      const start = copy * one.length;
      one.copy(body, start);
      idOffsets.forEach((at, i) => {
        const id = (copy * base.length + i + 1).toString(16).padStart(16, '0');
        body.write(id, start + at, 'hex');
      });
    }
    const reference = decodeOtlpProtobuf(one, OPTS).spans;
    // CPU time, not wall-clock time: a loaded machine stretches the second, not the first.
    const cpu = process.cpuUsage();
    const out = decodeOtlpProtobuf(body, OPTS);
    const used = process.cpuUsage(cpu);
    const ms = (used.user + used.system) / 1000;
    expect(out.rejected).toBe(0);
    expect(out.spans).toHaveLength(100_000);
    for (let k = 0; k < out.spans.length; k += 997) {
      const s = out.spans[k]!;
      expect(s.spanId).toBe((k + 1).toString(16).padStart(16, '0'));
      expect({ ...s, spanId: '' }).toEqual({ ...reference[k % base.length]!, spanId: '' });
    }
    // ≈1 s of CPU on the 2-core machine; a quadratic path would take minutes.
    expect(ms).toBeLessThan(10_000);
    console.log(
      `100k spans (${(body.length / 1e6).toFixed(1)} MB) decoded in ${ms.toFixed(0)} ms of CPU`,
    );
  });
});

describe('decodeOtlpProtobuf on hand-built bodies', () => {
  it('replaces invalid UTF-8 with U+FFFD instead of failing', () => {
    const bad = new Uint8Array([0x61, 0xff, 0x62, 0xc3]);
    const out = decodeOtlpProtobuf(
      request([
        span({
          name: 'n',
          attributes: [keyValue('k', any.string(bad)), keyValue(bad, any.int(1))],
        }),
      ]),
      OPTS,
    );
    expect(out.spans[0]!.attributes).toEqual({ k: 'a\uFFFDb\uFFFD', 'a\uFFFDb\uFFFD': 1 });
  });

  it('cuts invalid UTF-8 to the cap after replacement, with one marker', () => {
    const bad = new Uint8Array(100).fill(0xff);
    const out = decodeOtlpProtobuf(
      request([
        span({
          attributes: [
            keyValue('long', any.string(bad)),
            keyValue('short', any.string(bad.subarray(0, 5))),
          ],
        }),
      ]),
      { maxAttributeBytes: 10 },
    ).spans[0]!;
    // 10 raw bytes kept decode to 10 × U+FFFD (30 bytes): 3 characters fit in 10 bytes.
    expect(out.attributes.long).toBe(`\uFFFD\uFFFD\uFFFD${truncationMarker(90 + 21)}`);
    // 5 raw bytes fit the cap but decode to 15 bytes: cut the same way.
    expect(out.attributes.short).toBe(`\uFFFD\uFFFD\uFFFD${truncationMarker(6)}`);
  });

  it('skips unknown fields of every wire type, including groups', () => {
    const unknown = [
      varint(100, 123456789012345n),
      fixed64(101, 5n),
      fixed32(102, 7),
      ld(103, 'ignored'),
      group(104, varint(1, 1), group(2, ld(3, 'x'))),
    ];
    const body = cat(
      ...unknown,
      ld(
        1,
        ...unknown,
        ld(
          2,
          ...unknown,
          ld(
            2,
            span({
              attributes: [cat(keyValue('a', cat(any.int(5), ...unknown)), ...unknown)],
              extra: unknown,
            }),
          ),
        ),
      ),
    );
    const out = decodeOtlpProtobuf(body, OPTS);
    expect(out.spans).toHaveLength(1);
    expect(out.spans[0]!.attributes).toEqual({ a: 5 });
  });

  it('fills the shared resource even when it follows the spans on the wire', () => {
    const body = ld(
      1,
      ld(2, ld(2, span()), ld(2, span({ spanId: hexBytes('0000000000000001') }))),
      ld(1, ld(1, keyValue('service.name', any.string('late')))),
    );
    const out = decodeOtlpProtobuf(body, OPTS).spans;
    expect(out).toHaveLength(2);
    expect(out[0]!.resource).toEqual({ 'service.name': 'late' });
    expect(out[1]!.resource).toBe(out[0]!.resource);
    expect(out[0]!.scope).toEqual({ name: '', version: '' });
  });

  it('refuses spans with malformed ids one by one, with each reason once', () => {
    const good = span({ name: 'good' });
    const out = decodeOtlpProtobuf(
      request([
        span({ traceId: new Uint8Array(15).fill(1) }),
        span({ traceId: new Uint8Array(0) }),
        span({ spanId: new Uint8Array(8) }),
        span({ spanId: new Uint8Array(9).fill(1) }),
        span({ parentSpanId: new Uint8Array(4).fill(1) }),
        span({ extra: [ld(13, ld(1, new Uint8Array(16)), ld(2, hexBytes(SPAN_ID)))] }),
        good,
        span({ traceId: new Uint8Array(16) }),
      ]),
      OPTS,
    );
    expect(out.spans.map((s) => s.name)).toEqual(['good']);
    expect(out.rejected).toBe(7);
    expect(out.rejectReasons).toEqual([
      'span with a trace id that is not 16 bytes (32 hex characters)',
      'span with an all-zero span id',
      'span with a span id that is not 8 bytes (16 hex characters)',
      'span with a parent span id that is neither empty nor 8 bytes',
      'span with a link whose trace id is not 16 non-zero bytes',
      'span with an all-zero trace id',
    ]);
  });

  it('reads an all-zero parent span id as a root, and maps unknown enum values to 0', () => {
    const out = decodeOtlpProtobuf(
      request([
        span({
          parentSpanId: new Uint8Array(8),
          kind: 9,
          extra: [ld(15, varint(3, 7), ld(2, 'msg'))],
        }),
      ]),
      OPTS,
    ).spans[0]!;
    expect(out.parentSpanId).toBe('');
    expect(out.kind).toBe(0);
    expect(out.status).toEqual({ code: 0, message: 'msg' });
    expect(out.traceId).toBe(TRACE_ID);
    expect(out.spanId).toBe(SPAN_ID);
  });

  it('keeps the dropped counts a sender reports on spans, events and links', () => {
    const [out] = decodeOtlpProtobuf(
      request([
        span({
          extra: [
            varint(10, 3),
            ld(11, fixed64(1, 5n), ld(2, 'e'), varint(4, 4)),
            ld(11, ld(2, 'clean'), varint(4, 0)),
            varint(12, 2),
            ld(13, ld(1, hexBytes(TRACE_ID)), ld(2, hexBytes(SPAN_ID)), varint(5, 6)),
            varint(14, 1),
          ],
        }),
        span({ spanId: hexBytes('0102030405060708'), extra: [varint(10, 0)] }),
      ]),
      OPTS,
    ).spans;
    expect(out).toMatchObject({
      droppedAttributesCount: 3,
      droppedEventsCount: 2,
      droppedLinksCount: 1,
      events: [{ name: 'e', droppedAttributesCount: 4 }, { name: 'clean' }],
      links: [{ droppedAttributesCount: 6 }],
    });
    expect(out!.events[1]).not.toHaveProperty('droppedAttributesCount');
    const clean = decodeOtlpProtobuf(request([span({ extra: [varint(10, 0)] })]), OPTS).spans[0];
    expect(clean).not.toHaveProperty('droppedAttributesCount');
    expect(clean).not.toHaveProperty('droppedEventsCount');
  });

  it('skips what is over the count limits unread and counts it as dropped', () => {
    const link = (...extra: Uint8Array[]) =>
      ld(13, ld(1, hexBytes(TRACE_ID)), ld(2, hexBytes(SPAN_ID)), ...extra);
    const [out] = decodeOtlpProtobuf(
      request([
        span({
          attributes: [
            keyValue('a', any.int(1)),
            keyValue('b', any.int(2)),
            keyValue('c', any.int(3)),
            // Past the limit, so never read: not even its bad wire type fails the request.
            cat(ld(1, 'd'), varint(2, 1)),
          ],
          extra: [
            varint(10, 5),
            ld(11, ld(2, 'e1'), ld(3, keyValue('x', any.int(1))), ld(3, keyValue('y', any.int(2)))),
            ld(11, ld(2, 'e2')),
            link(ld(4, keyValue('x', any.int(1))), ld(4, keyValue('y', any.int(2))), varint(5, 1)),
            // A link with a zero trace id past the limit does not refuse the span.
            ld(13, ld(1, new Uint8Array(16)), ld(2, hexBytes(SPAN_ID))),
          ],
        }),
      ]),
      { ...OPTS, limits: SMALL_COUNT_LIMITS },
    ).spans;
    expect(out).toMatchObject(WITHIN_SMALL_COUNT_LIMITS);
    expect(out!.attributes).not.toHaveProperty('c');
  });

  it('keeps every fixed64 time exact and every int64 exact', () => {
    const times = [
      0n,
      1n,
      2n ** 53n - 1n,
      2n ** 53n,
      2n ** 53n + 1n,
      1767225600123456789n,
      2n ** 64n - 1n,
    ];
    const ints = [
      0n,
      -1n,
      2n ** 53n - 1n,
      -(2n ** 53n - 1n),
      2n ** 53n,
      -(2n ** 53n),
      2n ** 63n - 1n,
      -(2n ** 63n),
    ];
    const out = decodeOtlpProtobuf(
      request(
        times.map((t, i) =>
          span({
            spanId: hexBytes(`00000000000000${(i + 1).toString(16).padStart(2, '0')}`),
            start: t,
            end: t,
            attributes: ints.map((v, j) => keyValue(`i${j}`, any.int(v))),
          }),
        ),
      ),
      OPTS,
    ).spans;
    expect(out.map((s) => s.startTimeUnixNano)).toEqual(times.map(String));
    expect(out[0]!.attributes).toEqual({
      i0: 0,
      i1: -1,
      i2: Number.MAX_SAFE_INTEGER,
      i3: Number.MIN_SAFE_INTEGER,
      i4: '9007199254740992',
      i5: '-9007199254740992',
      i6: '9223372036854775807',
      i7: '-9223372036854775808',
    });
  });

  it('omits empty AnyValues (also inside arrays and kvlists) and keeps __proto__ as a plain key', () => {
    const out = decodeOtlpProtobuf(
      request([
        span({
          attributes: [
            keyValue('empty', new Uint8Array(0)),
            keyValue('arr', any.array(new Uint8Array(0), any.bool(true))),
            keyValue(
              'kv',
              any.kvlist(
                ld(1, keyValue('gone', new Uint8Array(0))),
                ld(1, keyValue('d', any.double(0.5))),
              ),
            ),
            keyValue('__proto__', any.string('polluted')),
          ],
        }),
      ]),
      OPTS,
    ).spans[0]!;
    expect(Object.keys(out.attributes)).toEqual(['arr', 'kv', '__proto__']);
    expect(out.attributes.arr).toEqual([true]);
    expect(out.attributes.kv).toEqual({ d: 0.5 });
    expect(Object.getPrototypeOf(out.attributes)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(out.attributes, '__proto__')?.value).toBe('polluted');
  });

  it('fails undecodable bodies with OTLP_DECODE_FAILED naming the offset, never the content', () => {
    const secret = 'sk-SECRET-0123456789';
    const valid = request([
      span({ name: secret, attributes: [keyValue('k', any.string(secret))] }),
    ]);
    expect(decodeOtlpProtobuf(valid, OPTS).spans).toHaveLength(1);

    // Every truncation either decodes (it ended on a top-level field boundary) or fails cleanly.
    for (let n = 1; n < valid.length; n++) {
      try {
        decodeOtlpProtobuf(valid.subarray(0, n), OPTS);
      } catch (err) {
        if (!isTouchstoneError(err)) throw err;
        expect(err.code).toBe('OTLP_DECODE_FAILED');
        expect(err.message).toMatch(/at byte offset \d+$/);
        expect(err.message).not.toContain('SECRET');
      }
    }
    expect(
      expectDecodeFailure(() => decodeOtlpProtobuf(valid.subarray(0, 40), OPTS), ['SECRET']),
    ).toMatch(/length beyond the end of the body at byte offset 1$/);
    // Wire type 7 does not exist; 6 neither.
    expect(expectDecodeFailure(() => decodeOtlpProtobuf(new Uint8Array([0x0f]), OPTS))).toMatch(
      /invalid wire type at byte offset 0/,
    );
    expect(expectDecodeFailure(() => decodeOtlpProtobuf(new Uint8Array([0x00]), OPTS))).toMatch(
      /field number 0/,
    );
    // A known field with the wrong wire type.
    expect(expectDecodeFailure(() => decodeOtlpProtobuf(varint(1, 5), OPTS))).toMatch(
      /wrong wire type/,
    );
    // A length larger than the body.
    expect(
      expectDecodeFailure(() =>
        decodeOtlpProtobuf(new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]), OPTS),
      ),
    ).toMatch(/length beyond the end of the body/);
    // A nested field that runs past the end of its message.
    const overrun = ld(
      1,
      ld(2, cat(new Uint8Array([0x12, 0x08]), ld(1, 'abc'))),
      ld(3, 'schema-url-padding'),
    );
    expect(expectDecodeFailure(() => decodeOtlpProtobuf(overrun, OPTS))).toMatch(
      /runs past the end of its message/,
    );
    // An unterminated varint.
    expect(
      expectDecodeFailure(() =>
        decodeOtlpProtobuf(new Uint8Array([0x08 | 0x80, 0xff, 0xff]), OPTS),
      ),
    ).toMatch(/varint/);
  });

  it('decodes in slices, pausing between them, to what it decodes at once', async () => {
    const text = 'The flight to Paris leaves at seven. '.repeat(100);
    const body = request(
      Array.from({ length: 1000 }, (_, i) =>
        span({
          spanId: hexBytes((i + 1).toString(16).padStart(16, '0')),
          attributes: [keyValue('input.value', any.string(text))],
        }),
      ),
      [keyValue('service.name', any.string('svc'))],
    );
    let pauses = 0;
    const pause = async () => {
      pauses++;
    };
    const sliced = await decodeOtlpProtobufInSlices(body, OPTS, pause);
    // 3.7 MB of spans, a pause every 256 KiB.
    expect(pauses).toBeGreaterThanOrEqual(12);
    expect(sliced).toEqual(decodeOtlpProtobuf(body, OPTS));
    expect(sliced.spans[999]!.resource).toBe(sliced.spans[0]!.resource);

    const cut = body.subarray(0, body.length - 10);
    const failure = await decodeOtlpProtobufInSlices(cut, OPTS, pause).catch((err) => err);
    expect(failure.code).toBe('OTLP_DECODE_FAILED');
    expect(failure.message).toBe(expectDecodeFailure(() => decodeOtlpProtobuf(cut, OPTS)));
  });

  it('limits AnyValue nesting depth', () => {
    const nest = (depth: number): Uint8Array => {
      let v = any.string('leaf');
      for (let i = 0; i < depth; i++) v = any.array(v);
      return v;
    };
    const ok = decodeOtlpProtobuf(
      request([span({ attributes: [keyValue('deep', nest(31))] })]),
      OPTS,
    );
    let v = ok.spans[0]!.attributes.deep;
    for (let i = 0; i < 31; i++) v = (v as unknown[])[0] as typeof v;
    expect(v).toBe('leaf');
    expect(
      expectDecodeFailure(() =>
        decodeOtlpProtobuf(request([span({ attributes: [keyValue('deep', nest(32))] })]), OPTS),
      ),
    ).toMatch(/nested too deeply/);
    // Thousands of levels: refused without a stack overflow.
    expect(
      expectDecodeFailure(() =>
        decodeOtlpProtobuf(request([span({ attributes: [keyValue('deep', nest(3000))] })]), OPTS),
      ),
    ).toMatch(/nested too deeply/);
  });

  it('treats an empty body as an empty request', () => {
    expect(decodeOtlpProtobuf(new Uint8Array(0), OPTS)).toEqual({
      spans: [],
      rejected: 0,
      rejectReasons: [],
    });
  });
});
