/**
 * Fuzz target `otlp`: the four OTLP decoders (traces and logs, protobuf and JSON) on hostile
 * bodies. Protobuf: random bytes, random message trees, well-formed requests with random content,
 * and mutations of real payloads (the OpenTelemetry JS SDK's serializers, recorded Python SDK log
 * exports) including rewritten length prefixes. JSON: text and structural mutations of the same.
 *
 * A failure is any exception other than an OTLP_DECODE_FAILED TouchstoneError, an error message
 * or detail of an unexpected shape (it could echo content), a refusal reason that is not a fixed
 * sentence, or a decoded span or event that breaks its invariants.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type Attributes, isTouchstoneError, type Span } from '../../../src/core/index.js';
import {
  decodeOtlpJson,
  decodeOtlpLogsJson,
  decodeOtlpLogsProtobuf,
  decodeOtlpProtobuf,
} from '../../../src/ingest/otlp/index.js';
import {
  genAiSpans,
  overrideSpan,
  sdkTrace,
  toJson,
  toProtobuf,
} from '../../../src/ingest/otlp/otel-spans.testkit.js';
import {
  any,
  cat,
  fixed32,
  fixed64,
  group,
  keyValue,
  ld,
  request,
  span,
  varint,
} from '../../../src/ingest/otlp/wire.testkit.js';
import type { FuzzTarget, Trial } from './driver.js';
import { type ByteOp, type JsonVocabulary, mutateBytes, mutateJson } from './mutate.js';
import { lengthOp, randomMessage } from './protobuf.js';
import { int, pick, type Rand, randomBytes } from './random.js';

const DECODERS = ['protobuf traces', 'json traces', 'protobuf logs', 'json logs'] as const;
type Decoder = (typeof DECODERS)[number];

interface OtlpInput {
  decoder: Decoder;
  body: Uint8Array | string;
  maxAttributeBytes: number;
  how: string;
}

// ---- generated protobuf requests ------------------------------------------------------------

const STRINGS = [
  '',
  'a',
  'gen_ai.request.model',
  'é日🚀',
  'x'.repeat(40),
  '__proto__',
  'constructor',
];

function randomString(r: Rand): Uint8Array | string {
  const c = int(r, 10);
  if (c < 6) return pick(r, STRINGS);
  if (c < 8) return randomBytes(r, int(r, 70)); // often invalid UTF-8
  return 'y'.repeat(int(r, 200));
}

function randomAnyValue(r: Rand, depth: number): Uint8Array {
  const c = int(r, depth > 36 ? 5 : 10);
  switch (c) {
    case 0:
    case 1:
      return any.string(randomString(r));
    case 2:
      return any.bool(r() < 0.5);
    case 3:
      return any.int(
        pick(r, [0, -1, 2 ** 53 - 1, 2 ** 53, -(2n ** 63n), 2n ** 63n - 1n, int(r, 1e6)]),
      );
    case 4:
      return r() < 0.1
        ? new Uint8Array(0)
        : any.double(pick(r, [0.5, -0, Number.NaN, 1e308, -1e-308]));
    case 5:
    case 6: {
      const n = int(r, 4);
      return any.array(...Array.from({ length: n }, () => randomAnyValue(r, depth + 1)));
    }
    case 7:
    case 8: {
      const n = int(r, 4);
      return any.kvlist(
        ...Array.from({ length: n }, () =>
          ld(1, keyValue(randomString(r), randomAnyValue(r, depth + 1))),
        ),
      );
    }
    default:
      return any.bytes(randomBytes(r, int(r, 20)));
  }
}

function randomId(r: Rand, size: number): Uint8Array {
  const c = int(r, 20);
  if (c === 0) return new Uint8Array(size);
  if (c === 1) return randomBytes(r, int(r, size * 2));
  const id = randomBytes(r, size);
  id[0] = 1 + int(r, 255);
  return id;
}

function randomAttributes(r: Rand): Uint8Array[] {
  return Array.from({ length: int(r, 6) }, () =>
    keyValue(randomString(r), randomAnyValue(r, r() < 0.05 ? 30 : 0)),
  );
}

const randomTime = (r: Rand) => BigInt.asUintN(64, BigInt(int(r, 2 ** 31)) << BigInt(int(r, 34)));

/** A well-formed trace request with random content: ids (sometimes invalid), values, nesting. */
function generatedTraces(r: Rand): Uint8Array {
  const spans: Uint8Array[] = [];
  const n = 1 + int(r, 5);
  for (let i = 0; i < n; i++) {
    const attributes = randomAttributes(r);
    const extra: Uint8Array[] = [];
    if (r() < 0.3) {
      const event = cat(
        fixed64(1, BigInt(int(r, 2 ** 31)) << 32n),
        ld(2, randomString(r)),
        ...attributes.map((kv) => ld(3, kv)),
      );
      extra.push(ld(11, event));
    }
    if (r() < 0.2)
      extra.push(
        ld(
          13,
          cat(ld(1, randomId(r, 16)), ld(2, randomId(r, 8)), ...attributes.map((kv) => ld(4, kv))),
        ),
      );
    if (r() < 0.5) extra.push(ld(15, cat(ld(2, randomString(r)), varint(3, int(r, 5) - 1))));
    if (r() < 0.1) extra.push(group(1000 + int(r, 10), varint(1, 1)));
    spans.push(
      span({
        traceId: randomId(r, 16),
        spanId: randomId(r, 8),
        ...(r() < 0.5 ? { parentSpanId: randomId(r, 8) } : {}),
        name: pick(r, STRINGS),
        kind: int(r, 8) - 1,
        start: randomTime(r),
        attributes,
        extra,
      }),
    );
  }
  return request(spans, [keyValue('service.name', any.string(randomString(r)))]);
}

