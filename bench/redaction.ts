/**
 * Redaction throughput: spans/s through `Redactor.redactSpans` for a realistic mix (LLM, tool,
 * retrieval, HTTP, DB and agent spans of 8-span traces sharing a resource; JSON message bodies;
 * about one trace in five carrying an email, phone number, card or secret header), with
 *  1. the default key rules, secret detectors off,
 *  2. the defaults (key rules + every secret detector), and the detectors' cost per span,
 *  3. defaults + all four PII detectors (the budget case: comfortably above 100k spans/s),
 *  4. as 3 plus three RE2 value patterns,
 * and, as a peer, a structuredClone of the same spans (a deep copy: the floor for any pass that
 * copies what it touches). Single-threaded; batches of 512 spans (one OTLP export request), each
 * redacted right after it is built, as the server does after decoding; the best of three passes, by wall time and by process CPU time (steadier when the host is busy).
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Attributes, Span } from '../src/core/index.js';
import { compileRedaction, type RedactionConfig } from '../src/redaction/index.js';

const SPANS = 100_000;
const SPANS_PER_TRACE = 8;
const PASSES = 3;
// The builder's garbage (JSON round trips) is collected before each timed batch, so that its
// scavenges are not charged to redaction.
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as (options?: { type: 'minor' | 'major' }) => void;

/** Spans per redactSpans call, like one OTLP export request. */
const BATCH = 512;

function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, '0').slice(-width);
}

function messages(i: number): string {
  const pii =
    i % 5 === 0
      ? ` You can reach me at jane.roe${i}@example.com or +1 415 555 ${String(2000 + (i % 7000)).padStart(4, '0')}.`
      : '';
  return JSON.stringify([
    {
      role: 'system',
      content:
        'You are a travel assistant. Answer briefly, cite the booking reference, never invent flight numbers, and use 24-hour times.',
    },
    {
      role: 'user',
      content: `I need to fly from Berlin to Paris on 2026-11-21 for 2 adults, booking ORD-${4000 + (i % 5000)}-${1000 + (i % 9000)}, budget 450 EUR.${pii}`,
    },
  ]);
}

