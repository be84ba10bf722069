/**
 * Hostile keys, names and patterns sent from outside to a real server: each request must answer
 * (2xx with what was cut or dropped visible on the stored trace, or a clear 4xx) while `/healthz`
 * keeps its p99 budget, and the server must still stop at once on SIGTERM.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  any,
  hexBytes,
  keyValue,
  request,
  span,
  varint,
} from '../../src/ingest/otlp/wire.testkit.js';
import { agentTrace, jsonBody, protobufBody, recordSpans } from '../support/otel.js';
import { eventually } from '../support/process.js';
import {
  type AdversarialServer,
  describeHealth,
  HEALTHZ_P99_BUDGET_MS,
  probeWhile,
  type Responsiveness,
  startAdversarialServer,
} from './responsiveness.js';

const MiB = 1 << 20;
/** A 1 MiB key of capitals: its word form took hours on the regex chain redaction used. */
const CAPS = 'A'.repeat(MiB);
/** What a 1 MiB key or name becomes under the default 1 KiB caps. */
const cut = (c: string, bytes: number) => `${c.repeat(1024)}…[truncated ${bytes - 1024} bytes]`;
/** `^(a+)+$` against 41 `a`s and a `!`: about 2^41 steps on a backtracking engine. */
const REDOS = { type: 'string', pattern: '^(a+)+$' };
const REDOS_OUTPUT = JSON.stringify(`${'a'.repeat(41)}!`);

interface TraceView {
  trace: { name: string; labels: Record<string, string> };
  record: {
    metadata: { dropped?: Record<string, number> };
    trajectory: {
      type: string;
      error: string;
      attributes: Record<string, unknown>;
      dropped?: Record<string, number>;
    }[];
  };
}

const TRACE_ID = (n: number) => `5b8efff798038103d269b633813f${String(n).padStart(4, '0')}`;

/** A raw OTLP/JSON request of one span (for what SDKs would not send: 100k attributes). */
function otlpJson(traceId: string, span: Record<string, unknown>): string {
  return JSON.stringify({
    resourceSpans: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: 'hostile' } }] },
        scopeSpans: [
          {
            spans: [
              {
                traceId,
                spanId: 'eee19b7ec3c1b174',
                name: 'chat gpt-4o',
                startTimeUnixNano: '1767225600000000000',
                endTimeUnixNano: '1767225601000000000',
                ...span,
              },
            ],
          },
        ],
      },
    ],
  });
}

const JSON_TYPE = 'application/json';

/** A direct evaluation of the json-schema evaluator on the ReDoS output. */
const evaluate = (schema: object) =>
  JSON.stringify({
    records: [{ id: 'r1', output: REDOS_OUTPUT }],
    evaluators: [{ ref: 'json-schema', params: { schema } }],
  });

const chat = [
  { key: 'gen_ai.operation.name', value: { stringValue: 'chat' } },
  { key: 'gen_ai.request.model', value: { stringValue: 'gpt-4o' } },
];

