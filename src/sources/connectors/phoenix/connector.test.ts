import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isTouchstoneError, type Span, type TouchstoneError } from '../../../core/index.js';
import { type GoldenTrace, reduceTrace } from '../../../ingest/conventions/golden.testkit.js';
import { normalizeTrace } from '../../../ingest/index.js';
import type { FetchedTrace, TraceHeader, WriteBackItem } from '../../connector.js';
import {
  type Cassette,
  ENDPOINT,
  exchangesOf,
  loadCassette,
  recordedBody,
  replayClient,
} from './cassette.testkit.js';
import { createPhoenixConnector } from './connector.js';

/**
 * The connector against answers recorded from a live Phoenix server (testdata/README.md). The
 * replay client fails on any request that was not recorded, so these tests also pin the requests.
 */

const cassette: Cassette = loadCassette();
const T = cassette.traces;
const KEY = 'phx-test-key';
const UNKNOWN = '00000000000000000000000000000001';

function connectorFor(groups: string[], project = cassette.project) {
  const http = replayClient(cassette, groups);
  const connector = createPhoenixConnector({
    endpoint: ENDPOINT,
    project,
    http,
    apiKey: () => KEY,
  });
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

async function listAll(groups: string[], pageSize = 3): Promise<TraceHeader[]> {
  const { connector, http } = connectorFor(groups);
  const out: TraceHeader[] = [];
  let pageToken: string | undefined;
  let pages = 0;
  do {
    const page = await connector.list({
      ...cassette.window,
      pageSize,
      ...(pageToken ? { pageToken } : {}),
    });
    out.push(...page.traces);
    pageToken = page.nextPageToken;
    pages++;
  } while (pageToken !== undefined && pages < 10);
  expect(http.unused().filter((e) => groups.includes(e.group))).toEqual([]);
  return out;
}

function spansOf(fetched: FetchedTrace | undefined): Span[] {
  if (fetched === undefined || !('spans' in fetched)) {
    throw new Error(`expected spans, got ${JSON.stringify(fetched)}`);
  }
  return fetched.spans;
}

function golden(name: string): Omit<GoldenTrace, 'service'> {
  const url = new URL(
    `../../../../test/fixtures/otlp/golden/${name}.trajectory.json`,
    import.meta.url,
  );
  const doc = JSON.parse(readFileSync(url, 'utf8')) as { traces: GoldenTrace[] };
  const { service: _, ...rest } = doc.traces[0] as GoldenTrace;
  return rest;
}

describe(`Phoenix connector, answers recorded from Phoenix ${cassette.phoenixVersion}`, () => {
  it('check reads the project, then probes the trace list, with the bearer API key', async () => {
    const { connector, http } = connectorFor(['check']);
    await connector.check();
    expect(http.seen).toEqual([
      `GET /v1/projects/${cassette.project}`,
      `GET /v1/projects/${cassette.project}/traces?sort=start_time&order=asc&limit=1`,
    ]);
    expect(http.auth).toEqual([`Bearer ${KEY}`, `Bearer ${KEY}`]);
  });

  it("check names an unknown project as not found, without Phoenix's own text", async () => {
    const { connector } = connectorFor(['check-unknown'], 'no-such-project');
    const err = await caught(connector.check());
    expect(err).toMatchObject({ code: 'PHOENIX_PROJECT_NOT_FOUND', retryable: false });
    expect(err.message).toContain('"no-such-project"');
    expect(recordedBody(exchangesOf(cassette, 'check-unknown')[0]!).toString()).toContain(
      'not found',
    );
    expect(err.message).not.toContain('Project with name');
  });

  describe('list', () => {
    it('pages ascending by start time with fixed sort, bounds and limit and the opaque cursor', async () => {
      const headers = await listAll(['list']);
      expect(headers.map((h) => h.storeId)).toEqual([
        T.agent,
        T.langgraph,
        ...T.questions,
        T.open.trace_id,
      ]);
      const starts = headers.map((h) => h.startMs);
      expect([...starts].sort((a, b) => a - b)).toEqual(starts);
      const lists = exchangesOf(cassette, 'list')
        .filter((e) => e.url.includes('/traces?'))
        .map((e) => new URL(e.url, ENDPOINT));
      expect(lists).toHaveLength(3);
      for (const u of lists) {
        expect(u.searchParams.get('start_time')).toBe(
          new Date(cassette.window.fromMs).toISOString(),
        );
        expect(u.searchParams.get('end_time')).toBe(new Date(cassette.window.toMs).toISOString());
        expect(u.searchParams.get('sort')).toBe('start_time');
        expect(u.searchParams.get('order')).toBe('asc');
        expect(u.searchParams.get('limit')).toBe('3');
      }
      // Each page's cursor is the previous answer's next_cursor, as it was.
      const answers = exchangesOf(cassette, 'list')
        .filter((e) => e.url.includes('/traces?'))
        .map((e) => JSON.parse(recordedBody(e).toString()) as { next_cursor: string | null });
      expect(lists[1]?.searchParams.get('cursor')).toBe(answers[0]?.next_cursor);
      expect(lists[2]?.searchParams.get('cursor')).toBe(answers[1]?.next_cursor);
      expect(answers[2]?.next_cursor).toBeNull();
    });

    it('reads the root spans of each page in one request: no root span means in progress', async () => {
      const headers = await listAll(['list']);
      const roots = exchangesOf(cassette, 'list')
        .filter((e) => e.url.includes('/spans?'))
        .map((e) => new URL(e.url, ENDPOINT).searchParams);
      expect(roots.map((p) => [p.getAll('trace_id').length, p.get('parent_id')])).toEqual([
        [3, 'null'],
        [3, 'null'],
        [1, 'null'],
      ]);
      const open = headers.find((h) => h.storeId === T.open.trace_id) as TraceHeader;
      expect(open).toMatchObject({ inProgress: true, resource: {} });
      expect(open.endMs).toBeUndefined();
      for (const h of headers.filter((x) => x !== open)) {
        expect(h).toMatchObject({ inProgress: false, traceId: h.storeId });
        expect(h.endMs).toBeGreaterThan(h.startMs);
      }
    });

    it('turns a trace into a header: start and end in ms, labels of the root span', async () => {
      const headers = await listAll(['list']);
      const page = JSON.parse(recordedBody(exchangesOf(cassette, 'list')[0]!).toString()) as {
        data: { trace_id: string; start_time: string; end_time: string }[];
      };
      const raw = page.data[0]!;
      const agent = headers[0] as TraceHeader;
      expect(agent.storeId).toBe(raw.trace_id);
      expect(agent.startMs).toBe(Math.floor(Date.parse(raw.start_time)));
      expect(agent.endMs).toBe(Math.floor(Date.parse(raw.end_time)));
      expect(agent.resource).toEqual({});
      const q = headers.find((h) => h.storeId === T.questions[0]) as TraceHeader;
      expect(q.resource).toEqual({
        'touchstone.label.env': 'interop',
        'touchstone.label.team': 'search',
      });
    });

    it('an empty window is an empty page, without a root-span query', async () => {
      const { connector, http } = connectorFor(['list-empty']);
      const page = await connector.list({
        fromMs: 1_000_000_000_000,
        toMs: 1_000_000_060_000,
        pageSize: 3,
      });
      expect(page).toEqual({ traces: [] });
      expect(http.seen).toHaveLength(1);
    });

    it('a window that is not a window makes no request', async () => {
      const { connector, http } = connectorFor([]);
      expect(await connector.list({ fromMs: 5, toMs: 5, pageSize: 3 })).toEqual({ traces: [] });
      expect(http.seen).toEqual([]);
    });

    it('the trace whose root span arrived late lists finished', async () => {
      const { connector } = connectorFor(['late-root']);
      const page = await connector.list({ ...cassette.window, pageSize: 10 });
      const open = page.traces.find((h) => h.storeId === T.open.trace_id) as TraceHeader;
      expect(open.inProgress).toBe(false);
      expect(open.endMs).toBeGreaterThanOrEqual(open.startMs);
      expect(page.traces.every((h) => !h.inProgress)).toBe(true);
    });
  });

  describe('fetch', () => {
    async function fetchAll() {
      const headers = await listAll(['list']);
      const { connector, http } = connectorFor(['fetch']);
      const fetched = await connector.fetch([
        ...headers,
        { storeId: UNKNOWN, traceId: UNKNOWN, startMs: 0, inProgress: false, resource: {} },
      ]);
      expect(http.unused()).toEqual([]);
      return { headers, fetched, http };
    }

    it('reads the spans of up to 20 traces in one request', async () => {
      const { http } = await fetchAll();
      expect(http.seen).toHaveLength(1);
      const url = new URL(http.seen[0]?.split(' ')[1] as string, ENDPOINT);
      expect(url.searchParams.getAll('trace_id')).toHaveLength(8);
      expect(url.searchParams.get('limit')).toBe('1000');
    });

    it('the OpenAI agent normalizes to the golden trajectory of its fixture scenario', async () => {
      const { fetched } = await fetchAll();
      const spans = spansOf(fetched.get(T.agent));
      expect(spans).toHaveLength(6);
      const { service: _, ...got } = reduceTrace(normalizeTrace(spans));
      expect(got).toEqual(golden('openinference-openai-tool-error'));
    });

    it('the LangGraph agent normalizes to the golden trajectory of its fixture scenario', async () => {
      const { fetched } = await fetchAll();
      const { service: _, ...got } = reduceTrace(normalizeTrace(spansOf(fetched.get(T.langgraph))));
      expect(got).toEqual(golden('openinference-langgraph'));
    });

    it('keeps exact microsecond times, status, exception events and restores OpenInference attributes', async () => {
      const { fetched } = await fetchAll();
      const body = recordedBody(exchangesOf(cassette, 'fetch')[0]!).toString();
      const raw = (
        JSON.parse(body) as {
          data: { name: string; start_time: string; context: { trace_id: string } }[];
        }
      ).data.find((s) => s.name === 'suggest_clothes' && s.context.trace_id === T.agent)!;
      const spans = spansOf(fetched.get(T.agent));
      const failed = spans.find((s) => s.name === 'suggest_clothes') as Span;
      const micros = /\.(\d{6})\+00:00$/.exec(raw.start_time)?.[1] as string;
      expect(failed.startTimeUnixNano.endsWith(`${micros}000`)).toBe(true);
      expect(failed.startTimeUnixNano).toBe(
        `${Math.floor(Date.parse(raw.start_time) / 1000)}${micros}000`,
      );
      expect(failed.status).toEqual({
        code: 2,
        message: 'ClothingServiceError: clothing catalogue unavailable (HTTP 503)',
      });
      expect(failed.events[0]).toMatchObject({
        name: 'exception',
        attributes: { 'exception.type': 'common.ClothingServiceError' },
      });
      expect(failed.attributes['openinference.span.kind']).toBe('TOOL');
      expect(JSON.parse(failed.attributes['tool.parameters'] as string)).toEqual({
        type: 'object',
        title: 'suggest_clothes',
        description: 'Suggest clothes to wear for a temperature in degrees Celsius.',
        required: ['temperature_c'],
      });
      // Phoenix answers these flattened; they are JSON text again.
      expect(Object.keys(failed.attributes).some((k) => k.startsWith('tool.parameters.'))).toBe(
        false,
      );
      const llm = spans.find((s) => s.name === 'ChatCompletion') as Span;
      expect(llm.attributes['llm.token_count.prompt']).toEqual(expect.any(Number));
      for (const s of spans) expect(s.resource).toEqual({});
    });

    it('labels and metadata of the labelled traces reach the record', async () => {
      const { fetched, headers } = await fetchAll();
      const q = headers.find((h) => h.storeId === T.questions[1]) as TraceHeader;
      const spans = spansOf(fetched.get(q.storeId));
      expect(spans.every((s) => s.resource['touchstone.label.env'] === 'interop')).toBe(true);
      const { record } = normalizeTrace(spans);
      expect(record.labels).toEqual({ env: 'interop', team: 'search' });
      const root = spans.find((s) => s.parentSpanId === '') as Span;
      expect(JSON.parse(root.attributes.metadata as string)).toEqual({
        'touchstone.label.team': 'search',
        question: 2,
      });
    });

    it('returns the running trace as it is so far, and an unknown trace as missing', async () => {
      const { fetched } = await fetchAll();
      expect(spansOf(fetched.get(T.open.trace_id)).map((s) => s.parentSpanId)).toEqual([
        T.open.span_id,
      ]);
      expect(fetched.get(UNKNOWN)).toEqual({ missing: 'Phoenix holds no spans for this trace' });
      expect(fetched.size).toBe(8);
    });
  });

  describe('write-back', () => {
    const item: WriteBackItem = {
      storeId: T.agent,
      traceId: T.agent,
      policy: 'quality',
      metric: 'tool-errors',
      judge: false,
      score: { name: 'tool-errors', value: 0.5, explanation: 'one of two tool calls failed' },
    };
    const createdIds = () =>
      (
        JSON.parse(
          recordedBody(
            exchangesOf(cassette, 'write-create').find((e) => e.method === 'POST')!,
          ).toString(),
        ) as { data: { id: string }[] }
      ).data.map((d) => d.id);

    it('creates one trace annotation per metric with identifier, kind, result and metadata (sync)', async () => {
      const { connector, http } = connectorFor(['write-create']);
      const out = await connector.writeBack([
        item,
        {
          ...item,
          metric: 'helpfulness.passed',
          judge: true,
          score: { name: 'helpfulness.passed', passed: true, explanation: 'answers the question' },
        },
      ]);
      const ids = createdIds();
      expect(out).toEqual([
        { status: 'created', remoteId: ids[0] },
        { status: 'created', remoteId: ids[1] },
      ]);
      expect(http.seen.map((s) => s.split('?')[0])).toEqual([
        `GET /v1/projects/${cassette.project}/trace_annotations`,
        'POST /v1/trace_annotations',
      ]);
      expect(http.seen[1]).toBe('POST /v1/trace_annotations?sync=true');
      expect(http.bodies).toEqual([
        {
          data: [
            {
              trace_id: T.agent,
              name: 'tool-errors',
              annotator_kind: 'CODE',
              result: { score: 0.5, explanation: 'one of two tool calls failed' },
              metadata: {
                source: 'touchstone',
                policy: 'quality',
                evaluator: 'tool-errors',
                metric: 'tool-errors',
              },
              identifier: 'touchstone/quality/tool-errors',
            },
            {
              trace_id: T.agent,
              name: 'helpfulness.passed',
              annotator_kind: 'LLM',
              result: { score: 1, label: 'pass', explanation: 'answers the question' },
              metadata: {
                source: 'touchstone',
                policy: 'quality',
                evaluator: 'helpfulness',
                metric: 'helpfulness.passed',
              },
              identifier: 'touchstone/quality/helpfulness',
            },
          ],
        },
      ]);
    });

    it('with the ledger id: one upsert, reported updated when Phoenix answers that id', async () => {
      const [id] = createdIds();
      const { connector, http } = connectorFor(['write-update']);
      const out = await connector.writeBack([
        {
          ...item,
          remoteId: id as string,
          score: { name: 'tool-errors', value: 0.75, explanation: 're-scored' },
        },
      ]);
      expect(out).toEqual([{ status: 'updated', remoteId: id }]);
      expect(http.seen).toEqual(['POST /v1/trace_annotations?sync=true']);
    });

    it('with the ledger lost: finds the annotation by identifier, upserts it, reports updated', async () => {
      const [id] = createdIds();
      const { connector, http } = connectorFor(['write-lookup']);
      const out = await connector.writeBack([
        { ...item, score: { name: 'tool-errors', value: 0.25, explanation: 'ledger lost' } },
      ]);
      expect(out).toEqual([{ status: 'updated', remoteId: id }]);
      expect(http.seen.map((s) => s.split(' ')[0])).toEqual(['GET', 'POST']);
    });

    it('a score naming a span becomes a span annotation', async () => {
      const post = exchangesOf(cassette, 'write-span').find((e) => e.method === 'POST')!;
      const sent = JSON.parse(post.requestBody as string) as { data: { span_id: string }[] };
      const spanId = sent.data[0]?.span_id as string;
      const { connector, http } = connectorFor(['write-span']);
      const out = await connector.writeBack([
        {
          ...item,
          metric: 'tool-call-ok',
          score: { name: 'tool-call-ok', value: 0, metadata: { spanId } },
        },
      ]);
      expect(out).toEqual([{ status: 'created', remoteId: expect.any(String) }]);
      expect(http.seen[0]).toContain(`/span_annotations?span_ids=${spanId}`);
      expect(http.bodies[0]).toEqual({
        data: [
          {
            span_id: spanId,
            name: 'tool-call-ok',
            annotator_kind: 'CODE',
            result: { score: 0 },
            metadata: {
              source: 'touchstone',
              policy: 'quality',
              evaluator: 'tool-call-ok',
              metric: 'tool-call-ok',
              trace_id: T.agent,
            },
            identifier: 'touchstone/quality/tool-call-ok',
          },
        ],
      });
    });

    it('a trace Phoenix does not have fails alone (not retryable, the trace missing); the rest of the batch is written', async () => {
      const { connector, http } = connectorFor(['write-missing-trace']);
      const out = await connector.writeBack([
        { ...item, storeId: UNKNOWN, traceId: UNKNOWN },
        { ...item, storeId: T.langgraph, traceId: T.langgraph },
      ]);
      expect(out).toEqual([
        {
          status: 'failed',
          retryable: false,
          code: 'PHOENIX_REQUEST_REFUSED',
          error: expect.stringContaining('answered 404: the trace is not in Phoenix'),
          traceMissing: true,
        },
        { status: 'created', remoteId: expect.any(String) },
      ]);
      expect((out[0] as { error: string }).error).not.toContain(UNKNOWN);
      expect(http.seen.filter((s) => s.startsWith('POST'))).toHaveLength(3);
    });
  });
});
