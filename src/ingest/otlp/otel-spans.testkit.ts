/**
 * Test and bench support: spans made by the real OpenTelemetry JS SDK and serialized by its real
 * OTLP serializers (protobuf and JSON), so the decoders are checked against what exporters send.
 * Not part of the build (`*.testkit.ts`).
 */
import {
  context,
  type Link,
  type Attributes as OtelAttributes,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  type IdGenerator,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

/** Deterministic ids (a small xorshift stream), so payloads are the same on every run. */
export function seededIds(seed = 1): IdGenerator {
  let state = seed >>> 0 || 1;
  const next = (): string => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0).toString(16).padStart(8, '0');
  };
  return {
    generateTraceId: () => next() + next() + next() + next(),
    generateSpanId: () => next() + next(),
  };
}

export interface Recorder {
  tracer: Tracer;
  /** Ends the provider and returns every finished span in end order. */
  finish(): Promise<ReadableSpan[]>;
}

/** A tracer of a fresh SDK provider with the given resource and scope. */
export function recorder(options: {
  resource: OtelAttributes;
  scope?: { name: string; version?: string };
  ids?: IdGenerator;
}): Recorder {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes(options.resource),
    idGenerator: options.ids ?? seededIds(),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
    spanLimits: { attributeCountLimit: 1000, attributeValueLengthLimit: Number.POSITIVE_INFINITY },
  });
  const scope = options.scope ?? { name: 'touchstone-test', version: '1.0.0' };
  return {
    tracer: provider.getTracer(scope.name, scope.version),
    async finish() {
      await provider.forceFlush();
      const spans = exporter.getFinishedSpans();
      await provider.shutdown();
      return spans;
    },
  };
}

/** The context in which a new span is a child of `parent`. */
export function childOf(parent: { spanContext(): SpanContext }) {
  return trace.setSpanContext(context.active(), parent.spanContext());
}

/**
 * The same span with some fields replaced, for values the SDK refuses to record (kvlists, bytes,
 * mixed arrays) or ids it would never make (all zeros). The serializers read through the prototype.
 */
export function overrideSpan(
  span: ReadableSpan,
  replace: { attributes?: Record<string, unknown>; traceId?: string; spanId?: string },
): ReadableSpan {
  const ctx = span.spanContext();
  const props: PropertyDescriptorMap = {};
  if (replace.attributes !== undefined) props.attributes = { value: replace.attributes };
  if (replace.traceId !== undefined || replace.spanId !== undefined) {
    const replaced = {
      ...ctx,
      traceId: replace.traceId ?? ctx.traceId,
      spanId: replace.spanId ?? ctx.spanId,
    };
    props.spanContext = { value: () => replaced };
  }
  return Object.create(span, props) as ReadableSpan;
}

export function toProtobuf(spans: ReadableSpan[]): Uint8Array {
  const body = ProtobufTraceSerializer.serializeRequest(spans);
  if (body === undefined) throw new Error('the protobuf serializer returned nothing');
  return body;
}

export function toJson(spans: ReadableSpan[]): string {
  const body = JsonTraceSerializer.serializeRequest(spans);
  if (body === undefined) throw new Error('the JSON serializer returned nothing');
  return new TextDecoder().decode(body);
}

/**
 * Three spans: a root (server) with every attribute type the SDK records, an event, a link to a
 * span of another trace and an error status; its client child; and that other trace's span.
 */