function span(i: number, resource: Attributes): Span {
  const trace = Math.floor(i / SPANS_PER_TRACE);
  const kind = i % SPANS_PER_TRACE;
  const base = {
    traceId: hex(trace, 32),
    spanId: hex(i + 1, 16),
    parentSpanId: kind === 0 ? '' : hex(trace * SPANS_PER_TRACE + 1, 16),
    kind: 1,
    startTimeUnixNano: String(1763712000000000000n + BigInt(i) * 1000000n),
    endTimeUnixNano: String(1763712000000000000n + BigInt(i) * 1000000n + 500000n),
    events: [] as Span['events'],
    links: [] as Span['links'],
    status: { code: 0 as const, message: '' },
    resource,
    scope: { name: 'openinference.instrumentation.openai', version: '0.1.18' },
  };
  switch (kind) {
    case 0:
      return {
        ...base,
        name: 'agent.run',
        attributes: {
          'openinference.span.kind': 'AGENT',
          'input.value': `Plan a trip to Paris for 2 adults on 2026-11-21 (request ${i}).`,
          'output.value':
            'Booked AF1234 departing 07:15, arriving 08:55. Your booking reference is QX7P2L. Total 398 EUR.',
          'session.id': `9b2f6c1e-4d3a-4f7b-8c2d-${hex(trace, 12)}`,
          'user.id': i % 40 === 0 ? `user${i}@example.org` : `u_${trace}`,
          'touchstone.label.team': 'travel',
        },
      };
    case 1:
    case 4:
      return {
        ...base,
        name: 'ChatCompletion',
        attributes: {
          'openinference.span.kind': 'LLM',
          'gen_ai.system': 'openai',
          'gen_ai.request.model': 'gpt-4o-mini-2024-07-18',
          'gen_ai.request.max_tokens': 1024,
          'gen_ai.request.temperature': 0.2,
          'gen_ai.usage.input_tokens': 1234 + (i % 100),
          'gen_ai.usage.output_tokens': 256,
          'llm.token_count.prompt': 1234 + (i % 100),
          'llm.token_count.completion': 256,
          'gen_ai.response.id': `chatcmpl-AbC${hex(i, 20)}`,
          'gen_ai.input.messages': messages(i),
          'gen_ai.output.messages': JSON.stringify([
            {
              role: 'assistant',
              content: null,
              tool_calls: [
                {
                  id: `call_${hex(i, 12)}`,
                  type: 'function',
                  function: {
                    name: 'search_flights',
                    arguments: '{"from":"BER","to":"CDG","date":"2026-11-21","adults":2}',
                  },
                },
              ],
            },
          ]),
        },
      };
    case 2:
      return {
        ...base,
        name: 'search_flights',
        attributes: {
          'openinference.span.kind': 'TOOL',
          'tool.name': 'search_flights',
          'tool.parameters': '{"from":"BER","to":"CDG","date":"2026-11-21","adults":2}',
          'output.value':
            'AF1234 07:15-08:55 199 EUR; LH2228 09:40-11:25 214 EUR; U24567 13:05-14:50 89 EUR',
          'output.mime_type': 'text/plain',
        },
      };
    case 3:
      return {
        ...base,
        name: 'POST',
        status:
          i % 16 === 3
            ? {
                code: 2,
                message: 'HTTP 429 Too Many Requests: retry after 2s (request id req_8f2c)',
              }
            : base.status,
        attributes: {
          'http.request.method': 'POST',
          'url.full': 'https://api.openai.com/v1/chat/completions',
          'server.address': 'api.openai.com',
          'server.port': 443,
          'http.response.status_code': i % 16 === 3 ? 429 : 200,
          'http.request.header.authorization': [`Bearer sk-proj-${hex(i * 7919, 24)}`],
          'http.request.header.content-type': ['application/json'],
          'user_agent.original': 'OpenAI/Python 1.54.3',
        },
        events:
          i % 16 === 3
            ? [
                {
                  name: 'exception',
                  timeUnixNano: base.endTimeUnixNano,
                  attributes: {
                    'exception.type': 'openai.RateLimitError',
                    'exception.message':
                      "Error code: 429 - {'error': {'message': 'Rate limit reached for gpt-4o-mini in organization org-abc on tokens per min (TPM): Limit 200000, Used 199650, Requested 1234.', 'type': 'tokens'}}",
                    'exception.stacktrace':
                      'Traceback (most recent call last):\n  File "/app/agent.py", line 88, in run\n    resp = client.chat.completions.create(**params)\n  File "/usr/lib/python3.12/site-packages/openai/_base_client.py", line 1059, in request\n    raise self._make_status_error_from_response(err.response) from None',
                  },
                },
              ]
            : [],
      };
    case 5:
      return {
        ...base,
        name: 'retrieve',
        attributes: {
          'openinference.span.kind': 'RETRIEVER',
          'input.value': 'baggage allowance economy Air France',
          'retrieval.documents': JSON.stringify([
            { id: 'doc-118', score: 0.82, content: 'Economy fares include one 23 kg checked bag.' },
            {
              id: 'doc-342',
              score: 0.77,
              content: 'Cabin baggage: 1 item up to 12 kg, 55x35x25 cm.',
            },
            { id: 'doc-77', score: 0.61, content: 'Extra bags cost 70 EUR when added online.' },
          ]),
        },
      };
    case 6:
      return {
        ...base,
        name: 'SELECT orders',
        attributes: {
          'db.system': 'postgresql',
          'db.namespace': 'bookings',
          'db.query.text':
            'SELECT id, status, total FROM orders WHERE customer_id = $1 AND created_at > $2',
          'db.response.returned_rows': 3,
          'server.address': '10.0.3.17',
        },
      };
    default:
      return {
        ...base,
        name: 'charge_card',
        attributes: {
          'openinference.span.kind': 'TOOL',
          'tool.name': 'charge_card',
          'tool.parameters':
            i % 5 === 2
              ? `{"card":"4111 1111 1111 1111","amount":398,"currency":"EUR","api_key":"k_${hex(i, 16)}"}`
              : '{"card_ref":"pm_1Q2w3E4r5T6y","amount":398,"currency":"EUR"}',
          'output.value': `{"status":"succeeded","charge_id":"ch_${hex(i * 31, 16)}","created":${1763712000 + i}}`,
        },
      };
  }
}

