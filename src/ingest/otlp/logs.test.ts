import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isTouchstoneError } from '../../core/index.js';
import { FIXTURES_DIR } from '../conventions/golden.testkit.js';
import { decodeOtlpLogsJson, decodeOtlpLogsProtobuf, truncationMarker } from './index.js';
import {
  any,
  cat,
  fixed32,
  fixed64,
  group,
  hexBytes,
  keyValue,
  ld,
  SPAN_ID,
  TRACE_ID,
  varint,
} from './wire.testkit.js';

const OPTS = { maxAttributeBytes: 64 * 1024 };
const FIXTURE = 'otel-genai-openai-v2-events';

interface RawLogRecord {
  traceId?: Uint8Array;
  spanId?: Uint8Array;
  eventName?: string;
  time?: bigint;
  observed?: bigint;
  /** AnyValue content of the body. */
  body?: Uint8Array;
  /** KeyValue contents. */
  attributes?: Uint8Array[];
  extra?: Uint8Array[];
}

/** A LogRecord message's content (opentelemetry-proto logs/v1 field numbers). */
function logRecord(r: RawLogRecord = {}): Uint8Array {
  return cat(
    ...(r.time === undefined ? [] : [fixed64(1, r.time)]),
    varint(2, 9),
    ld(3, 'INFO'),
    ...(r.body === undefined ? [] : [ld(5, r.body)]),
    ...(r.attributes ?? []).map((kv) => ld(6, kv)),
    fixed32(8, 1),
    ld(9, r.traceId ?? hexBytes(TRACE_ID)),
    ld(10, r.spanId ?? hexBytes(SPAN_ID)),
    fixed64(11, r.observed ?? 1767225600500000000n),
    ...(r.eventName === undefined ? [] : [ld(12, r.eventName)]),
    ...(r.extra ?? []),
  );
}

/** An ExportLogsServiceRequest with one resource and one scope holding `records`. */
function logsRequest(records: Uint8Array[]): Uint8Array {
  return ld(
    1,
    ld(1, ld(1, keyValue('service.name', any.string('agent')))),
    ld(2, ld(1, ld(1, 'opentelemetry.instrumentation.openai_v2')), ...records.map((r) => ld(2, r))),
  );
}

const kv = (key: string, value: Uint8Array) => ld(1, keyValue(key, value));
const userMessage = (content: string) =>
  logRecord({
    eventName: 'gen_ai.user.message',
    body: any.kvlist(kv('content', any.string(content))),
    attributes: [keyValue('gen_ai.system', any.string('openai'))],
  });

function expectDecodeFailure(fn: () => unknown, forbidden: string[] = []): string {
  try {
    fn();
  } catch (err) {
    if (!isTouchstoneError(err)) throw err;
    expect(err.code).toBe('OTLP_DECODE_FAILED');
    for (const f of forbidden) expect(err.message).not.toContain(f);
    return err.message;
  }
  throw new Error('expected OTLP_DECODE_FAILED');
}

