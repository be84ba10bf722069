import { gzipSync } from 'node:zlib';
import { BinaryReader } from '@bufbuild/protobuf/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import {
  agentTrace,
  jsonBody,
  partialSuccess,
  protobufBody,
  recordSpans,
} from '../../test/support/otel.js';
import { storeVariants } from '../../test/support/stores.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { REJECTED_SPANS_PREFIX } from './otlp-wire.js';

const PB = { 'content-type': 'application/x-protobuf' };
const JSON_CT = { 'content-type': 'application/json' };

describe('OTLP/HTTP ingest', () => {
  let t: TestApp;
  let ingestKey: string;
  let viewerKey: string;
  beforeAll(async () => {
    t = await testApp({ auth: {}, traces: { completion_grace: '0s' } });
    ingestKey = (
      await t.app.keys.create(OPEN_PRINCIPAL, {
        project: 'p1',
        roles: ['ingest'],
        labels: { team: 'search' },
      })
    ).secret;
    viewerKey = (await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: ['viewer'] }))
      .secret;
  });
  afterAll(() => t.close());

  const post = (
    body: Buffer | string,
    headers: Record<string, string>,
    key: string | null = ingestKey,
  ) =>
    t.app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: body,
      headers: { ...headers, ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) },
    });

  it('stores protobuf spans before answering 200 with an empty ExportTraceServiceResponse', async () => {
    let traceId = '';
    const spans = recordSpans({ 'service.name': 'weather-agent' }, (tr) => {
      traceId = agentTrace(tr);
    });
    const res = await post(protobufBody(spans), PB);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/x-protobuf');
    expect(res.rawPayload.length).toBe(0);
    // Durable before the answer: the spans are in the database now.
    expect(await t.app.store.traces.spans('p1', traceId)).toHaveLength(3);

    await t.app.completer.tick();
    const got = await t.app.server.inject({
      url: `/v1alpha1/traces/${traceId}`,
      headers: { authorization: `Bearer ${viewerKey}` },
    });
    expect(got.statusCode).toBe(200);
    const { trace, record } = got.json();
    expect(trace).toMatchObject({
      traceId,
      project: 'p1',
      service: 'weather-agent',
      name: 'invoke_agent weather',
      labels: { team: 'search' },
    });
    expect(trace.steps).toBeGreaterThanOrEqual(2);
    expect(record.trajectory.map((s: { type: string }) => s.type)).toEqual(
      expect.arrayContaining(['llm', 'tool']),
    );
  });

  it('accepts OTLP/JSON and gzip, answering in the request encoding', async () => {
    const spans = recordSpans({ 'service.name': 'json-agent' }, (tr) => agentTrace(tr));
    const res = await post(jsonBody(spans), JSON_CT);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({});
    const gz = await post(gzipSync(protobufBody(spans)), { ...PB, 'content-encoding': 'gzip' });
    expect(gz.statusCode).toBe(200);
    const gzJson = await post(gzipSync(jsonBody(spans)), {
      ...JSON_CT,
      'content-encoding': 'gzip',
    });
    expect(gzJson.statusCode).toBe(200);
  });

  it('rejects spans with an all-zero trace id one by one (partial success), keeping the rest', async () => {
    const spans = recordSpans({ 'service.name': 'partial' }, (tr) => agentTrace(tr));
    const body = JSON.parse(jsonBody(spans));
    const keptTrace = body.resourceSpans[0].scopeSpans[0].spans[0].traceId;
    body.resourceSpans[0].scopeSpans[0].spans[1].traceId = '0'.repeat(32);
    const res = await post(JSON.stringify(body), JSON_CT);
    expect(res.statusCode).toBe(200);
    expect(res.json().partialSuccess.rejectedSpans).toBe('1');
    expect(res.json().partialSuccess.errorMessage).toMatch(/zero/);
    expect(await t.app.store.traces.spans('p1', keptTrace)).toHaveLength(2);

    const pb = await post(protobufBody(spans).fill(0, 0, 0), PB);
    expect(pb.statusCode).toBe(200);
    expect(partialSuccess(pb.rawPayload).rejected).toBe(0);
  });

  it('answers undecodable bodies with 400 and a google.rpc.Status, never echoing content', async () => {
    const spans = recordSpans({ 'service.name': 'x', secret: 'hunter2-secret' }, (tr) =>
      agentTrace(tr),
    );
    const truncated = protobufBody(spans).subarray(0, 60);
    const res = await post(truncated, PB);
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toBe('application/x-protobuf');
    const status = new BinaryReader(res.rawPayload);
    expect(status.tag()[0]).toBe(1);
    expect(status.int32()).toBe(3);
    expect(res.rawPayload.toString('latin1')).not.toContain('hunter2');

    const badJson = await post('{"resourceSpans": [', JSON_CT);
    expect(badJson.statusCode).toBe(400);
    expect(badJson.json().code).toBe(3);
  });

  it('refuses other content types (415), bad gzip (400), and bodies over the limit after inflating (413)', async () => {
    expect((await post('x', { 'content-type': 'text/plain' })).statusCode).toBe(415);
    expect(
      (await post(Buffer.from('not gzip'), { ...PB, 'content-encoding': 'gzip' })).statusCode,
    ).toBe(400);
    expect((await post(Buffer.from('x'), { ...PB, 'content-encoding': 'br' })).statusCode).toBe(
      415,
    );
    const bomb = gzipSync(Buffer.alloc(17 * 1024 * 1024));
    const res = await post(bomb, { ...PB, 'content-encoding': 'gzip' });
    expect(res.statusCode).toBe(413);
  });

  it('needs a key that may write traces', async () => {
    const body = protobufBody(recordSpans({ 'service.name': 'x' }, (tr) => agentTrace(tr)));
    expect((await post(body, PB, null)).statusCode).toBe(401);
    const forbidden = await post(body, PB, viewerKey);
    expect(forbidden.statusCode).toBe(403);
    expect(forbidden.headers['content-type']).toBe('application/x-protobuf');
  });

  it('redacts secrets before the first write', async () => {
    let traceId = '';
    const spans = recordSpans({ 'service.name': 'leaky', 'db.password': 'pa55word' }, (tr) => {
      traceId = agentTrace(tr, {
        apiKey: 'sk-live-SENTINEL-123',
        extra: { api_key: 'SENTINEL-KEY-456' },
      });
    });
    expect((await post(protobufBody(spans), PB)).statusCode).toBe(200);
    const stored = JSON.stringify(await t.app.store.traces.spans('p1', traceId));
    expect(stored).not.toContain('SENTINEL');
    expect(stored).not.toContain('pa55word');
    expect(stored).toContain('[REDACTED]');
  });

  it('keeps huge attributes up to the limit with a marker, and survives invalid UTF-8', async () => {
    let traceId = '';
    const spans = recordSpans({ 'service.name': 'big' }, (tr) => {
      traceId = agentTrace(tr, { extra: { 'input.value': 'x'.repeat(2 * 1024 * 1024) } });
    });
    expect((await post(protobufBody(spans), PB)).statusCode).toBe(200);
    const root = (await t.app.store.traces.spans('p1', traceId)).find((s) => s.parentSpanId === '');
    const value = root?.attributes['input.value'] as string;
    expect(value.length).toBeLessThan(70 * 1024);
    expect(value).toMatch(/truncated/);
  });
});

