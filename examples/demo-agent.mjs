#!/usr/bin/env node
// A demo agent for the quickstart. It answers three travel requests with a fake model and fake
// tools (no model, no API key) and sends the traces a real agent would send: OpenTelemetry GenAI
// spans for the agent, each model call and each tool call; one tool call fails. Then it waits
// until the server has completed (and, when a policy exists, scored) them.
//
//   node examples/demo-agent.mjs
//
// It sends to $OTEL_EXPORTER_OTLP_ENDPOINT (default http://127.0.0.1:4318); with auth on, pass an
// ingest key the OpenTelemetry way: OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20tsk_…".
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';

const endpoint = (process.env.OTEL_EXPORTER_OTLP_ENDPOINT ?? 'http://127.0.0.1:4318').replace(
  /\/+$/,
  '',
);
const MODEL = 'demo-llm';
const SYSTEM = 'You are a travel assistant. Use the tools to answer.';

// --- what the fake agent does: per request, the model's turns and the tools it calls ----------

/** Each request: the user's question, then steps (a model turn or a tool call) and the answer. */
const REQUESTS = [
  {
    question: 'Book me a flight from Berlin to Paris on Friday morning.',
    steps: [
      { call: 'search_flights', args: { from: 'BER', to: 'CDG', date: 'friday' }, ms: 420 },
      {
        result: [{ flight: 'AF1735', departs: '07:10', price_eur: 129 }],
      },
      { call: 'book_flight', args: { flight: 'AF1735' }, ms: 650 },
      { result: { booking: 'PNR-7QX2LD', status: 'confirmed' } },
    ],
    answer: 'Booked: Air France AF1735, Friday 07:10 from Berlin to Paris, 129 EUR (PNR-7QX2LD).',
  },
  {
    question: 'What is the weather in Lisbon tomorrow?',
    steps: [
      { call: 'get_weather', args: { city: 'Lisbon', day: 'tomorrow' }, ms: 180 },
      { result: { city: 'Lisbon', temperature_c: 24, condition: 'sunny' } },
    ],
    answer: 'Tomorrow in Lisbon: sunny, 24°C.',
  },
  {
    question: 'Find me a hotel in Rome for two nights from Saturday.',
    steps: [
      { call: 'search_hotels', args: { city: 'Rome', nights: 2, from: 'saturday' }, ms: 5000 },
      { error: 'hotel search timed out after 5 s (upstream 504)' },
    ],
    answer: 'Sorry, the hotel search is not answering right now. Please try again in a minute.',
  },
];

const text = (content) => [{ type: 'text', content }];
const msg = (role, parts) => ({ role, parts });

// --- spans --------------------------------------------------------------------------------------

let failure;
const exporter = new OTLPTraceExporter({ url: `${endpoint}/v1/traces` });
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({
    'service.name': 'demo-travel-agent',
    'service.version': '1.0.0',
    // Becomes the trace label `workflow` (filter with `traces list -l workflow=travel`).
    'touchstone.label.workflow': 'travel',
  }),
  spanProcessors: [
    new BatchSpanProcessor({
      export: (spans, done) =>
        exporter.export(spans, (result) => {
          if (result.code !== 0) failure = result.error;
          done(result);
        }),
      shutdown: () => exporter.shutdown(),
      forceFlush: () => exporter.forceFlush(),
    }),
  ],
});
const tracer = provider.getTracer('demo-agent', '1.0.0');

/** A span from `start` to `end` (ms since the epoch), child of `parent`. */
function span(name, attributes, start, end, parent, error) {
  const s = tracer.startSpan(
    name,
    { kind: SpanKind.INTERNAL, attributes, startTime: start },
    trace.setSpan(context.active(), parent),
  );
  if (error !== undefined) {
    s.recordException({ name: 'ToolError', message: error });
    s.setStatus({ code: SpanStatusCode.ERROR, message: error });
    s.setAttribute('error.type', 'ToolError');
  }
  s.end(end);
  return s;
}

