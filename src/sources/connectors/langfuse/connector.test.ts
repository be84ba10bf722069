import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  agentRun,
  legacyTrace,
  SAMPLE_ANSWER,
  SAMPLE_GENERATION_ID,
  SAMPLE_QUESTION,
  SAMPLE_ROOT_ID,
  SAMPLE_TRACE_ID,
  sampleTrace,
} from '../../../../test/fakes/langfuse/samples.js';
import { LangfuseFake } from '../../../../test/fakes/langfuse/server.js';
import { isTouchstoneError, type Span, type TouchstoneError } from '../../../core/index.js';
import { normalizeTrace } from '../../../ingest/index.js';
import { createHttpClient, type HttpClient } from '../../../net/index.js';
import type { ListPage, TraceHeader, TraceStoreConnector, WriteBackItem } from '../../connector.js';
import { createLangfuseConnector, type LangfuseConnectorOptions } from './connector.js';
import { otelSpanId, otelTraceId, scoreId } from './ids.js';
import { HOUR_MS, WEEK_MS } from './windows.js';

/**
 * The Langfuse connector against the contract fake (test/fakes/langfuse/), over a real socket and
 * the product's HTTP client: every request it sends is checked against Langfuse's published API
 * definitions (a violation fails the test in afterEach), every answer is spec-shaped.
 */

let fake: LangfuseFake;
let http: HttpClient;

beforeAll(async () => {
  fake = await LangfuseFake.start();
  http = createHttpClient({ timeoutMs: 10_000 });
});
afterAll(async () => {
  await http.close();
  await fake.close();
});
beforeEach(() => {
  fake.observations.length = 0;
  fake.scores.clear();
  fake.requests.length = 0;
  fake.violations.length = 0;
  fake.mode = 'v4';
  fake.throttle = undefined;
  fake.scoreVisibilityLagMs = 0;
});
afterEach(() => {
  expect(fake.violations).toEqual([]);
});

function connector(extra: Partial<LangfuseConnectorOptions> = {}): TraceStoreConnector {
  return createLangfuseConnector({
    endpoint: fake.url,
    http,
    credential: () => fake.credential,
    ...extra,
  });
}

async function listAll(
  c: TraceStoreConnector,
  fromMs: number,
  toMs: number,
  pageSize = 100,
): Promise<ListPage[]> {
  const pages: ListPage[] = [];
  let pageToken: string | undefined;
  for (let i = 0; i < 500; i++) {
    const page = await c.list({ fromMs, toMs, pageSize, ...(pageToken ? { pageToken } : {}) });
    pages.push(page);
    pageToken = page.nextPageToken;
    if (pageToken === undefined) return pages;
  }
  throw new Error('the listing never ended');
}

const traces = (pages: ListPage[]) => pages.flatMap((p) => p.traces);

async function caught(p: Promise<unknown>): Promise<TouchstoneError> {
  try {
    await p;
  } catch (err) {
    if (isTouchstoneError(err)) return err;
    throw err;
  }
  throw new Error('expected a TouchstoneError');
}

const T0 = Date.parse('2025-06-15T14:07:40.000Z');
const DAY = 24 * HOUR_MS;

function spansOf(got: unknown): Span[] {
  expect(got).toHaveProperty('spans');
  return (got as { spans: Span[] }).spans;
}