describe('OTLP/HTTP ingest limits (traces.limits)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await testApp({
      traces: {
        completion_grace: '0s',
        limits: {
          max_attribute_key_bytes: 40,
          max_name_bytes: 12,
          max_attributes_per_span: 3,
          max_events_per_span: 1,
        },
      },
    });
  });
  afterAll(() => t.close());

  const kv = (key: string, value: string) => ({ key, value: { stringValue: value } });

  it('cuts keys and names, drops what is over a count and shows the dropped counts', async () => {
    const traceId = '5b8efff798038103d269b633813fc60c';
    const body = JSON.stringify({
      resourceSpans: [
        {
          resource: { attributes: [kv('touchstone.label.team-with-a-very-long-name', 'search')] },
          scopeSpans: [
            {
              spans: [
                {
                  traceId,
                  spanId: 'eee19b7ec3c1b174',
                  name: 'chat gpt-4o with a long name',
                  startTimeUnixNano: '1767225600000000000',
                  endTimeUnixNano: '1767225601000000000',
                  attributes: [
                    kv('gen_ai.operation.name', 'chat'),
                    kv('gen_ai.request.model', 'gpt-4o'),
                    kv('a.key.longer.than.forty.bytes.for.sure.yes', 'v'),
                    kv('dropped.one', '1'),
                    kv('dropped.two', '2'),
                  ],
                  droppedAttributesCount: 10,
                  events: [{ name: 'kept' }, { name: 'dropped' }],
                },
              ],
            },
          ],
        },
      ],
    });
    const res = await t.app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: body,
      headers: JSON_CT,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({});
    await t.app.completer.tick();
    const got = await t.app.server.inject({ url: `/v1alpha1/traces/${traceId}` });
    expect(got.statusCode).toBe(200);
    const { trace, record } = got.json();
    expect(trace.name).toBe('chat gpt-4o …[truncated 16 bytes]');
    expect(trace.labels).toEqual({ 'team-with-a-very-long-n…[truncated 3 bytes]': 'search' });
    const step = record.trajectory[0];
    expect(step).toMatchObject({ type: 'llm', model: 'gpt-4o' });
    expect(step.attributes).toEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'gpt-4o',
      'a.key.longer.than.forty.bytes.for.sure.y…[truncated 2 bytes]': 'v',
    });
    expect(step.dropped).toEqual({ attributes: 12, events: 1 });
    expect(record.metadata.dropped).toEqual({ attributes: 12, events: 1 });
  });
});