const EVENT_NAMES = [
  'gen_ai.user.message',
  'gen_ai.choice',
  'gen_ai.client.inference.operation.details',
  'gen_ai.',
  'other.event',
  '',
];

/** A LogRecord (logs/v1 field numbers) with random ids, event name, body and attributes. */
function randomLogRecord(r: Rand): Uint8Array {
  const name = r() < 0.8 ? pick(r, EVENT_NAMES) : randomString(r);
  const attributes = randomAttributes(r);
  if (r() < 0.2) attributes.push(keyValue('event.name', any.string(pick(r, EVENT_NAMES))));
  const parts = [
    ...(r() < 0.7 ? [fixed64(1, randomTime(r))] : []),
    varint(2, int(r, 25)),
    ld(3, pick(r, ['INFO', '', 'é'])),
    ...(r() < 0.7 ? [ld(5, randomAnyValue(r, r() < 0.05 ? 30 : 0))] : []),
    ...attributes.map((kv) => ld(6, kv)),
    ...(r() < 0.3 ? [varint(7, int(r, 10))] : []),
    fixed32(8, int(r, 2)),
    ...(r() < 0.95 ? [ld(9, randomId(r, 16))] : []),
    ...(r() < 0.95 ? [ld(10, randomId(r, 8))] : []),
    ...(r() < 0.7 ? [fixed64(11, randomTime(r))] : []),
    ...(name === '' && r() < 0.5 ? [] : [ld(12, name)]),
    ...(r() < 0.1 ? [group(1000 + int(r, 10), varint(1, 1))] : []),
  ];
  // Fields out of order now and then: protobuf allows any order.
  if (r() < 0.2) parts.reverse();
  return cat(...parts);
}

/** A well-formed logs request: one or two resources and scopes of random log records. */
function generatedLogs(r: Rand): Uint8Array {
  const resources = Array.from({ length: 1 + int(r, 2) }, () => {
    const records = Array.from({ length: int(r, 5) }, () => ld(2, randomLogRecord(r)));
    const scope = ld(2, ld(1, ld(1, 'opentelemetry.instrumentation.openai_v2')), ...records);
    return ld(1, ld(1, ld(1, keyValue('service.name', any.string(randomString(r))))), scope);
  });
  return cat(...resources);
}

// ---- JSON vocabulary ------------------------------------------------------------------------

const ODD_VALUES: unknown[] = [
  null,
  0,
  -1,
  1.5,
  1e308,
  '',
  'x',
  '0',
  '-9223372036854775809',
  '18446744073709551616',
  'NaN',
  '4BF92F3577B34DA6A3CE929D0E0E4736',
  '0000000000000000',
  'AAAAAAAAAAAAAAAAAAAAAA==',
  'gen_ai.choice',
  true,
  [],
  {},
  [{}],
  { stringValue: 'v' },
  { intValue: '9007199254740993' },
  {
    arrayValue: {
      values: [{ kvlistValue: { values: [{ key: 'k', value: { boolValue: true } }] } }],
    },
  },
  { bytesValue: 'AAH+/w==' },
  { bytesValue: 'A' },
  { kind: 'SPAN_KIND_SERVER' },
  { __proto__: null, key: '__proto__', value: { stringValue: 'p' } },
];