export async function sdkTrace(): Promise<{
  root: ReadableSpan;
  child: ReadableSpan;
  other: ReadableSpan;
}> {
  const rec = recorder({
    resource: { 'service.name': 'travel-app', 'service.instance.id': 'i-1', 'process.pid': 4242 },
    scope: { name: 'openinference.instrumentation.openai_agents', version: '1.4.0' },
  });
  const other = rec.tracer.startSpan('other-trace', { startTime: [1767225500, 0] });
  other.end([1767225500, 5]);
  const root = rec.tracer.startSpan('travel-helper', {
    kind: SpanKind.SERVER,
    startTime: [1767225600, 123456789],
    links: [{ context: other.spanContext(), attributes: { 'link.reason': 'follows' } }],
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
  });
  root.addEvent(
    'exception',
    { 'exception.message': 'rate limited', attempt: 2 },
    [1767225601, 999999999],
  );
  root.setStatus({ code: SpanStatusCode.ERROR, message: 'rate limited' });
  const child = rec.tracer.startSpan(
    'chat gpt-4o-mini',
    { kind: SpanKind.CLIENT, startTime: [1767225600, 200000000] },
    childOf(root),
  );
  child.setStatus({ code: SpanStatusCode.OK });
  child.end([1767225602, 1]);
  root.end([1767225602, 400000001]);
  const [o, c, r] = await rec.finish();
  return { other: o!, child: c!, root: r! };
}

const T0 = 1_767_225_600;

const USER_PROMPTS = [
  'Plan a three-day trip to Lisbon in May with a budget of 1200 euros, including flights from Berlin.',
  'What is the weather going to be like in Paris next week, and should I pack an umbrella?',
  'Summarise the attached quarterly report and list the three biggest risks the CFO mentions.',
  'Find me a vegetarian restaurant near the Colosseum that is open after 22:00 on a Sunday.',
];

function messages(i: number, turns: number): string {
  const msgs: unknown[] = [
    {
      role: 'system',
      parts: [
        {
          type: 'text',
          content:
            'You are a helpful travel assistant. Use the tools you are given; never invent prices. Answer concisely and cite the tool results you used.',
        },
      ],
    },
    { role: 'user', parts: [{ type: 'text', content: USER_PROMPTS[i % USER_PROMPTS.length] }] },
  ];
  for (let t = 0; t < turns; t++) {
    msgs.push({
      role: 'assistant',
      parts: [
        {
          type: 'tool_call',
          id: `call_${i}_${t}`,
          name: 'search_flights',
          arguments: { origin: 'BER', destination: 'LIS', date: `2026-05-0${t + 1}` },
        },
      ],
    });
    msgs.push({
      role: 'tool',
      parts: [
        {
          type: 'tool_call_response',
          id: `call_${i}_${t}`,
          response: `[{"flight":"TP${500 + t}","price_eur":${129 + t * 17},"departs":"07:${10 + t}"}]`,
        },
      ],
    });
  }
  return JSON.stringify(msgs);
}

/**
 * A realistic agent workload: traces of an agent span, two LLM calls with GenAI message
 * attributes, a tool call and an HTTP call (some with exception events), ≈`count` spans in all.
 */