describe('hostile keys, names and patterns from outside', () => {
  let server: AdversarialServer;
  beforeAll(async () => {
    // Values up to 4 MiB stay whole, so a 1 MiB JSON key inside one still parses as JSON. The
    // requests are prepared in a worker thread (the default prepares them in-process; the other
    // suites cover that).
    server = await startAdversarialServer(
      'traces:\n  completion_grace: 100ms\n  max_attribute_bytes: 4194304\n  ingest_threads: 1\n',
    );
    // Small requests down the same paths first (keys and names cut, attributes dropped, secret
    // pairs, schema patterns), so the budget measures the hostile sizes, not a cold process.
    for (let i = 0; i < 3; i++) {
      const key = 'K'.repeat(2048);
      const { traceId, spans } = sdkTrace(
        { [`touchstone.label.${key}`]: 'x' },
        { [key]: 'v', 'input.value': JSON.stringify({ [key]: 1, api_key: 'k' }) },
      );
      await send('/v1/traces', jsonBody(spans), JSON_TYPE);
      await send('/v1/traces', protobufBody(spans), 'application/x-protobuf');
      await completed(traceId);
      const many = [...chat];
      for (let k = 0; k < 300; k++) many.push({ key: `k${k}`, value: { stringValue: 'v' } });
      const status = { code: 2, message: 'password=a:'.repeat(100) };
      const warm = otlpJson(TRACE_ID(100 + i), { name: key, attributes: many, status });
      await send('/v1/traces', warm, JSON_TYPE);
      await send('/v1alpha1/evaluate', evaluate({ type: 'string', pattern: '^a+$' }), JSON_TYPE);
    }
  }, 60_000);
  afterAll(() => server?.stop());

  async function send(path: string, body: string | Buffer, contentType: string) {
    const res = await fetch(`${server.base}${path}`, {
      method: 'POST',
      body,
      headers: { 'content-type': contentType },
    });
    return { status: res.status, text: await res.text() };
  }

  /** What `/healthz` did while each hostile request of the current test ran. */
  let healths: Responsiveness[] = [];
  // After the test's own assertions, so a failure says whether the answer was right too.
  afterEach(() => {
    const measured = healths;
    healths = [];
    for (const health of measured) {
      expect(health.p99, describeHealth(health)).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
      expect(health.failures, describeHealth(health)).toBe(0);
    }
  });

  /** Sends while probing `/healthz`, whose figures the test's afterEach holds to the budget. */
  async function hostile(path: string, body: string | Buffer, contentType: string) {
    const { result, health } = await probeWhile(server.base, () => send(path, body, contentType));
    healths.push(health);
    return result;
  }

  const completed = (traceId: string) =>
    eventually(async () => {
      const res = await fetch(`${server.base}/v1alpha1/traces/${traceId}`);
      return res.status === 200 ? ((await res.json()) as TraceView) : undefined;
    }, 30_000);

  const sdkTrace = (resource: Record<string, string>, extra: Record<string, string> = {}) => {
    let traceId = '';
    const spans = recordSpans({ 'service.name': 'hostile', ...resource }, (tr) => {
      traceId = agentTrace(tr, { extra });
    });
    return { traceId, spans };
  };

  it.each([
    ['OTLP/JSON', 'application/json'],
    ['OTLP protobuf', 'application/x-protobuf'],
  ])('takes a 1 MiB attribute key of capitals over %s, cut to 1 KiB', async (_, type) => {
    const { traceId, spans } = sdkTrace({}, { [CAPS]: 'v' });
    const body = type === 'application/json' ? jsonBody(spans) : protobufBody(spans);
    expect((await hostile('/v1/traces', body, type)).status).toBe(200);
    const root = (await completed(traceId)).record.trajectory.find((s) => s.type === 'agent');
    expect(root?.attributes[cut('A', MiB)]).toBe('v');
  });

  it('takes a 1 MiB JSON key of capitals inside a string attribute, redacting in linear time', async () => {
    // No default name or suffix matches it, so its word form is computed (hours on the regex
    // chain); the other key shows the JSON was redacted.
    const key = 'TOKEN'.repeat(Math.floor(MiB / 5));
    const value = JSON.stringify({ [key]: 'kept', api_key: 'hunter2' });
    const { traceId, spans } = sdkTrace({}, { 'input.value': value });
    expect((await hostile('/v1/traces', jsonBody(spans), JSON_TYPE)).status).toBe(200);
    const root = (await completed(traceId)).record.trajectory.find((s) => s.type === 'agent');
    const stored = root?.attributes['input.value'] as string;
    // Compared as booleans: a failure must not print a megabyte.
    expect(stored === JSON.stringify({ [key]: 'kept', api_key: '[REDACTED]' })).toBe(true);
  });

  it('takes 64 KiB of `password=a:` pairs in a status message, scanned once', async () => {
    const traceId = TRACE_ID(1);
    const body = otlpJson(traceId, {
      attributes: chat,
      status: { code: 2, message: 'password=a:'.repeat(6_000) },
    });
    expect((await hostile('/v1/traces', body, 'application/json')).status).toBe(200);
    expect((await completed(traceId)).record.trajectory[0]?.error).toBe('password=[REDACTED]');
  });

  it('takes a `touchstone.label.<1 MiB>` resource key: the label is cut', async () => {
    const { traceId, spans } = sdkTrace({ [`touchstone.label.${CAPS}`]: 'x' });
    expect(
      (await hostile('/v1/traces', protobufBody(spans), 'application/x-protobuf')).status,
    ).toBe(200);
    const labels = (await completed(traceId)).trace.labels;
    expect(labels[`${'A'.repeat(1024 - 17)}…[truncated ${MiB - 1007} bytes]`]).toBe('x');
  });

  it('takes a span name of 1 MiB: the name is cut', async () => {
    const traceId = TRACE_ID(2);
    const body = otlpJson(traceId, { name: 'N'.repeat(MiB) });
    expect((await hostile('/v1/traces', body, 'application/json')).status).toBe(200);
    expect((await completed(traceId)).trace.name).toBe(cut('N', MiB));
  });

  it('takes 100k attributes on one span: 128 are kept, the rest counted as dropped', async () => {
    // Protobuf, built by hand: SDKs keep 128 themselves.
    const attributes = [
      keyValue('gen_ai.operation.name', any.string('chat')),
      keyValue('gen_ai.request.model', any.string('gpt-4o')),
    ];
    for (let i = 0; i < 100_000; i++) attributes.push(keyValue(`k${i}`, any.string('v')));
    const body = request([
      span({ traceId: hexBytes(TRACE_ID(3)), attributes, extra: [varint(10, 7)] }),
    ]);
    const sent = await hostile('/v1/traces', Buffer.from(body), 'application/x-protobuf');
    expect(sent.status).toBe(200);
    const { record } = await completed(TRACE_ID(3));
    const dropped = 100_002 - 128 + 7;
    expect(Object.keys(record.trajectory[0]!.attributes)).toHaveLength(128);
    expect(record.trajectory[0]!.dropped).toEqual({ attributes: dropped });
    expect(record.metadata.dropped).toEqual({ attributes: dropped });
  });

  it('evaluates a catastrophic json-schema pattern on RE2, and refuses lookbehind with a 400', async () => {
    const ok = await hostile('/v1alpha1/evaluate', evaluate(REDOS), 'application/json');
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.text).results[0].results[0].scores[0]).toMatchObject({ passed: false });
    const refused = await hostile(
      '/v1alpha1/evaluate',
      evaluate({ properties: { a: { pattern: '(?<=x)y' } } }),
      'application/json',
    );
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.text).error.message).toContain('/properties/a/pattern');
  });

  it('refuses run targets whose template or output path backtracked, with a 400', async () => {
    const run = (target: object) =>
      JSON.stringify({
        dataset: { records: [{ id: 'r1', input: 'q' }] },
        target: { kind: 'http', url: 'https://agent.example.com/run', ...target },
        evaluators: [{ ref: 'exact-match' }],
      });
    for (const target of [
      { bodyTemplate: `{"q": {{input}}, "pad": "{{${' '.repeat(100_000)}"}` },
      { outputPath: `$['${'\\'.repeat(500)}` },
    ]) {
      const res = await hostile(
        '/v1alpha1/runs?validate_only=true',
        run(target),
        'application/json',
      );
      expect(res.status).toBe(400);
    }
  });

  // Last: it stops the server.
  it('stops at once on SIGTERM right after a hostile request', async () => {
    const evaluate = JSON.stringify({
      records: Array.from({ length: 50 }, (_, i) => ({ id: `r${i}`, output: REDOS_OUTPUT })),
      evaluators: [{ ref: 'json-schema', params: { schema: REDOS } }],
    });
    const inFlight = send('/v1alpha1/evaluate', evaluate, 'application/json').catch(
      () => undefined,
    );
    await new Promise((r) => setTimeout(r, 20));
    const started = performance.now();
    server.server.proc.kill('SIGTERM');
    const code = await Promise.race([
      server.server.exited,
      new Promise<string>((r) => setTimeout(() => r('still running'), 15_000)),
    ]);
    await inFlight;
    expect(code).toBe(0);
    expect(performance.now() - started).toBeLessThan(10_000);
  }, 30_000);
});
