import { describe, expect, it } from 'vitest';
import { isTouchstoneError, type Span, type TouchstoneError } from '../../../core/index.js';
import { normalizeTrace } from '../../../ingest/index.js';
import type { FetchedTrace, TraceHeader } from '../../connector.js';
import {
  type Cassette,
  ENDPOINT,
  exchangesOf,
  loadCassette,
  recordedBody,
  replayClient,
} from './cassette.testkit.js';
import { createMlflowConnector } from './connector.js';

/**
 * The connector against answers recorded from a live MLflow server (testdata/README.md). The
 * replay client fails on any request that was not recorded, so these tests also pin the requests.
 */

const cassette: Cassette = loadCassette();
const T = cassette.traces;

function connectorFor(groups: string[], locations = [cassette.experiment]) {
  const http = replayClient(cassette, groups);
  const connector = createMlflowConnector({ endpoint: ENDPOINT, locations, http });
  return { http, connector };
}

async function caught(p: Promise<unknown>): Promise<TouchstoneError> {
  try {
    await p;
  } catch (err) {
    if (isTouchstoneError(err)) return err;
    throw err;
  }
  throw new Error('expected a TouchstoneError');
}

async function listAll(groups: string[]): Promise<TraceHeader[]> {
  const { connector, http } = connectorFor(groups);
  const out: TraceHeader[] = [];
  let pageToken: string | undefined;
  let pages = 0;
  do {
    const page = await connector.list({
      ...cassette.window,
      pageSize: 3,
      ...(pageToken ? { pageToken } : {}),
    });
    out.push(...page.traces);
    pageToken = page.nextPageToken;
    pages++;
  } while (pageToken !== undefined && pages < 10);
  expect(http.unused().filter((e) => e.group === 'list')).toEqual([]);
  return out;
}

function spansOf(fetched: FetchedTrace | undefined): Span[] {
  if (fetched === undefined || !('spans' in fetched)) {
    throw new Error(`expected spans, got ${JSON.stringify(fetched)}`);
  }
  return fetched.spans;
}