const JSON_VOCABULARY: JsonVocabulary = {
  keys: [
    'resourceSpans',
    'scope_spans',
    'spans',
    'resourceLogs',
    'scope_logs',
    'logRecords',
    'log_records',
    'eventName',
    'event_name',
    'body',
    'timeUnixNano',
    'observed_time_unix_nano',
    'attributes',
    'value',
    'values',
    'traceId',
    'span_id',
    'intValue',
    'arrayValue',
    'kvlistValue',
    'status',
    'code',
    'kind',
    'events',
    'links',
    'key',
    '__proto__',
    'zz',
  ],
  values: ODD_VALUES,
  deep(n) {
    let v: unknown = { stringValue: 'leaf' };
    for (let i = 0; i < n; i++) v = { arrayValue: { values: [v] } };
    return v;
  },
  depths: [31, 32, 33, 200],
  alphabet: '{}[]",:-.0123456789eE abcdefnrtul\\\u00e9\u65e5\ud83d\ude80',
};

// ---- checks ---------------------------------------------------------------------------------

const MESSAGES: Record<Decoder, RegExp> = {
  'protobuf traces': /^OTLP protobuf body could not be decoded: [a-z0-9 ]+ at byte offset \d+$/,
  'protobuf logs': /^OTLP protobuf logs body could not be decoded: [a-z0-9 ]+ at byte offset \d+$/,
  'json traces': jsonMessage('ExportTraceServiceRequest'),
  'json logs': jsonMessage('ExportLogsServiceRequest'),
};

function jsonMessage(request: string): RegExp {
  return new RegExp(
    '^OTLP/JSON body (is not valid JSON( \\(at position \\d+\\))?|' +
      `is not an ${request}: ([A-Za-z_]+(\\[\\d+\\])?(\\.[A-Za-z_]+(\\[\\d+\\])?)*: )?[A-Za-z0-9_. -]+)$`,
  );
}

/** Detail paths and messages are field paths, offsets and fixed words. */
const DETAIL = /^[A-Za-z0-9_. [\]-]*$/;
/** Refusal reasons are fixed sentences of lowercase words. */
const REASON = /^(span with|GenAI event log record without) [a-z0-9 ()-]+$/;
const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
const ZEROS = /^0+$/;
const DIGITS = /^(0|[1-9][0-9]*)$/;

const plain = (a: Attributes) => Object.getPrototypeOf(a) === Object.prototype;

function checkSpans(spans: Span[]): string | undefined {
  for (const s of spans) {
    if (!HEX32.test(s.traceId) || ZEROS.test(s.traceId)) return 'bad trace id';
    if (!HEX16.test(s.spanId) || ZEROS.test(s.spanId)) return 'bad span id';
    if (s.parentSpanId !== '' && !HEX16.test(s.parentSpanId)) return 'bad parent span id';
    if (!DIGITS.test(s.startTimeUnixNano) || !DIGITS.test(s.endTimeUnixNano)) return 'bad time';
    if (!Number.isInteger(s.kind) || s.kind < 0 || s.kind > 5) return 'bad kind';
    if (s.status.code !== 0 && s.status.code !== 1 && s.status.code !== 2) return 'bad status';
    if (typeof s.name !== 'string' || typeof s.attributes !== 'object') return 'bad span';
    if (!plain(s.attributes) || !plain(s.resource)) return 'attributes prototype changed';
    for (const l of s.links) if (!HEX32.test(l.traceId) || !HEX16.test(l.spanId)) return 'bad link';
  }
  return undefined;
}

function checkReasons(reasons: string[]): string | undefined {
  const bad = reasons.find((r) => !REASON.test(r));
  return bad === undefined ? undefined : 'a refusal reason that is not a fixed sentence';
}

