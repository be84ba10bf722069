import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import { partialSuccess } from '../../test/support/otel.js';
import { storeVariants } from '../../test/support/stores.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { outputText } from '../core/index.js';

/**
 * `POST /v1/logs`: the GenAI events opentelemetry-instrumentation-openai-v2 sent as OTLP log
 * records (test/fixtures/otlp/otel-genai-openai-v2-events*, recorded from the real library),
 * joined to the spans of `/v1/traces` whichever arrives first.
 */
const FIXTURES = join(process.cwd(), 'test', 'fixtures', 'otlp');
const FIXTURE = 'otel-genai-openai-v2-events';
const fixture = (file: string) => readFileSync(join(FIXTURES, `${FIXTURE}${file}`));
const TRACE_ID = JSON.parse(fixture('.json').toString('utf8')).resourceSpans[0].scopeSpans[0]
  .spans[0].traceId as string;
const QUESTION = 'What is the weather in Paris and what should I wear?';
const ANSWER = /Wear a light jacket over a t-shirt/;

const PB = { 'content-type': 'application/x-protobuf' };
const JSON_CT = { 'content-type': 'application/json' };

/** One OTLP/JSON logs request of hand-made records. */
function logsJson(records: Record<string, unknown>[]): string {
  return JSON.stringify({ resourceLogs: [{ scopeLogs: [{ logRecords: records }] }] });
}

