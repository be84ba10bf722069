import { BinaryReader } from '@bufbuild/protobuf/wire';
import { type Attributes, context, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

/** Spans made by the real OpenTelemetry JS SDK (for payloads exporters really send). */
export function recordSpans(resource: Attributes, build: (tracer: Tracer) => void): ReadableSpan[] {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes(resource),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  build(provider.getTracer('touchstone-test', '1.0.0'));
  return exporter.getFinishedSpans();
}

/** A small agent trace: root agent span, an LLM call and a tool call; `fail` makes the tool error. */
export function agentTrace(
  tracer: Tracer,
  opts: { apiKey?: string; fail?: boolean; extra?: Attributes } = {},
): string {
  let traceId = '';
  tracer.startActiveSpan(
    'invoke_agent weather',
    { attributes: { 'gen_ai.operation.name': 'invoke_agent', ...opts.extra } },
    (root) => {
      traceId = root.spanContext().traceId;
      const parent = trace.setSpan(context.active(), root);
      const llm = tracer.startSpan(
        'chat gpt-4o-mini',
        {
          attributes: {
            'gen_ai.operation.name': 'chat',
            'gen_ai.request.model': 'gpt-4o-mini',
            'gen_ai.usage.input_tokens': 42,
            'gen_ai.usage.output_tokens': 7,
            ...(opts.apiKey === undefined
              ? {}
              : { 'http.request.header.authorization': `Bearer ${opts.apiKey}` }),
          },
        },
        parent,
      );
      llm.end();
      const tool = tracer.startSpan(
        'execute_tool get_weather',
        {
          attributes: {
            'gen_ai.operation.name': 'execute_tool',
            'gen_ai.tool.name': 'get_weather',
          },
        },
        parent,
      );
      if (opts.fail)
        tool.setStatus({ code: SpanStatusCode.ERROR, message: 'weather service timed out' });
      tool.end();
      root.end();
    },
  );
  return traceId;
}

export function protobufBody(spans: ReadableSpan[]): Buffer {
  const bytes = ProtobufTraceSerializer.serializeRequest(spans);
  if (bytes === undefined) throw new Error('serializer returned nothing');
  return Buffer.from(bytes);
}

export function jsonBody(spans: ReadableSpan[]): string {
  const bytes = JsonTraceSerializer.serializeRequest(spans);
  if (bytes === undefined) throw new Error('serializer returned nothing');
  return Buffer.from(bytes).toString('utf8');
}

export { trace };

/** The partial_success of an ExportTraceServiceResponse or ExportLogsServiceResponse → {rejected, message}. */
export function partialSuccess(body: Buffer): { rejected: number; message: string } {
  const out = { rejected: 0, message: '' };
  const r = new BinaryReader(body);
  while (r.pos < r.len) {
    const [field] = r.tag();
    if (field !== 1) continue;
    const inner = new BinaryReader(r.bytes());
    while (inner.pos < inner.len) {
      const [f, wt] = inner.tag();
      if (f === 1) out.rejected = Number(inner.int64());
      else if (f === 2) out.message = inner.string();
      else inner.skip(wt);
    }
  }
  return out;
}
