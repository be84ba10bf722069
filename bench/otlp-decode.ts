/**
 * OTLP decoding throughput: a realistic agent workload (1000 spans per request made by the
 * OpenTelemetry JS SDK: agent, LLM calls with GenAI message attributes, tool and HTTP spans,
 * serialized by its own OTLP serializers), decoded over and over.
 *  - protobuf: decodeOtlpProtobuf (purpose-built, on the @bufbuild/protobuf wire reader);
 *  - peer: the generic @bufbuild/protobuf `fromBinary` of the same bytes with an OTLP schema built
 *    at run time (@opentelemetry/otlp-transformer ships only a serializer and a response
 *    deserializer, no request schema or decoder). It only builds message objects: no hex ids,
 *    no time strings, no flattening, so it is a lower bound on the generic path's cost;
 *  - JSON: decodeOtlpJson, next to JSON.parse alone (the floor of any JSON decoder).
 * Rounds alternate between decoders so load from other processes hits them alike; the best
 * and the median round are printed. Budget (DESIGN §7): ingest ≥ 30k spans/s end to end; decode should leave room.
 */
import { create, createFileRegistry, type DescMessage, fromBinary } from '@bufbuild/protobuf';
import {
  type DescriptorProto,
  DescriptorProtoSchema,
  FileDescriptorProtoSchema,
  FieldDescriptorProto_Label as Label,
  FieldDescriptorProto_Type as Type,
} from '@bufbuild/protobuf/wkt';
import { decodeOtlpJson, decodeOtlpProtobuf } from '../src/ingest/otlp/index.js';
import { genAiSpans, toJson, toProtobuf } from '../src/ingest/otlp/otel-spans.testkit.js';

const SPANS_PER_REQUEST = 1000;
const ROUNDS = 10;
const ROUND_MS = 300;
const SETTLE_MS = 100;
const OPTIONS = { maxAttributeBytes: 64 * 1024 };

type FieldSpec = [name: string, number: number, type: Type, typeName?: string, repeated?: boolean];

function message(name: string, fields: FieldSpec[], nestedType: DescriptorProto[] = []) {
  return create(DescriptorProtoSchema, {
    name,
    field: fields.map(([fieldName, number, type, typeName, repeated]) => ({
      name: fieldName,
      number,
      type,
      label: repeated ? Label.REPEATED : Label.OPTIONAL,
      ...(typeName === undefined ? {} : { typeName }),
    })),
    nestedType,
  });
}

/** The OTLP trace request schema (opentelemetry-proto field numbers) as a runtime descriptor. */
function otlpRequestSchema(): DescMessage {
  const P = '.otlp.';
  const anyValue = message('AnyValue', [
    ['string_value', 1, Type.STRING],
    ['bool_value', 2, Type.BOOL],
    ['int_value', 3, Type.INT64],
    ['double_value', 4, Type.DOUBLE],
    ['array_value', 5, Type.MESSAGE, `${P}ArrayValue`],
    ['kvlist_value', 6, Type.MESSAGE, `${P}KeyValueList`],
    ['bytes_value', 7, Type.BYTES],
  ]);
  for (const f of anyValue.field) f.oneofIndex = 0;
  anyValue.oneofDecl = [{ $typeName: 'google.protobuf.OneofDescriptorProto', name: 'value' }];
  const kvs = (n: number): FieldSpec => ['attributes', n, Type.MESSAGE, `${P}KeyValue`, true];
  const file = create(FileDescriptorProtoSchema, {
    name: 'otlp.proto',
    package: 'otlp',
    syntax: 'proto3',
    messageType: [
      anyValue,
      message('ArrayValue', [['values', 1, Type.MESSAGE, `${P}AnyValue`, true]]),
      message('KeyValueList', [['values', 1, Type.MESSAGE, `${P}KeyValue`, true]]),
      message('KeyValue', [
        ['key', 1, Type.STRING],
        ['value', 2, Type.MESSAGE, `${P}AnyValue`],
      ]),
      message('Resource', [kvs(1), ['dropped_attributes_count', 2, Type.UINT32]]),
      message('InstrumentationScope', [
        ['name', 1, Type.STRING],
        ['version', 2, Type.STRING],
        kvs(3),
        ['dropped_attributes_count', 4, Type.UINT32],
      ]),
      message('Status', [
        ['message', 2, Type.STRING],
        ['code', 3, Type.INT32],
      ]),
      message(
        'Span',
        [
          ['trace_id', 1, Type.BYTES],
          ['span_id', 2, Type.BYTES],
          ['trace_state', 3, Type.STRING],
          ['parent_span_id', 4, Type.BYTES],
          ['flags', 16, Type.FIXED32],
          ['name', 5, Type.STRING],
          ['kind', 6, Type.INT32],
          ['start_time_unix_nano', 7, Type.FIXED64],
          ['end_time_unix_nano', 8, Type.FIXED64],
          kvs(9),
          ['dropped_attributes_count', 10, Type.UINT32],
          ['events', 11, Type.MESSAGE, `${P}Span.Event`, true],
          ['dropped_events_count', 12, Type.UINT32],
          ['links', 13, Type.MESSAGE, `${P}Span.Link`, true],
          ['dropped_links_count', 14, Type.UINT32],
          ['status', 15, Type.MESSAGE, `${P}Status`],
        ],
        [
          message('Event', [
            ['time_unix_nano', 1, Type.FIXED64],
            ['name', 2, Type.STRING],
            kvs(3),
            ['dropped_attributes_count', 4, Type.UINT32],
          ]),
          message('Link', [
            ['trace_id', 1, Type.BYTES],
            ['span_id', 2, Type.BYTES],
            ['trace_state', 3, Type.STRING],
            kvs(4),
            ['dropped_attributes_count', 5, Type.UINT32],
            ['flags', 6, Type.FIXED32],
          ]),
        ],
      ),
      message('ScopeSpans', [
        ['scope', 1, Type.MESSAGE, `${P}InstrumentationScope`],
        ['spans', 2, Type.MESSAGE, `${P}Span`, true],
        ['schema_url', 3, Type.STRING],
      ]),
      message('ResourceSpans', [
        ['resource', 1, Type.MESSAGE, `${P}Resource`],
        ['scope_spans', 2, Type.MESSAGE, `${P}ScopeSpans`, true],
        ['schema_url', 3, Type.STRING],
      ]),
      message('ExportTraceServiceRequest', [
        ['resource_spans', 1, Type.MESSAGE, `${P}ResourceSpans`, true],
      ]),
    ],
  });
  const desc = createFileRegistry(file, () => undefined).getMessage(
    'otlp.ExportTraceServiceRequest',
  );
  if (desc === undefined) throw new Error('schema has no ExportTraceServiceRequest');
  return desc;
}