describe('OTLP logs decoding (GenAI events as log records)', () => {
  it('reads the log records opentelemetry-instrumentation-openai-v2 sent, the same from protobuf and JSON', () => {
    const pb = decodeOtlpLogsProtobuf(
      new Uint8Array(readFileSync(join(FIXTURES_DIR, `${FIXTURE}.logs.1.pb`))),
      OPTS,
    );
    const json = decodeOtlpLogsJson(
      readFileSync(join(FIXTURES_DIR, `${FIXTURE}.logs.json`), 'utf8'),
      OPTS,
    );
    expect(json).toEqual(pb);
    expect(pb).toMatchObject({ rejected: 0, rejectReasons: [], ignored: 0 });
    expect(pb.events.map((e) => e.event.name).slice(0, 3)).toEqual([
      'gen_ai.system.message',
      'gen_ai.user.message',
      'gen_ai.choice',
    ]);
    const choice = pb.events[2]!;
    expect(choice.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(choice.spanId).toMatch(/^[0-9a-f]{16}$/);
    // The body's fields sit beside the record's attributes, as on a span event; the record has
    // no time of its own, so the time it was observed orders it.
    expect(choice.event).toMatchObject({
      timeUnixNano: expect.stringMatching(/^17\d{17}$/),
      attributes: {
        'gen_ai.system': 'openai',
        index: 0,
        finish_reason: 'tool_calls',
        message: {
          role: 'assistant',
          tool_calls: [
            {
              id: 'call_get_weather_1',
              type: 'function',
              function: { name: 'get_weather', arguments: '{"city": "Paris"}' },
            },
          ],
        },
      },
    });
  });

  it('keeps GenAI events only, refuses those no span can be found for, ignores other records', () => {
    const out = decodeOtlpLogsProtobuf(
      logsRequest([
        userMessage('kept'),
        // Older SDKs name the event in an attribute.
        logRecord({
          attributes: [keyValue('event.name', any.string('gen_ai.choice'))],
          body: any.kvlist(kv('index', any.int(0))),
          time: 1767225600100000000n,
        }),
        logRecord({ body: any.string('GET /healthz 200') }),
        logRecord({ eventName: 'app.started' }),
        logRecord({ eventName: 'gen_ai.user.message', traceId: new Uint8Array(16) }),
        logRecord({ eventName: 'gen_ai.user.message', traceId: hexBytes('abcd') }),
        logRecord({ eventName: 'gen_ai.choice', spanId: new Uint8Array(0) }),
        logRecord({ body: any.string('no ids, not an event'), traceId: new Uint8Array(0) }),
      ]),
      OPTS,
    );
    expect(out.events.map((e) => [e.traceId, e.spanId, e.event.name])).toEqual([
      [TRACE_ID, SPAN_ID, 'gen_ai.user.message'],
      [TRACE_ID, SPAN_ID, 'gen_ai.choice'],
    ]);
    expect(out.events[0]?.event.attributes).toEqual({ 'gen_ai.system': 'openai', content: 'kept' });
    expect(out.events[1]?.event).toEqual({
      name: 'gen_ai.choice',
      timeUnixNano: '1767225600100000000',
      attributes: { 'event.name': 'gen_ai.choice', index: 0 },
    });
    expect(out.rejected).toBe(3);
    expect(out.rejectReasons).toEqual([
      'GenAI event log record without a trace id of 16 non-zero bytes',
      'GenAI event log record without a span id of 8 non-zero bytes',
    ]);
    expect(out.ignored).toBe(3);
  });

  it('keeps a body that is not a map whole, under `body`', () => {
    const out = decodeOtlpLogsProtobuf(
      logsRequest([
        logRecord({ eventName: 'gen_ai.content.prompt', body: any.string('[{"role": "user"}]') }),
      ]),
      OPTS,
    );
    expect(out.events[0]?.event.attributes).toEqual({ body: '[{"role": "user"}]' });
  });

  it('applies the attribute size cap to bodies and skips unknown fields of every wire type', () => {
    const long = 'x'.repeat(100);
    const out = decodeOtlpLogsProtobuf(
      logsRequest([
        logRecord({
          eventName: 'gen_ai.user.message',
          body: any.kvlist(kv('content', any.string(long))),
          extra: [varint(99, 7), ld(98, 'opaque'), fixed32(97, 1), fixed64(96, 1n), group(95)],
        }),
      ]),
      { maxAttributeBytes: 10 },
    );
    expect(out.events[0]?.event.attributes.content).toBe(
      `${'x'.repeat(10)}${truncationMarker(90)}`,
    );
  });

  it('keeps at most max_attributes_per_event attributes of a record, counting the rest as dropped', () => {
    const limits = {
      maxAttributesPerSpan: 128,
      maxEventsPerSpan: 128,
      maxLinksPerSpan: 128,
      maxAttributesPerEvent: 3,
      maxAttributesPerLink: 128,
    };
    const attributes = Array.from({ length: 10 }, (_, i) => keyValue(`a${i}`, any.int(i)));
    const pb = decodeOtlpLogsProtobuf(
      logsRequest([
        logRecord({ eventName: 'gen_ai.user.message', attributes, extra: [varint(7, 2)] }),
      ]),
      { ...OPTS, limits },
    );
    expect(Object.keys(pb.events[0]?.event.attributes ?? {})).toEqual(['a0', 'a1', 'a2']);
    expect(pb.events[0]?.event.droppedAttributesCount).toBe(9);
    const json = decodeOtlpLogsJson(
      JSON.stringify({
        resourceLogs: [
          {
            scopeLogs: [
              {
                logRecords: [
                  {
                    traceId: TRACE_ID,
                    spanId: SPAN_ID,
                    eventName: 'gen_ai.user.message',
                    droppedAttributesCount: 2,
                    attributes: Array.from({ length: 10 }, (_, i) => ({
                      key: `a${i}`,
                      value: { intValue: String(i) },
                    })),
                  },
                ],
              },
            ],
          },
        ],
      }),
      { ...OPTS, limits },
    );
    expect(json.events[0]?.event.attributes).toEqual(pb.events[0]?.event.attributes);
    expect(json.events[0]?.event.droppedAttributesCount).toBe(9);
  });

  it('fails undecodable bodies with OTLP_DECODE_FAILED naming the offset, never the content', () => {
    const secret = 'sk-SECRET-0123456789';
    const valid = logsRequest([userMessage(secret)]);
    expect(decodeOtlpLogsProtobuf(valid, OPTS).events).toHaveLength(1);
    let failures = 0;
    for (let n = 1; n < valid.length; n++) {
      try {
        decodeOtlpLogsProtobuf(valid.subarray(0, n), OPTS);
      } catch {
        failures++;
        expect(
          expectDecodeFailure(() => decodeOtlpLogsProtobuf(valid.subarray(0, n), OPTS), [secret]),
        ).toMatch(/logs body could not be decoded: .+ at byte offset \d+$/);
      }
    }
    expect(failures).toBeGreaterThan(0);
    // A known field with the wrong wire type, and AnyValues nested beyond the cap.
    expectDecodeFailure(() => decodeOtlpLogsProtobuf(logsRequest([cat(varint(12, 1))]), OPTS));
    let deep = any.string('x');
    for (let i = 0; i < 40; i++) deep = any.array(deep);
    expectDecodeFailure(() =>
      decodeOtlpLogsProtobuf(
        logsRequest([logRecord({ eventName: 'gen_ai.choice', body: deep })]),
        OPTS,
      ),
    );
  });

  it('reads OTLP/JSON as exporters write it: snake_case, base64 ids, numbers, nulls', () => {
    const b64 = (hex: string) => Buffer.from(hex, 'hex').toString('base64');
    const out = decodeOtlpLogsJson(
      JSON.stringify({
        resource_logs: [
          {
            resource: null,
            scope_logs: [
              {
                log_records: [
                  {
                    trace_id: b64(TRACE_ID),
                    span_id: SPAN_ID.toUpperCase(),
                    event_name: 'gen_ai.tool.message',
                    time_unix_nano: 1767225600000000000,
                    body: {
                      kvlist_value: { values: [{ key: 'id', value: { string_value: 'c1' } }] },
                    },
                    attributes: null,
                    unknown: { anything: true },
                  },
                  { traceId: TRACE_ID, spanId: SPAN_ID, body: { stringValue: 'plain log' } },
                  { traceId: '', spanId: SPAN_ID, eventName: 'gen_ai.choice' },
                ],
              },
            ],
          },
        ],
      }),
      OPTS,
    );
    expect(out.events).toEqual([
      {
        traceId: TRACE_ID,
        spanId: SPAN_ID,
        event: {
          name: 'gen_ai.tool.message',
          timeUnixNano: '1767225600000000000',
          attributes: { id: 'c1' },
        },
      },
    ]);
    expect(out).toMatchObject({ rejected: 1, ignored: 1 });
  });

  it('fails malformed OTLP/JSON with a position or a field path, never the content', () => {
    const secret = 'sk-SECRET-0123456789';
    expect(
      expectDecodeFailure(() => decodeOtlpLogsJson(`{"resourceLogs": [${secret}`, OPTS), [secret]),
    ).toMatch(/not valid JSON/);
    const shape = expectDecodeFailure(
      () =>
        decodeOtlpLogsJson(
          JSON.stringify({ resourceLogs: [{ scopeLogs: [{ logRecords: [{ eventName: 7 }] }] }] }),
          OPTS,
        ),
      [secret],
    );
    expect(shape).toBe(
      'OTLP/JSON body is not an ExportLogsServiceRequest: resourceLogs[0].scopeLogs[0].logRecords[0]: eventName must be a string',
    );
    expectDecodeFailure(() => decodeOtlpLogsJson('[]', OPTS));
    expectDecodeFailure(() => decodeOtlpLogsJson('{"resourceLogs": {}}', OPTS));
    expect(decodeOtlpLogsJson('{}', OPTS)).toEqual({
      events: [],
      rejected: 0,
      rejectReasons: [],
      ignored: 0,
    });
  });
});