/** The refused spans a partial success lists after its `rejected_spans=` line. */
function listedRejections(message: string): unknown[] {
  const line = message.split('\n').find((l) => l.startsWith(REJECTED_SPANS_PREFIX));
  return line === undefined ? [] : JSON.parse(line.slice(REJECTED_SPANS_PREFIX.length));
}

describe.each(storeVariants())('OTLP/HTTP partial success and projects on $name', (variant) => {
  let t: TestApp;
  let open: TestApp;
  let ingestKey: string;
  let dispose: Array<() => Promise<void>> = [];
  beforeAll(async () => {
    const a = await variant.open();
    const b = await variant.open();
    dispose = [a.dispose, b.dispose];
    t = await testApp({ ...a.overrides, auth: {}, traces: { completion_grace: '0s' } });
    open = await testApp({ ...b.overrides, traces: { completion_grace: '0s' } });
    ingestKey = (await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: ['ingest'] }))
      .secret;
  });
  afterAll(async () => {
    await t?.close();
    await open?.close();
    for (const d of dispose) await d();
  });

  const post = (app: TestApp, url: string, body: Buffer | string, json: boolean, key?: string) =>
    app.app.server.inject({
      method: 'POST',
      url,
      payload: body,
      headers: {
        ...(json ? JSON_CT : PB),
        ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
      },
    });

  it('lists each refused span (position, ids, reason) after the readable reasons, in JSON', async () => {
    const spans = recordSpans({ 'service.name': 'partial' }, (tr) => {
      agentTrace(tr);
      agentTrace(tr);
    });
    const body = JSON.parse(jsonBody(spans));
    const list = body.resourceSpans[0].scopeSpans[0].spans;
    const zeroSpan = list[1];
    const goodTrace = list[3].traceId;
    zeroSpan.spanId = '0'.repeat(16);
    list[4].traceId = 'zz';
    const res = await post(t, '/v1/traces', JSON.stringify(body), true, ingestKey);
    expect(res.statusCode).toBe(200);
    const partial = res.json().partialSuccess;
    expect(partial.rejectedSpans).toBe('2');
    const [first] = partial.errorMessage.split('\n');
    expect(first).toBe(
      '2 spans rejected: span with an all-zero span id; ' +
        'span with a trace id that is not 16 bytes (32 hex characters)',
    );
    expect(listedRejections(partial.errorMessage)).toEqual([
      {
        index: 1,
        traceId: zeroSpan.traceId,
        spanId: '0000000000000000',
        reason: 'span with an all-zero span id',
      },
      {
        index: 4,
        spanId: list[4].spanId,
        reason: 'span with a trace id that is not 16 bytes (32 hex characters)',
      },
    ]);
    // The rest of the request is stored.
    expect(await t.app.store.traces.spans('p1', goodTrace)).toHaveLength(2);
  });

  it('lists refused spans in protobuf answers too, and sends no list when nothing was refused', async () => {
    const spans = recordSpans({ 'service.name': 'partial-pb' }, (tr) => agentTrace(tr));
    const child = spans.find((s) => s.name.startsWith('chat'));
    const childIndex = spans.indexOf(child as (typeof spans)[number]);
    const { traceId, spanId } = child?.spanContext() ?? { traceId: '', spanId: '' };
    const body = protobufBody(spans);
    const at = body.indexOf(Buffer.from(spanId, 'hex'));
    expect(at).toBeGreaterThan(0);
    body.fill(0, at, at + 8);
    const res = await post(t, '/v1/traces', body, false, ingestKey);
    expect(res.statusCode).toBe(200);
    const partial = partialSuccess(res.rawPayload);
    expect(partial.rejected).toBe(1);
    expect(listedRejections(partial.message)).toEqual([
      {
        index: childIndex,
        traceId,
        spanId: '0000000000000000',
        reason: 'span with an all-zero span id',
      },
    ]);

    const clean = await post(t, '/v1/traces', protobufBody(spans), false, ingestKey);
    expect(clean.rawPayload.length).toBe(0);
  });

  it('stores into ?project= when the caller may write there, and refuses another project of a key', async () => {
    let traceId = '';
    const spans = recordSpans({ 'service.name': 'sdk' }, (tr) => {
      traceId = agentTrace(tr);
    });
    const res = await post(open, '/v1/traces?project=notebooks', protobufBody(spans), false);
    expect(res.statusCode).toBe(200);
    expect(await open.app.store.traces.spans('notebooks', traceId)).toHaveLength(3);
    expect(await open.app.store.traces.spans('default', traceId)).toHaveLength(0);

    const mine = await post(t, '/v1/traces?project=p1', protobufBody(spans), false, ingestKey);
    expect(mine.statusCode).toBe(200);
    const other = await post(t, '/v1/traces?project=p2', protobufBody(spans), false, ingestKey);
    expect(other.statusCode).toBe(403);
    expect(await t.app.store.traces.spans('p2', traceId)).toHaveLength(0);
  });
});