interface Candidate {
  name: string;
  bytes: number;
  run: () => unknown;
  /** Requests per second of each round. */
  rates: number[];
}

function round(c: Candidate): void {
  // Untimed first, so garbage the previous candidate left (its GC work) is not billed to this one.
  const settle = performance.now();
  while (performance.now() - settle < SETTLE_MS) c.run();
  let n = 0;
  const started = performance.now();
  let elapsed = 0;
  while (elapsed < ROUND_MS) {
    c.run();
    n++;
    elapsed = performance.now() - started;
  }
  c.rates.push((n * 1000) / elapsed);
}

const best = (c: Candidate) => Math.max(...c.rates);
const median = (c: Candidate) => [...c.rates].sort((a, b) => a - b)[c.rates.length >> 1]!;

export async function main(): Promise<void> {
  const spans = await genAiSpans(SPANS_PER_REQUEST);
  const protobuf = toProtobuf(spans);
  const json = toJson(spans);
  const jsonBytes = Buffer.byteLength(json);

  const fromPb = decodeOtlpProtobuf(protobuf, OPTIONS);
  const fromJson = decodeOtlpJson(json, OPTIONS);
  if (fromPb.spans.length !== SPANS_PER_REQUEST || fromJson.spans.length !== SPANS_PER_REQUEST) {
    throw new Error('the decoders did not return every span');
  }

  const schema = otlpRequestSchema();
  const generic = fromBinary(schema, protobuf) as unknown as {
    resourceSpans: { scopeSpans: { spans: unknown[] }[] }[];
  };
  const genericSpans = generic.resourceSpans[0]?.scopeSpans[0]?.spans.length ?? 0;
  if (genericSpans !== SPANS_PER_REQUEST) throw new Error('the generic decoder lost spans');

  const candidates: Candidate[] = [
    {
      name: 'protobuf  decodeOtlpProtobuf',
      bytes: protobuf.length,
      run: () => decodeOtlpProtobuf(protobuf, OPTIONS),
      rates: [],
    },
    {
      name: 'protobuf  generic fromBinary (peer)',
      bytes: protobuf.length,
      run: () => fromBinary(schema, protobuf),
      rates: [],
    },
    {
      name: 'JSON      decodeOtlpJson',
      bytes: jsonBytes,
      run: () => decodeOtlpJson(json, OPTIONS),
      rates: [],
    },
    {
      name: 'JSON      JSON.parse only (floor)',
      bytes: jsonBytes,
      run: () => JSON.parse(json),
      rates: [],
    },
  ];

  console.log(
    `payload: ${SPANS_PER_REQUEST} GenAI spans per request; protobuf ${(protobuf.length / 1024).toFixed(0)} KiB ` +
      `(${(protobuf.length / SPANS_PER_REQUEST).toFixed(0)} B/span), JSON ${(jsonBytes / 1024).toFixed(0)} KiB; ` +
      `${ROUNDS} alternating rounds of ${ROUND_MS} ms each; best (median)`,
  );
  for (const c of candidates) c.run();
  for (let r = 0; r < ROUNDS; r++) for (const c of candidates) round(c);

  const fmt = (rate: number, unit: number, scale: number) => ((rate * unit) / scale).toFixed(0);
  for (const c of candidates) {
    console.log(
      `${c.name.padEnd(38)} ${fmt(best(c), c.bytes, 1e6).padStart(5)} (${fmt(median(c), c.bytes, 1e6)}) MB/s ` +
        `${fmt(best(c), SPANS_PER_REQUEST, 1e3).padStart(5)}k (${fmt(median(c), SPANS_PER_REQUEST, 1e3)}k) spans/s`,
    );
  }
  const [pb, peer, js] = candidates;
  console.log(
    `purpose-built vs generic protobuf: ${(best(pb!) / best(peer!)).toFixed(1)}x; ` +
      `headroom over the 30k spans/s ingest budget (medians): protobuf ${((median(pb!) * SPANS_PER_REQUEST) / 30_000).toFixed(1)}x, ` +
      `JSON ${((median(js!) * SPANS_PER_REQUEST) / 30_000).toFixed(1)}x`,
  );
}