function decode(input: OtlpInput): { trial: Trial } | { problem: string } {
  const options = { maxAttributeBytes: input.maxAttributeBytes };
  const { decoder, body } = input;
  const group = decoder;
  if (decoder === 'protobuf traces' || decoder === 'json traces') {
    const out =
      decoder === 'protobuf traces'
        ? decodeOtlpProtobuf(body as Uint8Array, options)
        : decodeOtlpJson(body as string, options);
    const bad = checkSpans(out.spans) ?? checkReasons(out.rejectReasons);
    if (bad !== undefined) return { problem: bad };
    return {
      trial: {
        outcome: `${group}: decoded`,
        figures: {
          [`${group}: spans kept`]: out.spans.length,
          [`${group}: refused`]: out.rejected,
        },
      },
    };
  }
  const out =
    decoder === 'protobuf logs'
      ? decodeOtlpLogsProtobuf(body as Uint8Array, options)
      : decodeOtlpLogsJson(body as string, options);
  for (const e of out.events) {
    if (!HEX32.test(e.traceId) || ZEROS.test(e.traceId)) return { problem: 'bad event trace id' };
    if (!HEX16.test(e.spanId) || ZEROS.test(e.spanId)) return { problem: 'bad event span id' };
    if (!e.event.name.startsWith('gen_ai.')) return { problem: 'an event that is not GenAI' };
    if (!DIGITS.test(e.event.timeUnixNano)) return { problem: 'bad event time' };
    if (!plain(e.event.attributes)) return { problem: 'attributes prototype changed' };
  }
  const bad = checkReasons(out.rejectReasons);
  if (bad !== undefined) return { problem: bad };
  return {
    trial: {
      outcome: `${group}: decoded`,
      figures: {
        [`${group}: events kept`]: out.events.length,
        [`${group}: refused`]: out.rejected,
        [`${group}: ignored`]: out.ignored,
      },
    },
  };
}

function run(input: OtlpInput): Trial {
  try {
    const out = decode(input);
    if ('problem' in out) return { outcome: 'broken', failure: out.problem };
    return out.trial;
  } catch (err) {
    if (!isTouchstoneError(err) || err.code !== 'OTLP_DECODE_FAILED') {
      return { outcome: 'thrown', failure: `unexpected ${err instanceof Error ? err.stack : err}` };
    }
    if (!MESSAGES[input.decoder].test(err.message)) {
      return { outcome: 'thrown', failure: `message of an unexpected shape: ${err.message}` };
    }
    if (err.details.some((d) => !DETAIL.test(d.path) || !DETAIL.test(d.message))) {
      return { outcome: 'thrown', failure: 'a detail of an unexpected shape' };
    }
    return { outcome: `${input.decoder}: OTLP_DECODE_FAILED` };
  }
}

// ---- seeds ----------------------------------------------------------------------------------

const FIXTURES = fileURLToPath(new URL('../../fixtures/otlp/', import.meta.url));

/** Log exports recorded from the Python SDK (test/fixtures/otlp/*.logs.*). */
function recordedLogs(): { protobuf: Uint8Array[]; json: string[] } {
  const files = readdirSync(FIXTURES).filter((f) => f.includes('.logs.'));
  return {
    protobuf: files
      .filter((f) => f.endsWith('.pb'))
      .map((f) => new Uint8Array(readFileSync(FIXTURES + f))),
    json: files
      .filter((f) => f.endsWith('.json'))
      .map((f) => JSON.stringify(JSON.parse(readFileSync(FIXTURES + f, 'utf8')))),
  };
}

interface Corpus {
  protobuf: Record<'traces' | 'logs', Uint8Array[]>;
  json: Record<'traces' | 'logs', string[]>;
}