describe('pull: listing root observations one window at a time', () => {
  it('lists each trace once, oldest first, as its root observation', async () => {
    fake.add(
      ...agentRun(2, T0 + 2 * DAY),
      ...sampleTrace(T0),
      ...legacyTrace('3f2b8c1e-aaaa-4e5b-9c6d-0a1b2c3d4e5f', T0 + HOUR_MS / 2),
      ...agentRun(1, T0 + DAY),
    );
    const pages = await listAll(connector(), T0 - DAY, T0 + 10 * DAY);
    const listed = traces(pages);
    expect(listed.map((h) => h.storeId)).toEqual([
      SAMPLE_TRACE_ID,
      '3f2b8c1e-aaaa-4e5b-9c6d-0a1b2c3d4e5f',
      '00000001abababababababababababab',
      '00000002abababababababababababab',
    ]);
    expect(listed[0]).toEqual({
      storeId: SAMPLE_TRACE_ID,
      traceId: SAMPLE_TRACE_ID,
      startMs: T0,
      endMs: T0 + 3_000,
      inProgress: false,
      resource: {
        'langfuse.trace.id': SAMPLE_TRACE_ID,
        'langfuse.environment': 'default',
        'langfuse.trace.name': 'answer',
        'langfuse.trace.tags': ['suite:fixtures'],
      },
    });
    // Only root observations are asked for, with the window as start-time bounds.
    const asked = fake.requestsTo('/api/public/v2/observations');
    expect(asked.every((r) => r.query.get('isRootObservation') === 'true')).toBe(true);
    expect(asked.every((r) => r.query.get('fields') === 'core,basic,trace_context')).toBe(true);
  });

  it('windows start at one hour and double across empty windows up to one week', async () => {
    fake.add(...agentRun(1, T0 + 30 * DAY));
    const pages = await listAll(connector(), T0, T0 + 40 * DAY);
    expect(traces(pages).map((h) => h.startMs)).toEqual([T0 + 30 * DAY]);
    const windows = fake
      .requestsTo('/api/public/v2/observations')
      .map((r) => [
        Date.parse(r.query.get('fromStartTime') ?? ''),
        Date.parse(r.query.get('toStartTime') ?? ''),
      ]);
    const widths = windows.map(([from, to]) => ((to as number) - (from as number)) / HOUR_MS);
    expect(widths.slice(0, 10)).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 168, 168]);
    // Contiguous and oldest first; after the trace's window the next is an hour again.
    for (let i = 1; i < windows.length; i++) {
      expect(windows[i]?.[0]).toBe(windows[i - 1]?.[1]);
    }
    const hit = windows.findIndex(([from, to]) => T0 + 30 * DAY >= from! && T0 + 30 * DAY < to!);
    expect(widths[hit + 1]).toBeLessThanOrEqual(2);
    expect(Math.max(...widths) * HOUR_MS).toBe(WEEK_MS);
    expect(windows.at(-1)?.[1]).toBe(T0 + 40 * DAY);
  });

  it('a window with more traces than a page shrinks until it fits; pages stay in start order', async () => {
    for (let i = 1; i <= 45; i++) fake.add(...agentRun(i, T0 + i * 7_000));
    const pages = await listAll(connector(), T0, T0 + HOUR_MS, 10);
    const listed = traces(pages);
    expect(listed).toHaveLength(45);
    expect(new Set(listed.map((h) => h.storeId)).size).toBe(45);
    const starts = listed.map((h) => h.startMs);
    expect(starts).toEqual([...starts].sort((a, b) => a - b));
    for (const p of pages) expect(p.traces.length).toBeLessThanOrEqual(10);
    expect(
      fake.requestsTo('/api/public/v2/observations').every((r) => r.query.get('limit') === '10'),
    ).toBe(true);
  });

  it('more traces in one millisecond than a page: read with the cursor, each once', async () => {
    for (let i = 1; i <= 5; i++) fake.add(...agentRun(i, T0 + 1_000));
    fake.add(...agentRun(6, T0 + 5_000));
    const pages = await listAll(connector(), T0, T0 + 10_000, 2);
    const listed = traces(pages);
    expect(listed.map((h) => h.storeId).sort()).toEqual(
      [1, 2, 3, 4, 5, 6].map((i) => `${i.toString(16).padStart(8, '0')}${'ab'.repeat(12)}`),
    );
    expect(fake.requestsTo('/api/public/v2/observations').some((r) => r.query.has('cursor'))).toBe(
      true,
    );
  });

  it('traces outside [fromMs, toMs) are not listed: the start is inclusive, the end exclusive', async () => {
    fake.add(...agentRun(1, T0), ...agentRun(2, T0 + 1_000), ...agentRun(3, T0 + 2_000));
    const listed = traces(await listAll(connector(), T0 + 1_000, T0 + 2_000));
    expect(listed.map((h) => h.startMs)).toEqual([T0 + 1_000]);
    expect(traces(await listAll(connector(), T0 + 5_000, T0 + 5_000))).toEqual([]);
  });

  it('a trace is running while its root has no end time; an EVENT root never is', async () => {
    fake.add(...agentRun(1, T0, { running: true }));
    fake.add({
      id: 'eeee000000000001',
      traceId: 'eeee0000000000000000000000000001',
      type: 'EVENT',
      name: 'signup',
      startTime: new Date(T0 + 10).toISOString(),
      endTime: null,
      parentObservationId: null,
    });
    const listed = traces(await listAll(connector(), T0, T0 + HOUR_MS));
    expect(listed.map((h) => [h.storeId.slice(0, 8), h.inProgress, h.endMs])).toEqual([
      ['00000001', true, undefined],
      ['eeee0000', false, T0 + 10],
    ]);
  });

  it('a v3 server with the v4 preview opt-in (no isRootObservation): the same traces', async () => {
    fake.add(...sampleTrace(T0), ...legacyTrace('3f2b8c1e-aaaa-4e5b-9c6d-0a1b2c3d4e5f', T0 + 10));
    for (let i = 1; i <= 12; i++) fake.add(...agentRun(i, T0 + i * 60_000, { running: i === 3 }));
    const v4 = traces(await listAll(connector(), T0, T0 + DAY, 5));
    fake.mode = 'v3-preview';
    const v3 = traces(await listAll(connector(), T0, T0 + DAY, 5));
    expect(v3).toEqual(v4);
    expect(v4).toHaveLength(14);
    expect(v4.filter((h) => h.inProgress).map((h) => h.storeId.slice(0, 8))).toEqual([
      '3f2b8c1e',
      '00000003',
    ]);
  });

  it('a token of another query is not used: the listing starts again from its beginning', async () => {
    fake.add(...agentRun(1, T0 + 10));
    const c = connector();
    const first = await c.list({ fromMs: T0 - 5 * HOUR_MS, toMs: T0 + 10 * HOUR_MS, pageSize: 5 });
    expect(first.traces.map((h) => h.startMs)).toEqual([T0 + 10]);
    expect(first.nextPageToken).toBeDefined();
    const again = await c.list({
      fromMs: T0,
      toMs: T0 + HOUR_MS,
      pageSize: 5,
      pageToken: first.nextPageToken as string,
    });
    expect(again.traces.map((h) => h.startMs)).toEqual([T0 + 10]);
  });
});