describe.each(storeVariants())('OTLP/HTTP logs (GenAI events) on $name', (variant) => {
  let t: TestApp;
  let dispose: () => Promise<void> = async () => undefined;
  const keys: Record<string, string> = {};
  beforeAll(async () => {
    const store = await variant.open();
    dispose = store.dispose;
    t = await testApp({ ...store.overrides, auth: {}, traces: { completion_grace: '0s' } });
    for (const project of ['logs-first', 'spans-first', 'json', 'misc']) {
      keys[project] = (
        await t.app.keys.create(OPEN_PRINCIPAL, { project, roles: ['ingest'] })
      ).secret;
    }
    keys.viewer = (
      await t.app.keys.create(OPEN_PRINCIPAL, { project: 'misc', roles: ['viewer'] })
    ).secret;
  });
  afterAll(async () => {
    await t?.close();
    await dispose();
  });

  const post = (
    path: '/v1/logs' | '/v1/traces',
    body: Buffer | string,
    headers: Record<string, string>,
    key: string | undefined,
  ) =>
    t.app.server.inject({
      method: 'POST',
      url: path,
      payload: body,
      headers: { ...headers, ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) },
    });

  async function record(project: string) {
    const found = await t.app.store.traces.get(project, TRACE_ID);
    return found?.record;
  }

  it('gives a trace its messages from log records that arrived before its spans', async () => {
    const logs = await post('/v1/logs', fixture('.logs.1.pb'), PB, keys['logs-first']);
    expect(logs.statusCode).toBe(200);
    expect(logs.headers['content-type']).toBe('application/x-protobuf');
    expect(logs.rawPayload.length).toBe(0);
    // Log records alone open the trace but never complete it: they bring no root.
    await t.app.completer.tick();
    expect(await record('logs-first')).toBeUndefined();

    expect((await post('/v1/traces', fixture('.1.pb'), PB, keys['logs-first'])).statusCode).toBe(
      200,
    );
    await t.app.completer.tick();
    const got = await record('logs-first');
    expect(got?.input).toBe(QUESTION);
    expect(outputText(got?.output)).toMatch(ANSWER);
    const llm = got?.trajectory?.filter((s) => s.type === 'llm') ?? [];
    expect(llm).toHaveLength(3);
    expect(llm[0]?.input).toEqual([
      { role: 'system', content: 'You are a helpful travel assistant. Use the tools to answer.' },
      { role: 'user', content: QUESTION },
    ]);
    expect(llm.map((s) => s.model)).toEqual(Array(3).fill('gpt-4o-mini-2024-07-18'));
  });

  it('re-completes a trace with the messages of log records that arrive after it completed', async () => {
    const key = keys['spans-first'];
    expect((await post('/v1/traces', fixture('.1.pb'), PB, key)).statusCode).toBe(200);
    await t.app.completer.tick();
    const before = await t.app.store.traces.get('spans-first', TRACE_ID);
    expect(before?.record.input).toBeUndefined();

    const gz = await post(
      '/v1/logs',
      gzipSync(fixture('.logs.1.pb')),
      {
        ...PB,
        'content-encoding': 'gzip',
      },
      key,
    );
    expect(gz.statusCode).toBe(200);
    await t.app.completer.tick();
    const after = await t.app.store.traces.get('spans-first', TRACE_ID);
    expect(after?.record.input).toBe(QUESTION);
    expect(outputText(after?.record.output)).toMatch(ANSWER);
    expect(after?.trace.digest).not.toBe(before?.trace.digest);

    // An exporter's retry of the same logs changes nothing.
    expect((await post('/v1/logs', fixture('.logs.1.pb'), PB, key)).statusCode).toBe(200);
    await t.app.completer.tick();
    expect((await t.app.store.traces.get('spans-first', TRACE_ID))?.trace.digest).toBe(
      after?.trace.digest,
    );
  });

  it('reads OTLP/JSON logs and answers in JSON', async () => {
    const key = keys.json;
    const logs = await post('/v1/logs', fixture('.logs.json'), JSON_CT, key);
    expect(logs.statusCode).toBe(200);
    expect(logs.json()).toEqual({});
    expect((await post('/v1/traces', fixture('.json'), JSON_CT, key)).statusCode).toBe(200);
    await t.app.completer.tick();
    expect((await record('json'))?.input).toBe(QUESTION);
  });

  it('refuses GenAI events that name no span and ignores other records, saying so', async () => {
    const traceId = 'c'.repeat(32);
    const body = logsJson([
      { traceId, spanId: 'd'.repeat(16), eventName: 'gen_ai.user.message', body: {} },
      { spanId: 'd'.repeat(16), eventName: 'gen_ai.user.message' },
      { traceId, spanId: '0'.repeat(16), eventName: 'gen_ai.choice' },
      { traceId, spanId: 'd'.repeat(16), body: { stringValue: 'GET /healthz 200' } },
    ]);
    const res = await post('/v1/logs', body, JSON_CT, keys.misc);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      partialSuccess: {
        rejectedLogRecords: '2',
        errorMessage:
          '2 log records rejected: GenAI event log record without a trace id of 16 non-zero bytes; ' +
          'GenAI event log record without a span id of 8 non-zero bytes\n' +
          '1 log records accepted but not stored: only GenAI events (event names gen_ai.*) are kept',
      },
    });
    const pb = await post('/v1/logs', Buffer.from(new Uint8Array(0)), PB, keys.misc);
    expect(pb.statusCode).toBe(200);
    expect(partialSuccess(pb.rawPayload)).toEqual({ rejected: 0, message: '' });
  });

  it('redacts log records as span events before the first write', async () => {
    const traceId = 'e'.repeat(32);
    const spanId = 'f'.repeat(16);
    const body = logsJson([
      {
        traceId,
        spanId,
        eventName: 'gen_ai.user.message',
        attributes: [{ key: 'api_key', value: { stringValue: 'SENTINEL-KEY-1' } }],
        body: {
          kvlistValue: {
            values: [
              { key: 'content', value: { stringValue: '{"password": "SENTINEL-PW-2"}' } },
              { key: 'authorization', value: { stringValue: 'Bearer SENTINEL-3' } },
            ],
          },
        },
      },
    ]);
    expect((await post('/v1/logs', body, JSON_CT, keys.misc)).statusCode).toBe(200);
    const span = {
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                { traceId, spanId, name: 'chat', startTimeUnixNano: '1', endTimeUnixNano: '2' },
              ],
            },
          ],
        },
      ],
    };
    expect((await post('/v1/traces', JSON.stringify(span), JSON_CT, keys.misc)).statusCode).toBe(
      200,
    );
    const stored = JSON.stringify(await t.app.store.traces.spans('misc', traceId));
    expect(stored).toContain('gen_ai.user.message');
    expect(stored).not.toContain('SENTINEL');
    expect(stored).toContain('[REDACTED]');
  });

  it('answers like /v1/traces: 400 undecodable, 415 other types, 401/403 without the right key', async () => {
    const bad = await post('/v1/logs', fixture('.logs.1.pb').subarray(0, 40), PB, keys.misc);
    expect(bad.statusCode).toBe(400);
    expect(bad.headers['content-type']).toBe('application/x-protobuf');
    const badJson = await post('/v1/logs', '{"resourceLogs": [', JSON_CT, keys.misc);
    expect(badJson.statusCode).toBe(400);
    expect(badJson.json().code).toBe(3);
    expect(
      (await post('/v1/logs', 'x', { 'content-type': 'text/plain' }, keys.misc)).statusCode,
    ).toBe(415);
    expect(
      (await post('/v1/logs', Buffer.from('x'), { ...PB, 'content-encoding': 'br' }, keys.misc))
        .statusCode,
    ).toBe(415);
    expect((await post('/v1/logs', fixture('.logs.1.pb'), PB, undefined)).statusCode).toBe(401);
    expect((await post('/v1/logs', fixture('.logs.1.pb'), PB, keys.viewer)).statusCode).toBe(403);
  });
});