async function corpus(): Promise<Corpus> {
  const { root, child, other } = await sdkTrace();
  const rich = overrideSpan(root, {
    attributes: {
      ...root.attributes,
      big: 2 ** 60,
      bytes: new Uint8Array([0, 1, 254, 255]),
      nested: { a: [1, 'two', { three: false, four: [2.5, 'é🚀'] }] },
      long: 'x'.repeat(300),
    },
  });
  const sdkSets = [[other, child, rich], await genAiSpans(10, 3)];
  const handmade = request(
    [
      span({
        attributes: [
          keyValue('bad', any.string(new Uint8Array([0x61, 0xff, 0xc3]))),
          keyValue('deep', any.array(any.array(any.kvlist(ld(1, keyValue('k', any.int(-1n))))))),
          keyValue('bytes', any.bytes(new Uint8Array([1, 2, 3]))),
        ],
        extra: [group(99, varint(1, 1)), fixed32(100, 1), fixed64(101, 2n)],
      }),
      span({ spanId: new Uint8Array(8), parentSpanId: new Uint8Array(8) }),
    ],
    [keyValue('service.name', any.string('svc'))],
  );
  const snakeCaseTraces = JSON.stringify({
    resource_spans: [
      {
        scope_spans: [
          {
            spans: [
              {
                trace_id: '4BF92F3577B34DA6A3CE929D0E0E4736',
                span_id: 'o86Snwi+Ryc=',
                kind: 'SPAN_KIND_CLIENT',
                start_time_unix_nano: 1767225600000000,
                attributes: [{ key: 'i', value: { int_value: '-9007199254740993' } }],
                status: { code: 'STATUS_CODE_ERROR', message: 'm' },
              },
            ],
          },
        ],
      },
    ],
  });
  const snakeCaseLogs = JSON.stringify({
    resource_logs: [
      {
        scope_logs: [
          {
            log_records: [
              {
                trace_id: '4BF92F3577B34DA6A3CE929D0E0E4736',
                span_id: 'o86Snwi+Ryc=',
                event_name: 'gen_ai.choice',
                observed_time_unix_nano: '1767225600000000001',
                body: { kvlist_value: { values: [{ key: 'index', value: { int_value: 0 } }] } },
                attributes: [{ key: 'gen_ai.system', value: { string_value: 'openai' } }],
              },
              {
                attributes: [{ key: 'event.name', value: { stringValue: 'gen_ai.user.message' } }],
              },
            ],
          },
        ],
      },
    ],
  });
  const logs = recordedLogs();
  return {
    protobuf: { traces: [...sdkSets.map(toProtobuf), handmade], logs: logs.protobuf },
    json: {
      traces: [...sdkSets.map(toJson), snakeCaseTraces],
      logs: [...logs.json, snakeCaseLogs],
    },
  };
}

function protobufBody(
  r: Rand,
  seeds: Uint8Array[],
  generated: (r: Rand) => Uint8Array,
  aware: ReadonlyMap<Uint8Array, ByteOp[]>,
) {
  const choice = int(r, 100);
  if (choice < 5) return { body: randomBytes(r, int(r, 300)), how: 'random bytes' };
  if (choice < 15) {
    return { body: ld(1, randomMessage(r, 0, { nodes: 5 + int(r, 150) })), how: 'random tree' };
  }
  if (choice < 30) {
    const body = generated(r);
    if (r() < 0.6) return { body, how: 'generated' };
    return { body: body.subarray(0, int(r, body.length + 1)), how: 'generated+truncate' };
  }
  const seed = pick(r, seeds);
  return mutateBytes(r, seed, seeds, aware.get(seed));
}

export async function createOtlpTarget(): Promise<FuzzTarget<OtlpInput>> {
  const seeds = await corpus();
  // Length fields are found once per seed, not per iteration.
  const aware = new Map<Uint8Array, ByteOp[]>();
  for (const s of [...seeds.protobuf.traces, ...seeds.protobuf.logs]) aware.set(s, lengthOp(s));
  return {
    name: 'otlp',
    generate(r, i) {
      const decoder = DECODERS[i % DECODERS.length]!;
      const maxAttributeBytes = i % 3 === 0 ? 16 : 64 * 1024;
      const kind = decoder.endsWith('traces') ? 'traces' : 'logs';
      let body: Uint8Array | string;
      let how: string;
      if (decoder.startsWith('protobuf')) {
        const generated = kind === 'traces' ? generatedTraces : generatedLogs;
        ({ body, how } = protobufBody(r, seeds.protobuf[kind], generated, aware));
      } else {
        ({ text: body, how } = mutateJson(r, seeds.json[kind], JSON_VOCABULARY));
      }
      return {
        input: { decoder, body, maxAttributeBytes, how },
        mutation: `${decoder}: ${how.split(' + ')[0]}`,
      };
    },
    run,
    describe: (input) =>
      `${input.decoder} decoder, maxAttributeBytes ${input.maxAttributeBytes}; ${input.how}` +
      (typeof input.body === 'string' ? '; the reproducer is the UTF-8 text' : ''),
    bytes: (input) =>
      typeof input.body === 'string' ? Buffer.from(input.body, 'utf8') : input.body,
  };
}