describe('map: observations to spans, read by ingest', () => {
  it('normalizes the reference sample into the expected trajectory', async () => {
    fake.add(...sampleTrace(T0));
    const c = connector();
    const [header] = traces(await listAll(c, T0, T0 + HOUR_MS));
    const spans = spansOf((await c.fetch([header as TraceHeader])).get(SAMPLE_TRACE_ID));
    expect(spans).toHaveLength(3);
    for (const s of spans) {
      expect(s.traceId).toBe(SAMPLE_TRACE_ID);
      expect(s.resource['langfuse.trace.id']).toBe(SAMPLE_TRACE_ID);
    }
    const generation = spans.find((s) => s.spanId === SAMPLE_GENERATION_ID);
    expect(generation).toMatchObject({
      parentSpanId: SAMPLE_ROOT_ID,
      name: 'ChatCompletion',
      startTimeUnixNano: String(BigInt(T0 + 1_500) * 1_000_000n),
      endTimeUnixNano: String(BigInt(T0 + 2_700) * 1_000_000n),
      attributes: {
        'langfuse.observation.id': SAMPLE_GENERATION_ID,
        'langfuse.observation.type': 'generation',
        'langfuse.observation.model.name': 'gpt-4o-mini',
        'langfuse.observation.usage_details': '{"input":12,"output":40,"total":52}',
        'langfuse.metadata.tenant': 'acme',
        'langfuse.environment': 'default',
        'langfuse.user.id': 'u1',
        'langfuse.session.id': 's1',
      },
    });
    const root = spans.find((s) => s.spanId === SAMPLE_ROOT_ID);
    expect(root?.parentSpanId).toBe('');
    expect(root?.attributes).toMatchObject({
      'langfuse.trace.name': 'answer',
      'langfuse.trace.tags': ['suite:fixtures'],
    });

    const { record, summary } = normalizeTrace(spans);
    expect(record.id).toBe(SAMPLE_TRACE_ID);
    expect(record.input).toBe(SAMPLE_QUESTION);
    expect(record.output).toBe(SAMPLE_ANSWER);
    expect(
      record.trajectory?.map((s) => ({
        type: s.type,
        name: s.name,
        ...(s.model === undefined ? {} : { model: s.model }),
        ...(s.usage === undefined ? {} : { usage: s.usage }),
        error: s.error,
      })),
    ).toEqual([
      { type: 'agent', name: 'answer', error: '' },
      { type: 'tool', name: 'search_docs', error: '' },
      {
        type: 'llm',
        name: 'ChatCompletion',
        model: 'gpt-4o-mini',
        usage: { inputTokens: 12, outputTokens: 40, totalTokens: 52, costUsd: 0.0000258 },
        error: '',
      },
    ]);
    expect(record.trajectory?.[1]?.input).toBe('{"query":"MLflow"}');
    expect(record.usage).toMatchObject({ inputTokens: 12, outputTokens: 40, latencyMs: 3000 });
    expect(record.metadata).toMatchObject({
      sessionId: 's1',
      userId: 'u1',
      models: ['gpt-4o-mini'],
      tools: ['search_docs'],
      conventions: ['langfuse'],
    });
    // A metadata key named touchstone.label.<key> labels the trace.
    expect(record.labels).toEqual({ team: 'docs' });
    expect(summary).toMatchObject({ name: 'answer', steps: 3, error: false, durationMs: 3000 });
    // Observations are read with every field group the mapping needs.
    const read = fake.requestsTo('/api/public/v2/observations').at(-1);
    expect(read?.query.get('traceId')).toBe(SAMPLE_TRACE_ID);
    expect(read?.query.get('limit')).toBe('1000');
    expect(read?.query.get('fields')).toBe(
      'core,basic,time,io,metadata,model,usage,prompt,trace_context',
    );
  });

  it('an ERROR level is an error step with its status message', async () => {
    fake.add(...agentRun(1, T0, { error: true }));
    const c = connector();
    const listed = traces(await listAll(c, T0, T0 + HOUR_MS));
    const spans = spansOf((await c.fetch(listed)).get(listed[0]?.storeId as string));
    const tool = spans.find((s) => s.name === 'lookup');
    expect(tool?.status).toEqual({ code: 2, message: 'lookup failed: timeout' });
    const { record, summary } = normalizeTrace(spans);
    expect(record.trajectory?.find((s) => s.type === 'tool')?.error).toBe('lookup failed: timeout');
    expect(summary.error).toBe(true);
  });

  it('ids that are not OpenTelemetry-shaped get stable ids; the originals stay as attributes', async () => {
    const uuid = '3f2b8c1e-aaaa-4e5b-9c6d-0a1b2c3d4e5f';
    fake.add(...legacyTrace(uuid, T0));
    const c = connector();
    const [header] = traces(await listAll(c, T0, T0 + HOUR_MS));
    expect(header).toMatchObject({
      storeId: uuid,
      traceId: otelTraceId(uuid),
      // Langfuse's synthetic trace row never has an end time (docs: known limits).
      inProgress: true,
    });
    const spans = spansOf((await c.fetch([header as TraceHeader])).get(uuid));
    const root = spans.find((s) => s.attributes['langfuse.observation.id'] === `t-${uuid}`);
    const llm = spans.find((s) => s.attributes['langfuse.observation.type'] === 'generation');
    expect(root).toMatchObject({ spanId: otelSpanId(`t-${uuid}`), parentSpanId: '' });
    expect(llm).toMatchObject({
      traceId: otelTraceId(uuid),
      spanId: otelSpanId('3f2b8c1e-7d4a-4e5b-9c6d-0a1b2c3d4e5f'),
      parentSpanId: root?.spanId,
    });
    expect(llm?.resource['langfuse.trace.id']).toBe(uuid);
    // Unchanged on a second read.
    const again = spansOf((await c.fetch([header as TraceHeader])).get(uuid));
    expect(again.map((s) => s.spanId).sort()).toEqual(spans.map((s) => s.spanId).sort());
  });

  it('an app root whose parent is elsewhere is a root here', async () => {
    fake.add({
      id: 'aaaa000000000001',
      traceId: 'aaaa0000000000000000000000000001',
      type: 'AGENT',
      name: 'service-b',
      startTime: new Date(T0).toISOString(),
      endTime: new Date(T0 + 100).toISOString(),
      parentObservationId: 'ffff00000000000f',
      isAppRoot: true,
    });
    const c = connector();
    const listed = traces(await listAll(c, T0, T0 + HOUR_MS));
    expect(listed).toHaveLength(1);
    const [span] = spansOf((await c.fetch(listed)).get(listed[0]?.storeId as string));
    expect(span?.parentSpanId).toBe('');
  });

  it('metadata values Langfuse serves cut to 200 characters are read in full', async () => {
    const long = 'x'.repeat(450);
    const run = agentRun(1, T0);
    (run[0] as { metadata?: Record<string, string> }).metadata = { prompt: long, short: 'ok' };
    fake.add(...run);
    const c = connector();
    const listed = traces(await listAll(c, T0, T0 + HOUR_MS));
    const spans = spansOf((await c.fetch(listed)).get(listed[0]?.storeId as string));
    const root = spans.find((s) => s.parentSpanId === '');
    expect(root?.attributes['langfuse.metadata.prompt']).toBe(long);
    expect(root?.attributes['langfuse.metadata.short']).toBe('ok');
    const reads = fake
      .requestsTo('/api/public/v2/observations')
      .filter((r) => r.query.has('traceId'));
    expect(reads.map((r) => r.query.get('expandMetadata'))).toEqual([null, 'prompt']);
  });

  it('a trace with more observations than a page is read page by page; too many is missing', async () => {
    const run = agentRun(1, T0);
    const root = run[0] as { id: string; traceId: string };
    for (let i = 0; i < 2_300; i++) {
      run.push({
        id: `b${i.toString(16).padStart(15, '0')}`,
        traceId: root.traceId,
        type: 'SPAN',
        name: `step-${i}`,
        startTime: new Date(T0 + 1 + (i % 1500)).toISOString(),
        endTime: new Date(T0 + 2 + (i % 1500)).toISOString(),
        parentObservationId: root.id,
      });
    }
    fake.add(...run);
    const listed = traces(await listAll(connector(), T0, T0 + HOUR_MS));
    const spans = spansOf((await connector().fetch(listed)).get(root.traceId));
    expect(spans).toHaveLength(2_303);
    expect(new Set(spans.map((s) => s.spanId)).size).toBe(2_303);
    expect(
      fake.requestsTo('/api/public/v2/observations').filter((r) => r.query.has('traceId')),
    ).toHaveLength(3);
    const capped = await connector({ maxObservationsPerTrace: 1_500 }).fetch(listed);
    expect(capped.get(root.traceId)).toEqual({
      missing: 'the trace has more than 1500 observations',
    });
  });

  it('a trace Langfuse no longer holds is missing with a reason', async () => {
    const header: TraceHeader = {
      storeId: 'gone',
      traceId: otelTraceId('gone'),
      startMs: T0,
      inProgress: false,
      resource: {},
    };
    expect((await connector().fetch([header])).get('gone')).toEqual({
      missing: 'Langfuse holds no observations for this trace',
    });
  });
});