describe(`MLflow connector, answers recorded from MLflow ${cassette.mlflowVersion}`, () => {
  it('check resolves the experiment by name and probes the v3 trace search', async () => {
    const { connector, http } = connectorFor(['check']);
    await connector.check();
    expect(http.seen).toEqual([
      `GET /api/2.0/mlflow/experiments/get-by-name?experiment_name=${cassette.experiment}`,
      'POST /api/3.0/mlflow/traces/search',
    ]);
  });

  it('check names an unknown experiment as not found', async () => {
    const { connector } = connectorFor(['check-unknown'], ['no-such-experiment']);
    const err = await caught(connector.check());
    expect(err).toMatchObject({ code: 'MLFLOW_EXPERIMENT_NOT_FOUND', retryable: false });
    expect(err.message).toContain('"no-such-experiment"');
  });

  it('lists ascending by start time across pages with the window as a millisecond filter', async () => {
    const headers = await listAll(['check', 'list']);
    expect(headers.map((h) => h.storeId)).toEqual([
      T.agent,
      ...T.questions,
      T.artifact_only,
      T.no_spans,
      T.running,
    ]);
    const starts = headers.map((h) => h.startMs);
    expect([...starts].sort((a, b) => a - b)).toEqual(starts);
    const search = cassette.exchanges.find((e) => e.group === 'list');
    expect(JSON.parse(search?.requestBody ?? '{}')).toEqual({
      locations: [
        { type: 'MLFLOW_EXPERIMENT', mlflow_experiment: { experiment_id: T.experiment_id } },
      ],
      filter: `trace.timestamp_ms >= ${cassette.window.fromMs} AND trace.timestamp_ms < ${cassette.window.toMs}`,
      max_results: 3,
      order_by: ['timestamp_ms ASC'],
    });
  });

  it('turns a trace info into a header: hex id, times, state, tags and metadata, no previews', async () => {
    const headers = await listAll(['check', 'list']);
    const agent = headers.find((h) => h.storeId === T.agent) as TraceHeader;
    expect(agent.traceId).toBe(T.agent.slice(3));
    expect(agent.inProgress).toBe(false);
    expect(agent.endMs).toBeGreaterThan(agent.startMs);
    expect(agent.resource).toMatchObject({
      'mlflow.tag.mlflow.traceName': 'travel_agent',
      'mlflow.tag.workflow': 'weather',
      'mlflow.tag.touchstone.label.env': 'interop',
      'mlflow.tag.mlflow.trace.spansLocation': 'TRACKING_STORE',
      'mlflow.metadata.mlflow.trace.session': 'conv-42',
      'mlflow.metadata.mlflow.trace.user': 'u-7',
    });
    const raw = JSON.stringify(headers);
    expect(raw).not.toContain('request_preview');
    expect(raw).not.toContain('response_preview');
    const running = headers.find((h) => h.storeId === T.running) as TraceHeader;
    expect(running).toMatchObject({ inProgress: true });
    expect(running.endMs).toBeUndefined();
  });

  it('an empty window is an empty page (MLflow answers {})', async () => {
    const body = recordedBody(exchangesOf(cassette, 'list-empty')[0]!).toString('utf8');
    expect(body).toBe('{}');
    const { connector } = connectorFor(['check', 'list-empty']);
    await connector.check();
    const page = await connector.list({
      fromMs: 1_000_000_000_000,
      toMs: 1_000_000_060_000,
      pageSize: 3,
    });
    expect(page).toEqual({ traces: [] });
  });

  it('a window that is not a window makes no request', async () => {
    const { connector, http } = connectorFor([]);
    expect(await connector.list({ fromMs: 5, toMs: 5, pageSize: 3 })).toEqual({ traces: [] });
    expect(http.seen).toEqual([]);
  });

  describe('fetch', () => {
    async function fetchAll() {
      const headers = await listAll(['check', 'list']);
      const { connector, http } = connectorFor(['fetch']);
      const fetched = await connector.fetch(headers);
      expect(http.unused()).toEqual([]);
      return { headers, fetched, http };
    }

    it('reads tracking-store traces in one batchGet and the others from the trace artifact', async () => {
      const { http } = await fetchAll();
      expect(http.seen.filter((s) => s.includes('batchGet'))).toEqual([
        `GET /api/3.0/mlflow/traces/batchGet?${[T.agent, ...T.questions, T.running].map((id) => `trace_ids=${id}`).join('&')}`,
      ]);
      expect(http.seen.filter((s) => s.includes('get-trace-artifact'))).toHaveLength(2);
    });

    it('converts batchGet spans: hex ids, exact nanosecond times, status, events, attributes', async () => {
      const { fetched } = await fetchAll();
      const spans = spansOf(fetched.get(T.agent));
      expect(spans.map((s) => s.name).sort()).toEqual(
        ['ChatOpenAI', 'ChatOpenAI', 'get_time', 'get_weather', 'travel_agent'].sort(),
      );
      const root = spans.find((s) => s.name === 'travel_agent') as Span;
      expect(root.parentSpanId).toBe('');
      for (const s of spans) {
        expect(s.traceId).toBe(T.agent.slice(3));
        expect(s.spanId).toMatch(/^[0-9a-f]{16}$/);
        if (s !== root) expect(s.parentSpanId).toBe(root.spanId);
      }
      // The exact digits MLflow sent (above 2^53: a JSON.parse would round them).
      const raw = recordedBody(
        exchangesOf(cassette, 'fetch').find((e) => e.url.includes('batchGet'))!,
      ).toString('utf8');
      const sent = /"start_time_unix_nano":(\d+)/.exec(raw)?.[1] as string;
      expect(BigInt(sent)).toBeGreaterThan(BigInt(Number.MAX_SAFE_INTEGER));
      expect(spans.map((s) => s.startTimeUnixNano)).toContain(sent);

      const failed = spans.find((s) => s.name === 'get_time') as Span;
      expect(failed.status).toEqual({ code: 2, message: 'TimeoutError: time service timed out' });
      expect(failed.events[0]).toMatchObject({
        name: 'exception',
        attributes: {
          'exception.type': 'TimeoutError',
          'exception.message': 'time service timed out',
        },
      });
      // mlflow.* values are the JSON text MLflow's SDK writes; the trace's tags are the resource.
      expect(failed.attributes['mlflow.spanType']).toBe('"TOOL"');
      expect(failed.attributes['mlflow.spanInputs']).toBe('{"tz": "Europe/Paris"}');
      expect(failed.resource['mlflow.tag.workflow']).toBe('weather');
      const chat = spans.find((s) => s.name === 'ChatOpenAI') as Span;
      expect(JSON.parse(chat.attributes['mlflow.chat.tokenUsage'] as string)).toEqual({
        input_tokens: 84,
        output_tokens: 41,
        total_tokens: 125,
      });
    });

    it('gives ingest what it needs for a trajectory: model calls, messages, tokens, tool error', async () => {
      const { fetched } = await fetchAll();
      const { record } = normalizeTrace(spansOf(fetched.get(T.agent)));
      const steps = record.trajectory ?? [];
      expect(steps.map((s) => `${s.type}:${s.name}`)).toEqual([
        'agent:travel_agent',
        'llm:ChatOpenAI',
        'tool:get_weather',
        'tool:get_time',
        'llm:ChatOpenAI',
      ]);
      expect(steps[1]).toMatchObject({
        model: 'gpt-4o-mini',
        usage: { inputTokens: 84, outputTokens: 41, totalTokens: 125 },
        input: [
          { role: 'system', content: 'You are a travel helper. Use the tools.' },
          { role: 'user', content: 'What is the weather in Paris, and what time is it there?' },
        ],
        output: [
          {
            role: 'assistant',
            toolCalls: [
              { name: 'get_weather', arguments: '{"city": "Paris"}', id: 'call_w1' },
              { name: 'get_time', arguments: '{"tz": "Europe/Paris"}', id: 'call_t1' },
            ],
          },
        ],
      });
      expect(steps[2]).toMatchObject({ input: '{"city": "Paris"}', error: '' });
      expect(steps[3]?.error).toBe('TimeoutError: time service timed out');
      // The full input and output from the spans, not the trace's truncated previews.
      expect(record.input).toBe('What is the weather in Paris, and what time is it there?');
      expect(record.output).toBe('It is sunny and 21°C in Paris; the time service did not answer.');
      expect(record.labels).toMatchObject({ env: 'interop' });
    });

    it('reads the artifact-only trace through the artifact route into the same form', async () => {
      const { fetched } = await fetchAll();
      const fromArtifact = spansOf(fetched.get(T.artifact_only));
      const fromBatch = spansOf(fetched.get(T.questions[0] as string));
      const shape = (spans: Span[]) =>
        spans
          .map((s) => ({ name: s.name, keys: Object.keys(s.attributes).sort(), status: s.status }))
          .sort((a, b) => a.name.localeCompare(b.name));
      expect(shape(fromArtifact)).toEqual(shape(fromBatch));
      const retrieve = fromArtifact.find((s) => s.name === 'retrieve') as Span;
      expect(retrieve.attributes['mlflow.spanInputs']).toBe('{"query": "artifact-only question"}');
      expect(retrieve.attributes['mlflow.spanOutputs']).toBe('["doc-1", "doc-2"]');
      expect(
        (fromBatch.find((s) => s.name === 'retrieve') as Span).attributes['mlflow.spanOutputs'],
      ).toBe('["doc-1", "doc-2"]');
    });

    it('reports a trace with no spans anywhere as missing, and returns the running trace so far', async () => {
      const { fetched } = await fetchAll();
      expect(fetched.get(T.no_spans)).toEqual({
        missing: 'MLflow has no span data for this trace (NOT_FOUND)',
      });
      expect(spansOf(fetched.get(T.running)).map((s) => s.name)).toEqual(['step-1']);
      expect(fetched.size).toBe(7);
    });

    it('finds the trace a batchGet 500 is about one by one and reads it from the artifact', async () => {
      const headers = await listAll(['check', 'list']);
      const { connector, http } = connectorFor(['fetch-fallback']);
      const q1 = headers.find((h) => h.storeId === T.questions[0]) as TraceHeader;
      const ao = headers.find((h) => h.storeId === T.artifact_only) as TraceHeader;
      const claimed = {
        ...ao,
        resource: { ...ao.resource, 'mlflow.tag.mlflow.trace.spansLocation': 'TRACKING_STORE' },
      };
      const fetched = await connector.fetch([q1, claimed]);
      expect(http.unused()).toEqual([]);
      expect(spansOf(fetched.get(q1.storeId))).toHaveLength(2);
      expect(spansOf(fetched.get(ao.storeId))).toHaveLength(2);
      const mixed = exchangesOf(cassette, 'fetch-fallback')[0]!;
      expect(mixed.status).toBe(500);
      expect(JSON.parse(recordedBody(mixed).toString('utf8'))).toMatchObject({
        error_code: 'INTERNAL_ERROR',
      });
    });

    it('an unknown trace (batchGet answers {}, the artifact 404) is missing', async () => {
      const { connector } = connectorFor(['fetch-unknown']);
      const id = 'tr-00000000000000000000000000000001';
      const fetched = await connector.fetch([
        {
          storeId: id,
          traceId: id.slice(3),
          startMs: 0,
          inProgress: false,
          resource: { 'mlflow.tag.mlflow.trace.spansLocation': 'TRACKING_STORE' },
        },
      ]);
      expect(fetched.get(id)).toEqual({
        missing: 'MLflow has no span data for this trace (RESOURCE_DOES_NOT_EXIST)',
      });
    });
  });

  describe('write-back', () => {
    const item = {
      storeId: T.agent,
      traceId: T.agent.slice(3),
      policy: 'quality',
      metric: 'tool-errors',
      judge: false,
    };

    it('creates one feedback assessment per metric, source touchstone/<policy>, CODE or LLM_JUDGE', async () => {
      const { connector, http } = connectorFor(['write-create']);
      const out = await connector.writeBack([
        {
          ...item,
          score: { name: 'tool-errors', value: 0.5, explanation: 'one of two tool calls failed' },
        },
        {
          ...item,
          metric: 'helpfulness.passed',
          judge: true,
          score: { name: 'helpfulness.passed', passed: true, explanation: 'answers the question' },
        },
      ]);
      expect(out.map((o) => o.status)).toEqual(['created', 'created']);
      expect(http.seen.filter((s) => s.startsWith('GET'))).toHaveLength(1);
      expect(http.bodies).toEqual([
        {
          assessment: {
            assessment_name: 'tool-errors',
            trace_id: T.agent,
            source: { source_type: 'CODE', source_id: 'touchstone/quality' },
            feedback: { value: 0.5 },
            rationale: 'one of two tool calls failed',
          },
        },
        {
          assessment: {
            assessment_name: 'helpfulness.passed',
            trace_id: T.agent,
            source: { source_type: 'LLM_JUDGE', source_id: 'touchstone/quality' },
            feedback: { value: true },
            rationale: 'answers the question',
          },
        },
      ]);
      const created = out[0] as { remoteId: string };
      expect(created.remoteId).toMatch(/^a-[0-9a-f]{32}$/);
    });

    it('updates in place with PATCH and a comma-string update mask when the ledger has the id', async () => {
      const created = exchangesOf(cassette, 'write-create').find((e) => e.method === 'POST')!;
      const id = JSON.parse(recordedBody(created).toString('utf8')).assessment.assessment_id;
      const { connector, http } = connectorFor(['write-update']);
      const out = await connector.writeBack([
        {
          ...item,
          remoteId: id,
          score: { name: 'tool-errors', value: 0.75, explanation: 're-scored' },
        },
      ]);
      expect(out).toEqual([{ status: 'updated', remoteId: id }]);
      expect(http.bodies).toEqual([
        {
          assessment: { feedback: { value: 0.75 }, rationale: 're-scored' },
          update_mask: 'feedback,rationale',
        },
      ]);
    });

    it('with the ledger lost, finds the assessment by name and source and updates it', async () => {
      const created = exchangesOf(cassette, 'write-create').find((e) => e.method === 'POST')!;
      const id = JSON.parse(recordedBody(created).toString('utf8')).assessment.assessment_id;
      const { connector, http } = connectorFor(['write-lookup']);
      const out = await connector.writeBack([
        { ...item, score: { name: 'tool-errors', value: 0.25, explanation: 'ledger lost' } },
      ]);
      expect(out).toEqual([{ status: 'updated', remoteId: id }]);
      expect(http.seen.map((s) => s.split(' ')[0])).toEqual(['GET', 'PATCH']);
    });

    it('a trace MLflow does not hold fails the item without retry, the trace missing', async () => {
      const { connector } = connectorFor(['write-missing-trace']);
      const out = await connector.writeBack([
        {
          ...item,
          storeId: 'tr-00000000000000000000000000000001',
          score: { name: 'tool-errors', value: 1 },
        },
      ]);
      expect(out).toEqual([
        {
          status: 'failed',
          retryable: false,
          code: 'MLFLOW_REQUEST_REFUSED',
          error: expect.stringContaining('404 RESOURCE_DOES_NOT_EXIST'),
          traceMissing: true,
        },
      ]);
    });
  });
});