/** Spans `from`..`from + count` of the mix, as fresh objects with flat strings. */
export function buildSpans(from = 0, count = SPANS): Span[] {
  const spans: Span[] = [];
  let resource: Attributes = {};
  for (let i = from; i < from + count; i++) {
    if (i === from || i % SPANS_PER_TRACE === 0) {
      // A JSON round trip gives flat strings and fresh objects, as the OTLP decoder does.
      resource = JSON.parse(
        JSON.stringify({
          'service.name': 'travel-agent',
          'service.version': '1.4.2',
          'deployment.environment.name': 'production',
          'host.name': `travel-agent-7d9f8b6c5-${hex(Math.floor(i / SPANS_PER_TRACE) % 50, 5)}`,
          'process.pid': 4242,
          'telemetry.sdk.name': 'opentelemetry',
          'telemetry.sdk.language': 'python',
          'telemetry.sdk.version': '1.27.0',
        }),
      );
    }
    const { resource: _, ...rest } = span(i, resource);
    spans.push({ ...JSON.parse(JSON.stringify(rest)), resource });
  }
  return spans;
}

interface Rate {
  /** Spans per second of wall time, best pass. */
  wall: number;
  /** Spans per second of process CPU time (user + system), best pass: steadier on a busy host. */
  cpu: number;
}

/**
 * Runs `run` on each batch of SPANS spans right after building it (untimed), as the server redacts
 * a request's spans right after decoding them; the timed parts are summed per pass.
 */
function measure(run: (batch: Span[]) => unknown): Rate {
  run(buildSpans(0, BATCH));
  let wall = Number.POSITIVE_INFINITY;
  let cpu = Number.POSITIVE_INFINITY;
  for (let pass = 0; pass < PASSES; pass++) {
    let passWall = 0;
    let passCpu = 0;
    for (let from = 0; from < SPANS; from += BATCH) {
      const batch = buildSpans(from, BATCH);
      collectGarbage({ type: 'minor' });
      const cpuStart = process.cpuUsage();
      const started = performance.now();
      run(batch);
      passWall += performance.now() - started;
      const used = process.cpuUsage(cpuStart);
      passCpu += used.user + used.system;
    }
    wall = Math.min(wall, passWall / 1000);
    cpu = Math.min(cpu, passCpu / 1e6);
  }
  return { wall: SPANS / wall, cpu: SPANS / cpu };
}

function row(name: string, rate: Rate, bytesPerSpan: number): string {
  const fmt = (n: number) => Math.round(n).toLocaleString('en-US').padStart(10);
  return `${name.padEnd(40)} ${fmt(rate.wall)} spans/s wall ${fmt(rate.cpu)} spans/s cpu ${((rate.wall * bytesPerSpan) / 1e6).toFixed(0).padStart(5)} MB/s`;
}

export async function main(): Promise<void> {
  const bytesPerSpan = Buffer.byteLength(JSON.stringify(buildSpans(0, 10_000))) / 10_000;
  console.log(
    `${SPANS} spans in batches of ${BATCH}, ${bytesPerSpan.toFixed(0)} bytes/span as JSON, ${SPANS_PER_TRACE} spans per resource, best of ${PASSES} passes`,
  );
  const allPii = ['email', 'us-ssn', 'credit-card', 'phone'];
  const cases: [string, RedactionConfig][] = [
    ['default keys, secret detectors off', { secrets: false }],
    ['defaults: keys + secret detectors', {}],
    ['defaults + all PII detectors', { pii: allPii }],
    [
      'defaults + all PII + 3 RE2 patterns',
      {
        pii: allPii,
        patterns: ['sk-(?:proj-)?[A-Za-z0-9]{20,}', 'AKIA[0-9A-Z]{16}', 'ghp_[A-Za-z0-9]{36}'],
      },
    ],
  ];
  const rates: Rate[] = [];
  for (const [name, config] of cases) {
    const redactor = compileRedaction(config);
    const rate = measure((batch) => redactor.redactSpans(batch));
    rates.push(rate);
    console.log(row(name, rate, bytesPerSpan));
  }
  const [off, on] = rates as [Rate, Rate];
  console.log(
    `secret detectors: ${(1e6 / on.cpu - 1e6 / off.cpu).toFixed(2)} µs of CPU per span (${(1e6 / off.cpu).toFixed(2)} → ${(1e6 / on.cpu).toFixed(2)} µs)`,
  );
  // Peer: a deep copy of the same spans (what any copying pass over them costs at least).
  console.log(
    row(
      'peer: structuredClone of the spans',
      measure((batch) => structuredClone(batch)),
      bytesPerSpan,
    ),
  );
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