describe('environment filter', () => {
  it('a source with a location reads that environment only, and scores go there', async () => {
    fake.add(...agentRun(1, T0, { environment: 'production' }));
    fake.add(...agentRun(2, T0 + 1_000, { environment: 'staging' }));
    const c = connector({ environment: 'production' });
    await c.check();
    const listed = traces(await listAll(c, T0, T0 + HOUR_MS));
    expect(listed.map((h) => h.resource['langfuse.environment'])).toEqual(['production']);
    expect(
      fake
        .requestsTo('/api/public/v2/observations')
        .every((r) => r.query.getAll('environment').join() === 'production'),
    ).toBe(true);
    const before = fake.requests.length;
    await c.writeBack([item(listed[0] as TraceHeader, { value: 0.5 })]);
    // No root lookup: the environment is the source's.
    expect(fake.requests.slice(before).map((r) => r.path)).toEqual([
      '/api/public/v3/scores',
      '/api/public/scores',
    ]);
    expect([...fake.scores.values()][0]?.environment).toBe('production');
  });

  it('without one, every environment is read and a score takes its trace environment', async () => {
    fake.add(...agentRun(1, T0, { environment: 'production' }));
    fake.add(...agentRun(2, T0 + 1_000, { environment: 'staging' }));
    const c = connector();
    const listed = traces(await listAll(c, T0, T0 + HOUR_MS));
    expect(listed.map((h) => h.resource['langfuse.environment'])).toEqual([
      'production',
      'staging',
    ]);
    expect(fake.requests.every((r) => !r.query.has('environment'))).toBe(true);
    await c.writeBack(listed.map((h) => item(h, { value: 1 })));
    expect(
      [...fake.scores.values()].map((s) => [s.traceId?.slice(0, 8), s.environment]).sort(),
    ).toEqual([
      ['00000001', 'production'],
      ['00000002', 'staging'],
    ]);
  });
});