/** One request as a trace: the agent span, a model call per turn, a tool span per call. */
function runAgent(request, index) {
  const modelMs = 600;
  const turns = request.steps.length / 2 + 1;
  const total = request.steps.reduce((sum, s) => sum + (s.ms ?? 0), 0) + modelMs * turns;
  // The trace ends now: it is laid out backwards from the present.
  let at = Date.now() - total;
  const started = at;
  const history = [msg('user', text(request.question))];
  const root = tracer.startSpan('invoke_agent travel-helper', {
    kind: SpanKind.INTERNAL,
    startTime: started,
    attributes: {
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'travel-helper',
      'gen_ai.conversation.id': `demo-${index + 1}`,
      'gen_ai.input.messages': JSON.stringify(history),
      'gen_ai.system_instructions': JSON.stringify(text(SYSTEM)),
    },
  });
  const chat = (output, tokens) => {
    const input = [msg('system', text(SYSTEM)), ...history];
    span(
      `chat ${MODEL}`,
      {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'demo',
        'gen_ai.request.model': MODEL,
        'gen_ai.usage.input_tokens': 40 * input.length + tokens,
        'gen_ai.usage.output_tokens': tokens,
        'gen_ai.input.messages': JSON.stringify(input),
        'gen_ai.output.messages': JSON.stringify([output]),
      },
      at,
      at + modelMs,
      root,
    );
    at += modelMs;
    history.push(output);
  };
  let error = false;
  for (let i = 0; i < request.steps.length; i += 2) {
    const call = request.steps[i];
    const outcome = request.steps[i + 1];
    const id = `call_${call.call}_${i / 2 + 1}`;
    chat(msg('assistant', [{ type: 'tool_call', id, name: call.call, arguments: call.args }]), 24);
    span(
      `execute_tool ${call.call}`,
      {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': call.call,
        'gen_ai.tool.call.id': id,
        'gen_ai.tool.type': 'function',
        'gen_ai.tool.call.arguments': JSON.stringify(call.args),
        ...(outcome.result === undefined
          ? {}
          : { 'gen_ai.tool.call.result': JSON.stringify(outcome.result) }),
      },
      at,
      at + call.ms,
      root,
      outcome.error,
    );
    at += call.ms;
    error ||= outcome.error !== undefined;
    history.push(
      msg('tool', [
        {
          type: 'tool_call_response',
          id,
          response: outcome.error === undefined ? outcome.result : `Error: ${outcome.error}`,
        },
      ]),
    );
  }
  chat(msg('assistant', text(request.answer)), 30);
  root.setAttribute(
    'gen_ai.output.messages',
    JSON.stringify([msg('assistant', text(request.answer))]),
  );
  root.end(at);
  return { traceId: root.spanContext().traceId, question: request.question, error };
}

// --- send, then wait for the server ------------------------------------------------------------

const sent = REQUESTS.map(runAgent);
await provider.shutdown();
if (failure !== undefined) {
  process.stderr.write(
    `could not send the traces to ${endpoint}/v1/traces (${failure.message}); is \`npx touchstone serve\` running?\n`,
  );
  process.exit(1);
}
process.stdout.write(`sent ${sent.length} traces to ${endpoint} (service demo-travel-agent):\n`);
for (const t of sent) {
  process.stdout.write(`  ${t.traceId}  ${t.error ? 'error' : 'ok   '}  ${t.question}\n`);
}

/** GET a JSON path of the server; the status and body, or undefined when it cannot be reached. */
async function get(path) {
  try {
    const res = await fetch(`${endpoint}${path}`, { signal: AbortSignal.timeout(5_000) });
    return { status: res.status, body: await res.json().catch(() => undefined) };
  } catch {
    return undefined;
  }
}

/** Polls `check` until it returns true or `ms` pass. */
async function until(check, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 250));
  }
  return false;
}

// A trace is complete a little after its last span (traces.completion_grace, 2 s by default).
process.stdout.write('waiting until the server has completed them… ');
let readable = true;
const completed = await until(async () => {
  const answers = await Promise.all(sent.map((t) => get(`/v1alpha1/traces/${t.traceId}`)));
  // With auth on, an ingest key cannot read traces back: stop waiting, they complete anyway.
  readable = answers.every((a) => a !== undefined && a.status !== 401 && a.status !== 403);
  return !readable || answers.every((a) => a?.status === 200);
}, 20_000);
process.stdout.write(
  !readable
    ? 'skipped (the server needs a key to read traces)\n'
    : completed
      ? 'done\n'
      : 'not yet\n',
);

const policies = readable ? await get('/v1alpha1/policies') : undefined;
if (completed && readable && (policies?.body?.policies ?? []).length > 0) {
  process.stdout.write('waiting for the policies to score them… ');
  const scored = async () => {
    const answers = await Promise.all(sent.map((t) => get(`/v1alpha1/traces/${t.traceId}/scores`)));
    return answers.filter((a) => Object.keys(a?.body?.results ?? {}).length > 0).length;
  };
  await until(async () => (await scored()) > 0, 10_000);
  // The engine scores a batch at once; a moment more lets the rest of it land.
  await new Promise((r) => setTimeout(r, 500));
  process.stdout.write(`${await scored()} of ${sent.length} scored (the selector decides which)\n`);
}
process.stdout.write('next: npx touchstone traces list\n');