describe.each(storeVariants())('OTLP/HTTP logs past max_events_per_span on $name', (variant) => {
  const MAX = 4;
  let t: TestApp;
  let dispose: () => Promise<void> = async () => undefined;
  beforeAll(async () => {
    const store = await variant.open();
    dispose = store.dispose;
    t = await testApp({
      ...store.overrides,
      traces: { completion_grace: '0s', limits: { max_events_per_span: MAX } },
    });
  });
  afterAll(async () => {
    await t?.close();
    await dispose();
  });

  it('joins at most max_events_per_span events to a span, counting the rest as dropped', async () => {
    const traceId = '4'.repeat(32);
    const spanId = '5'.repeat(16);
    const event = (i: number) => ({ name: `own.${i}`, timeUnixNano: '1000' });
    const span = {
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                {
                  traceId,
                  spanId,
                  name: 'chat',
                  startTimeUnixNano: '1',
                  endTimeUnixNano: '2',
                  attributes: [{ key: 'gen_ai.operation.name', value: { stringValue: 'chat' } }],
                  events: [event(1), event(2)],
                },
              ],
            },
          ],
        },
      ],
    };
    const message = (n: number) => ({
      traceId,
      spanId,
      timeUnixNano: String(10 + n),
      eventName: 'gen_ai.user.message',
      body: { kvlistValue: { values: [{ key: 'content', value: { stringValue: `m${n}` } }] } },
    });
    const send = (path: string, payload: string) =>
      t.app.server.inject({ method: 'POST', url: path, payload, headers: JSON_CT });
    expect((await send('/v1/traces', JSON.stringify(span))).statusCode).toBe(200);
    // Five messages in two requests (one sent twice, added once): two fit beside the span's own.
    expect((await send('/v1/logs', logsJson([1, 2, 3].map(message)))).statusCode).toBe(200);
    expect((await send('/v1/logs', logsJson([3, 4, 5].map(message)))).statusCode).toBe(200);
    await t.app.completer.tick();
    const found = await t.app.store.traces.get('default', traceId);
    const [step] = found?.record.trajectory ?? [];
    expect(step?.input).toEqual([
      { role: 'user', content: 'm1' },
      { role: 'user', content: 'm2' },
    ]);
    expect(step?.dropped).toEqual({ events: 3 });
    expect(found?.record.metadata?.dropped).toEqual({ events: 3 });
  });
});