function item(
  header: TraceHeader,
  score: { value?: number; passed?: boolean; label?: string },
  extra: Partial<WriteBackItem> = {},
): WriteBackItem {
  return {
    storeId: header.storeId,
    traceId: header.traceId,
    policy: 'quality',
    metric: 'helpfulness',
    judge: true,
    score: { name: 'helpfulness', ...score, explanation: 'Answers the question.' },
    ...extra,
  };
}

describe('write-back as Langfuse scores', () => {
  const header: TraceHeader = {
    storeId: SAMPLE_TRACE_ID,
    traceId: SAMPLE_TRACE_ID,
    startMs: T0,
    inProgress: false,
    resource: {},
  };

  beforeEach(() => {
    fake.add(...sampleTrace(T0));
  });

  it('writes one score per metric with a deterministic id, its data type, comment and policy', async () => {
    const c = connector();
    const out = await c.writeBack([
      item(header, { value: 0.8 }),
      item(header, { passed: true }, { metric: 'grounded', judge: false }),
      item(header, { label: 'partially correct' }, { metric: 'correctness' }),
    ]);
    const ids = ['helpfulness', 'grounded', 'correctness'].map((metric) =>
      scoreId({ traceId: SAMPLE_TRACE_ID, policy: 'quality', metric }),
    );
    expect(out).toEqual(ids.map((remoteId) => ({ status: 'created', remoteId })));
    const sent = fake.requestsTo('/api/public/scores').map((r) => r.body);
    expect(sent).toEqual([
      {
        id: ids[0],
        traceId: SAMPLE_TRACE_ID,
        name: 'helpfulness',
        value: 0.8,
        dataType: 'NUMERIC',
        comment: 'Answers the question.',
        metadata: { source: 'touchstone', policy: 'quality', evaluator: 'judge' },
        environment: 'default',
        source: 'API',
      },
      expect.objectContaining({
        id: ids[1],
        name: 'grounded',
        value: 1,
        dataType: 'BOOLEAN',
        metadata: { source: 'touchstone', policy: 'quality', evaluator: 'code' },
      }),
      expect.objectContaining({
        id: ids[2],
        name: 'correctness',
        value: 'partially correct',
        dataType: 'CATEGORICAL',
      }),
    ]);
    // Read back with Langfuse's v3 scores API: a BOOLEAN is read as a boolean.
    expect(
      fake
        .visibleScores()
        .map((s) => [s.name, s.dataType, s.value])
        .sort(),
    ).toEqual([
      ['correctness', 'CATEGORICAL', 'partially correct'],
      ['grounded', 'BOOLEAN', 1],
      ['helpfulness', 'NUMERIC', 0.8],
    ]);
  });

  it('writing again replaces the score (same id); with the ledger id it is an update', async () => {
    const c = connector();
    const [first] = await c.writeBack([item(header, { value: 0.2 })]);
    const [second] = await c.writeBack([item(header, { value: 0.4 })]);
    expect(first).toMatchObject({ status: 'created' });
    expect(second).toEqual({
      status: 'updated',
      remoteId: (first as { remoteId: string }).remoteId,
    });
    const [third] = await c.writeBack([
      item(header, { passed: false }, { remoteId: (first as { remoteId: string }).remoteId }),
    ]);
    expect(third).toEqual({
      status: 'updated',
      remoteId: (first as { remoteId: string }).remoteId,
    });
    expect(fake.scores.size).toBe(1);
    expect([...fake.scores.values()][0]).toMatchObject({
      value: 0,
      dataType: 'BOOLEAN',
      writes: 3,
    });
  });

  it('a score Langfuse does not show yet is written with the same id again (no duplicate)', async () => {
    fake.scoreVisibilityLagMs = 60_000;
    const c = connector();
    const [first] = await c.writeBack([item(header, { value: 0.2 })]);
    const [second] = await c.writeBack([item(header, { value: 0.3 })]);
    expect(second).toEqual(first);
    expect(fake.scores.size).toBe(1);
  });

  it('a score that is not a finite number fails without a request; the others are written', async () => {
    const out = await connector().writeBack([
      item(header, { value: Number.NaN }),
      item(header, { value: 1 }, { metric: 'other' }),
    ]);
    expect(out[0]).toMatchObject({ status: 'failed', retryable: false });
    expect((out[0] as { error: string }).error).toContain('not a finite number');
    expect(out[1]).toMatchObject({ status: 'created' });
    expect(fake.requestsTo('/api/public/scores')).toHaveLength(1);
  });
});