export async function genAiSpans(count: number, seed = 7): Promise<ReadableSpan[]> {
  const rec = recorder({
    resource: {
      'service.name': 'travel-agent',
      'service.version': '2.4.1',
      'deployment.environment.name': 'production',
      'telemetry.sdk.language': 'nodejs',
      'telemetry.sdk.name': 'opentelemetry',
      'telemetry.sdk.version': '2.12.1',
      'host.name': 'agent-7f9c4d-x2k8p',
    },
    scope: { name: '@opentelemetry/instrumentation-openai', version: '0.5.0' },
    ids: seededIds(seed),
  });
  const { tracer } = rec;
  for (let i = 0; i * 5 < count; i++) {
    const t = T0 + i;
    const agent = tracer.startSpan('invoke_agent travel-helper', {
      kind: SpanKind.INTERNAL,
      startTime: [t, 1000],
      attributes: {
        'gen_ai.operation.name': 'invoke_agent',
        'gen_ai.agent.name': 'travel-helper',
        'gen_ai.agent.id': 'asst_5j66UpCpwteGg4YSxUnt7lPY',
        'gen_ai.conversation.id': `conv_${i.toString(36)}`,
      },
    });
    const parent = childOf(agent);
    for (let call = 0; call < 2; call++) {
      const chat = tracer.startSpan(
        'chat gpt-4o-mini',
        {
          kind: SpanKind.CLIENT,
          startTime: [t, 2000 + call * 500_000_000],
          attributes: {
            'gen_ai.operation.name': 'chat',
            'gen_ai.provider.name': 'openai',
            'gen_ai.request.model': 'gpt-4o-mini',
            'gen_ai.request.temperature': 0.2,
            'gen_ai.request.max_tokens': 1024,
            'gen_ai.response.model': 'gpt-4o-mini-2024-07-18',
            'gen_ai.response.id': `chatcmpl-${seed}${i}x${call}`,
            'gen_ai.response.finish_reasons': [call === 0 ? 'tool_calls' : 'stop'],
            'gen_ai.usage.input_tokens': 180 + (i % 50) + call * 120,
            'gen_ai.usage.output_tokens': 24 + (i % 30),
            'gen_ai.input.messages': messages(i, call + 1),
            'gen_ai.output.messages': JSON.stringify([
              {
                role: 'assistant',
                parts: [{ type: 'text', content: 'TP500 departs 07:10 and costs 129 EUR.' }],
                finish_reason: call === 0 ? 'tool_call' : 'stop',
              },
            ]),
            'server.address': 'api.openai.com',
            'server.port': 443,
          },
        },
        parent,
      );
      chat.end([t, 400_000_000 + call * 500_000_000]);
    }
    const tool = tracer.startSpan(
      'execute_tool search_flights',
      {
        kind: SpanKind.INTERNAL,
        startTime: [t, 410_000_000],
        attributes: {
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': 'search_flights',
          'gen_ai.tool.call.id': `call_${i}_0`,
          'gen_ai.tool.type': 'function',
          'gen_ai.tool.call.arguments': '{"origin":"BER","destination":"LIS","date":"2026-05-01"}',
          'gen_ai.tool.call.result': '[{"flight":"TP500","price_eur":129,"departs":"07:10"}]',
        },
      },
      parent,
    );
    const http = tracer.startSpan(
      'GET',
      {
        kind: SpanKind.CLIENT,
        startTime: [t, 420_000_000],
        attributes: {
          'http.request.method': 'GET',
          'url.full': `https://flights.example.com/v2/search?from=BER&to=LIS&d=2026-05-01&n=${i}`,
          'http.response.status_code': i % 17 === 0 ? 503 : 200,
          'server.address': 'flights.example.com',
        },
      },
      childOf(tool),
    );
    if (i % 17 === 0) {
      http.addEvent(
        'exception',
        {
          'exception.type': 'UpstreamUnavailable',
          'exception.message': 'flights.example.com answered 503',
        },
        [t, 480_000_000],
      );
      http.setStatus({ code: SpanStatusCode.ERROR, message: 'HTTP 503' });
    }
    http.end([t, 490_000_000]);
    tool.end([t, 495_000_000]);
    agent.end([t, 999_000_000]);
  }
  return (await rec.finish()).slice(0, count);
}

export type { Link, ReadableSpan };
export { SpanKind, SpanStatusCode };

/**
 * Count limits small enough to cut the hand-built span both decoder tests send (attributes a, b,
 * c and one past them, 5 reported dropped; two events, the first with x and y; two links, the
 * first with x and y and 1 reported dropped), and the span each decoder must make of it.
 */
export const SMALL_COUNT_LIMITS = {
  maxAttributesPerSpan: 2,
  maxEventsPerSpan: 1,
  maxLinksPerSpan: 1,
  maxAttributesPerEvent: 1,
  maxAttributesPerLink: 1,
};
export const WITHIN_SMALL_COUNT_LIMITS = {
  attributes: { a: 1, b: 2 },
  droppedAttributesCount: 7,
  events: [{ name: 'e1', attributes: { x: 1 }, droppedAttributesCount: 1 }],
  droppedEventsCount: 1,
  links: [{ attributes: { x: 1 }, droppedAttributesCount: 2 }],
  droppedLinksCount: 1,
};