describe('check and credentials', () => {
  it('check passes with good keys and sends them as HTTP Basic auth', async () => {
    await connector().check();
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]?.authorized).toBe(true);
  });

  it('refused, missing or malformed keys are access denied, never echoed', async () => {
    const secret = 'sk-lf-wrong-secret-93ae';
    for (const credential of [`${fake.publicKey}:${secret}`, undefined, secret, `${secret}:`]) {
      const err = await caught(connector({ credential: () => credential }).check());
      expect(err).toMatchObject({ code: 'LANGFUSE_ACCESS_DENIED', retryable: false });
      expect(err.message).not.toContain(secret);
      expect(err.message).not.toContain(
        Buffer.from(`${fake.publicKey}:${secret}`).toString('base64'),
      );
    }
  });

  it('a Langfuse v3 server without the v2 endpoint is reported clearly, with its version', async () => {
    fake.mode = 'v3-without-v2';
    const c = connector();
    for (const p of [
      c.check(),
      c.list({ fromMs: T0, toMs: T0 + HOUR_MS, pageSize: 10 }),
      c.fetch([
        { storeId: 'x', traceId: otelTraceId('x'), startMs: T0, inProgress: false, resource: {} },
      ]),
    ]) {
      const err = await caught(p);
      expect(err).toMatchObject({
        code: 'LANGFUSE_OBSERVATIONS_API_MISSING',
        kind: 'unimplemented',
        retryable: false,
      });
      expect(err.message).toContain('server version 3.179.0');
      expect(err.message).toContain('LANGFUSE_MIGRATION_V4_ALLOW_PREVIEW_OPT_IN=true');
    }
  });
});
