import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isTouchstoneError, type Span, type TouchstoneError } from '../../src/core/index.js';
import { type GoldenTrace, reduceTrace } from '../../src/ingest/conventions/golden.testkit.js';
import { normalizeTrace } from '../../src/ingest/index.js';
import { createHttpClient, type HttpClient, type HttpRequest } from '../../src/net/index.js';
import type {
  FetchedTrace,
  TraceHeader,
  TraceStoreConnector,
  WriteBackItem,
} from '../../src/sources/connector.js';
import { createPhoenixConnector } from '../../src/sources/connectors/phoenix/index.js';
import { headerVersion } from '../../src/sources/manager.js';
import { connectorConformance } from '../sources/conformance.js';
import {
  closeOpenTrace,
  type FixtureTraces,
  makeTraces,
  PHOENIX_PYTHON,
  PHOENIX_SKIP_REASON,
  type PhoenixServer,
  phoenixGet,
  spanAnnotationsViaPython,
  startPhoenixServer,
  traceAnnotations,
  waitFor,
} from './phoenix/phoenix-server.js';

/**
 * The Phoenix connector against a real `phoenix serve` (SQLite, auth on, a system API key) with
 * traces made by real OpenInference instrumentation (the OTLP fixtures' own scenarios: the
 * OpenAI instrumentation with a failing tool, LangGraph through the LangChain instrumentation;
 * plus labelled traces and one whose root span arrives late), and its write-back checked through
 * Phoenix's REST API and its Python client. Needs TOUCHSTONE_INTEROP_PHOENIX_PYTHON
 * (test/interop/phoenix/README.md); skipped without it.
 */

if (PHOENIX_PYTHON === undefined) {
  describe('Phoenix connector against a live Phoenix server', () => {
    it.skip(`skipped: ${PHOENIX_SKIP_REASON}`, () => {});
  });
}

const PROJECT = 'touchstone-connector';
const UNKNOWN_TRACE = '00000000000000000000000000000001';
const GOLDEN = join(process.cwd(), 'test', 'fixtures', 'otlp', 'golden');

function spansOf(fetched: FetchedTrace | undefined): Span[] {
  if (fetched === undefined || !('spans' in fetched)) {
    throw new Error(`expected spans, got ${JSON.stringify(fetched)}`);
  }
  return fetched.spans;
}

/** The golden trajectory of a fixture scenario, without the service (Phoenix drops resources). */
function golden(name: string): Omit<GoldenTrace, 'service'> {
  const doc = JSON.parse(readFileSync(join(GOLDEN, `${name}.trajectory.json`), 'utf8')) as {
    traces: GoldenTrace[];
  };
  const { service: _, ...rest } = doc.traces[0] as GoldenTrace;
  return rest;
}

function reduced(spans: Span[]): Omit<GoldenTrace, 'service'> {
  const { service: _, ...rest } = reduceTrace(normalizeTrace(spans));
  return rest;
}

async function caught(p: Promise<unknown>): Promise<TouchstoneError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (isTouchstoneError(err)) return err;
  throw new Error(`expected a TouchstoneError, got ${String(err)}`);
}

describe.skipIf(PHOENIX_PYTHON === undefined)(
  'Phoenix connector against a live Phoenix server',
  () => {
    let server: PhoenixServer;
    let http: HttpClient;
    /** The URLs the connector asked, path and query. */
    const asked: URL[] = [];
    let connector: TraceStoreConnector;
    let ids: FixtureTraces;
    let window: { fromMs: number; toMs: number };
    let listed: TraceHeader[];

    async function listAll(
      pageSize: number,
      c: TraceStoreConnector = connector,
    ): Promise<{ headers: TraceHeader[]; pages: number }> {
      const headers: TraceHeader[] = [];
      let pageToken: string | undefined;
      let pages = 0;
      do {
        const page = await c.list({ ...window, pageSize, ...(pageToken ? { pageToken } : {}) });
        headers.push(...page.traces);
        pageToken = page.nextPageToken;
        pages++;
      } while (pageToken !== undefined && pages < 50);
      return { headers, pages };
    }

    const connectorFor = (extra: { project?: string; apiKey?: string } = {}) =>
      createPhoenixConnector({
        endpoint: server.base,
        project: extra.project ?? PROJECT,
        http,
        apiKey: () => extra.apiKey ?? server.apiKey,
      });

    beforeAll(async () => {
      server = await startPhoenixServer(PHOENIX_PYTHON as string);
      const before = Date.now();
      ids = await makeTraces(server, PROJECT);
      window = { fromMs: before - 5_000, toMs: Date.now() + 5_000 };
      const inner = createHttpClient({ timeoutMs: 60_000 });
      http = {
        request(req: HttpRequest) {
          asked.push(new URL(req.url));
          return inner.request(req);
        },
        close: () => inner.close(),
      };
      connector = connectorFor();
      listed = (await listAll(100)).headers;
    }, 400_000);

    afterAll(async () => {
      await http?.close();
      await server?.stop();
    }, 60_000);

    it(`runs Phoenix 20.x (${PHOENIX_PYTHON ? 'live' : 'skipped'})`, () => {
      const [major, minor] = server.version.split('.').map(Number);
      expect(major === 20 && (minor as number) >= 20, server.version).toBe(true);
    });

    describe('check', () => {
      it('finds the project by name and by its id', async () => {
        await connector.check();
        const { json } = await phoenixGet(server, `/v1/projects/${PROJECT}`);
        const id = (json as { data: { id: string } }).data.id;
        expect(id).not.toBe(PROJECT);
        await connectorFor({ project: id }).check();
      });

      it('names an unknown project', async () => {
        const err = await caught(connectorFor({ project: 'no-such-project' }).check());
        expect(err).toMatchObject({ code: 'PHOENIX_PROJECT_NOT_FOUND', kind: 'not_found' });
        expect(err.message).toContain('"no-such-project"');
      });

      it('a wrong or missing API key is access denied, and the key is in no message', async () => {
        const wrong = `${server.apiKey.slice(0, -4)}AAAA`;
        const err = await caught(connectorFor({ apiKey: wrong }).check());
        expect(err).toMatchObject({ code: 'PHOENIX_ACCESS_DENIED', retryable: false });
        expect(err.message).toContain('401');
        expect(JSON.stringify({ m: err.message, d: err.details })).not.toContain(wrong);
        const none = await caught(connectorFor({ apiKey: '' }).list({ ...window, pageSize: 5 }));
        expect(none).toMatchObject({ code: 'PHOENIX_ACCESS_DENIED' });
      });
    });

    describe('list', () => {
      it('lists every trace once, ascending by start time', () => {
        expect(listed.map((h) => h.storeId)).toEqual([
          ids.agent,
          ids.langgraph,
          ...ids.questions,
          ids.open.trace_id,
        ]);
        const starts = listed.map((h) => h.startMs);
        expect([...starts].sort((a, b) => a - b)).toEqual(starts);
        for (const h of listed) expect(h.traceId).toBe(h.storeId);
      });

      it('reports the trace without a root span as in progress, the others finished', () => {
        const open = listed.find((h) => h.storeId === ids.open.trace_id) as TraceHeader;
        expect(open).toMatchObject({ inProgress: true, resource: {} });
        expect(open.endMs).toBeUndefined();
        for (const h of listed.filter((x) => x !== open)) {
          expect(h.inProgress).toBe(false);
          expect(h.endMs).toBeGreaterThan(h.startMs);
        }
      });

      it('puts the root span’s touchstone.label.* (attribute or metadata) on the header', () => {
        const q = listed.find((h) => h.storeId === ids.questions[0]) as TraceHeader;
        expect(q.resource).toEqual({
          'touchstone.label.env': 'interop',
          'touchstone.label.team': 'search',
        });
        expect(listed.find((h) => h.storeId === ids.agent)?.resource).toEqual({});
      });

      it('pages with a small page size, same query on every page, nothing lost or repeated', async () => {
        asked.length = 0;
        const { headers, pages } = await listAll(2);
        expect(pages).toBe(4);
        expect(headers.map((h) => h.storeId)).toEqual(listed.map((h) => h.storeId));
        const lists = asked.filter((u) => u.pathname.endsWith('/traces'));
        expect(lists).toHaveLength(4);
        const fixed = (u: URL) => {
          const p = new URLSearchParams(u.search);
          p.delete('cursor');
          return p.toString();
        };
        for (const u of lists) expect(fixed(u)).toBe(fixed(lists[0] as URL));
        expect(new URLSearchParams(lists[0]?.search).get('sort')).toBe('start_time');
        expect(new URLSearchParams(lists[0]?.search).get('order')).toBe('asc');
        expect(lists.slice(1).every((u) => u.searchParams.has('cursor'))).toBe(true);
        // One root-span query per page, for that page's traces.
        const rootQueries = asked.filter((u) => u.searchParams.get('parent_id') === 'null');
        expect(rootQueries.map((u) => u.searchParams.getAll('trace_id').length)).toEqual([
          2, 2, 2, 1,
        ]);
      });

      it('the window bounds are inclusive start, exclusive end; an empty window is empty', async () => {
        const agent = listed[0] as TraceHeader;
        const at = await connector.list({
          fromMs: agent.startMs,
          toMs: agent.startMs + 1,
          pageSize: 10,
        });
        expect(at.traces.map((h) => h.storeId)).toEqual([ids.agent]);
        const before = await connector.list({
          fromMs: agent.startMs - 10,
          toMs: agent.startMs,
          pageSize: 10,
        });
        expect(before).toEqual({ traces: [] });
        expect(
          await connector.list({ fromMs: 1_000_000_000_000, toMs: 1_000_000_060_000, pageSize: 5 }),
        ).toEqual({ traces: [] });
      });
    });

    describe('fetch', () => {
      let fetched: Map<string, FetchedTrace>;
      beforeAll(async () => {
        fetched = await connector.fetch([
          ...listed,
          {
            storeId: UNKNOWN_TRACE,
            traceId: UNKNOWN_TRACE,
            startMs: 0,
            inProgress: false,
            resource: {},
          },
        ]);
      }, 60_000);

      it('the OpenAI agent with a failing tool normalizes to the fixture scenario’s golden trajectory', () => {
        const spans = spansOf(fetched.get(ids.agent));
        expect(spans).toHaveLength(6);
        for (const s of spans) {
          expect(s.traceId).toBe(ids.agent);
          expect(BigInt(s.startTimeUnixNano)).toBeGreaterThan(BigInt(Number.MAX_SAFE_INTEGER));
        }
        expect(reduced(spans)).toEqual(golden('openinference-openai-tool-error'));
        const failed = spans.find((s) => s.name === 'suggest_clothes') as Span;
        expect(failed.status).toEqual({
          code: 2,
          message: 'ClothingServiceError: clothing catalogue unavailable (HTTP 503)',
        });
        expect(failed.events[0]).toMatchObject({
          name: 'exception',
          attributes: { 'exception.message': 'clothing catalogue unavailable (HTTP 503)' },
        });
        // Restored as the instrumentation sent them: the span kind and JSON-text attributes.
        expect(failed.attributes['openinference.span.kind']).toBe('TOOL');
        expect(JSON.parse(failed.attributes['tool.parameters'] as string)).toMatchObject({
          type: 'object',
          title: 'suggest_clothes',
          required: ['temperature_c'],
        });
      });

      it('the LangGraph agent normalizes to its golden trajectory', () => {
        expect(reduced(spansOf(fetched.get(ids.langgraph)))).toEqual(
          golden('openinference-langgraph'),
        );
      });

      it('labels from span attributes and metadata reach the record; metadata is JSON text again', () => {
        const spans = spansOf(fetched.get(ids.questions[0] as string));
        const { record } = normalizeTrace(spans);
        expect(record.labels).toEqual({ env: 'interop', team: 'search' });
        expect(record.trajectory?.map((s) => `${s.type}:${s.name}`)).toEqual([
          'agent:answer',
          'retrieval:retrieve',
        ]);
        const root = spans.find((s) => s.parentSpanId === '') as Span;
        expect(JSON.parse(root.attributes.metadata as string)).toEqual({
          'touchstone.label.team': 'search',
          question: 1,
        });
      });

      it('returns the running trace as it is so far, and reports an unknown trace missing', () => {
        const open = spansOf(fetched.get(ids.open.trace_id));
        expect(open.map((s) => `${s.name}<${s.parentSpanId}`)).toEqual([
          `ChatCompletion<${ids.open.span_id}`,
        ]);
        expect(fetched.get(UNKNOWN_TRACE)).toEqual({
          missing: 'Phoenix holds no spans for this trace',
        });
        expect(fetched.size).toBe(listed.length + 1);
      });
    });

    describe('write-back', () => {
      const item = (over: Partial<WriteBackItem> = {}): WriteBackItem => ({
        storeId: ids.agent,
        traceId: ids.agent,
        policy: 'quality',
        metric: 'tool-errors',
        judge: false,
        score: { name: 'tool-errors', value: 0.5, explanation: 'one of two tools failed' },
        ...over,
      });
      let first: string[];
      let failingSpan: string;

      it('creates trace annotations Phoenix lists with name, kind, result, identifier', async () => {
        const out = await connector.writeBack([
          item(),
          item({
            metric: 'helpfulness.passed',
            judge: true,
            score: { name: 'helpfulness.passed', passed: true, explanation: 'answers it' },
          }),
          item({ metric: 'tone', score: { name: 'tone', label: 'friendly' } }),
        ]);
        expect(out.map((o) => o.status)).toEqual(['created', 'created', 'created']);
        first = out.map((o) => (o as { remoteId: string }).remoteId);
        const seen = await traceAnnotations(server, PROJECT, ids.agent);
        expect(seen).toHaveLength(3);
        expect(seen).toEqual(
          expect.arrayContaining([
            expect.objectContaining({
              id: first[0],
              name: 'tool-errors',
              annotator_kind: 'CODE',
              identifier: 'touchstone/quality/tool-errors',
              source: 'API',
              result: { score: 0.5, label: null, explanation: 'one of two tools failed' },
              metadata: {
                source: 'touchstone',
                policy: 'quality',
                evaluator: 'tool-errors',
                metric: 'tool-errors',
              },
            }),
            expect.objectContaining({
              id: first[1],
              name: 'helpfulness.passed',
              annotator_kind: 'LLM',
              identifier: 'touchstone/quality/helpfulness',
              result: { score: 1, label: 'pass', explanation: 'answers it' },
            }),
            expect.objectContaining({
              id: first[2],
              name: 'tone',
              result: { score: null, label: 'friendly', explanation: null },
            }),
          ]),
        );
      });

      it('a second write with the same identifier upserts: same ids, new values, no duplicate', async () => {
        // Without the ledger's ids (lost), then with them.
        const again = await connector.writeBack([
          item({ score: { name: 'tool-errors', value: 0.25, explanation: 'ledger lost' } }),
          item({
            metric: 'helpfulness.passed',
            judge: true,
            remoteId: first[1] as string,
            score: { name: 'helpfulness.passed', passed: false, explanation: 're-judged' },
          }),
        ]);
        expect(again).toEqual([
          { status: 'updated', remoteId: first[0] },
          { status: 'updated', remoteId: first[1] },
        ]);
        const seen = await traceAnnotations(server, PROJECT, ids.agent);
        expect(seen).toHaveLength(3);
        expect(seen.find((a) => a.name === 'tool-errors')?.result).toEqual({
          score: 0.25,
          label: null,
          explanation: 'ledger lost',
        });
        expect(seen.find((a) => a.name === 'helpfulness.passed')?.result).toMatchObject({
          score: 0,
          label: 'fail',
        });
      });

      it('another policy writing the same metric gets its own annotation', async () => {
        const [out] = await connector.writeBack([item({ policy: 'safety' })]);
        expect(out?.status).toBe('created');
        const identifiers = (await traceAnnotations(server, PROJECT, ids.agent))
          .filter((a) => a.name === 'tool-errors')
          .map((a) => a.identifier)
          .sort();
        expect(identifiers).toEqual([
          'touchstone/quality/tool-errors',
          'touchstone/safety/tool-errors',
        ]);
      });

      it('a score naming a span becomes a span annotation, read back with Phoenix’s Python client', async () => {
        const spans = spansOf((await connector.fetch([listed[0] as TraceHeader])).get(ids.agent));
        failingSpan = (spans.find((s) => s.name === 'suggest_clothes') as Span).spanId;
        const span = (value: number): WriteBackItem =>
          item({
            metric: 'tool-call-ok',
            score: { name: 'tool-call-ok', value, metadata: { spanId: failingSpan } },
          });
        const [created] = await connector.writeBack([span(0)]);
        expect(created?.status).toBe('created');
        const [updated] = await connector.writeBack([span(0.1)]);
        expect(updated).toEqual({
          status: 'updated',
          remoteId: (created as { remoteId: string }).remoteId,
        });
        const seen = await spanAnnotationsViaPython(server, PROJECT, [failingSpan]);
        expect(seen).toEqual([
          expect.objectContaining({
            span_id: failingSpan,
            name: 'tool-call-ok',
            annotator_kind: 'CODE',
            identifier: 'touchstone/quality/tool-call-ok',
            result: expect.objectContaining({ score: 0.1 }),
          }),
        ]);
        // Not on the trace.
        expect(
          (await traceAnnotations(server, PROJECT, ids.agent)).map((a) => a.name),
        ).not.toContain('tool-call-ok');
        // Importing phoenix.client imports the whole server package: 10-30 s.
      }, 180_000);

      it('a trace Phoenix does not have fails alone, not retryable; the rest of the batch is written', async () => {
        const out = await connector.writeBack([
          item({ storeId: UNKNOWN_TRACE, traceId: UNKNOWN_TRACE }),
          item({ storeId: ids.langgraph, traceId: ids.langgraph }),
        ]);
        expect(out[0]).toMatchObject({ status: 'failed', retryable: false });
        expect((out[0] as { error: string }).error).toContain('404');
        expect(out[1]?.status).toBe('created');
        expect((await traceAnnotations(server, PROJECT, ids.langgraph)).map((a) => a.name)).toEqual(
          ['tool-errors'],
        );
      });
    });

    describe('a root span that arrives late', () => {
      it('completes the deferred trace: the header turns finished, its version changes, fetch has the root', async () => {
        const open = listed.find((h) => h.storeId === ids.open.trace_id) as TraceHeader;
        await closeOpenTrace(server, PROJECT, ids.open);
        const done = await waitFor('the late root span', async () => {
          const page = await connector.list({ ...window, pageSize: 100 });
          const h = page.traces.find((x) => x.storeId === ids.open.trace_id);
          return h !== undefined && !h.inProgress ? h : undefined;
        });
        // The trace's start is its earliest span's: the root started before its child.
        expect(done.startMs).toBeLessThanOrEqual(open.startMs);
        expect(done.endMs).toBeGreaterThanOrEqual(done.startMs);
        expect(headerVersion(done)).not.toBe(headerVersion(open));
        const spans = spansOf((await connector.fetch([done])).get(done.storeId));
        const { record } = normalizeTrace(spans);
        expect(record.trajectory?.map((s) => `${s.type}:${s.name}`)).toEqual([
          'agent:open-agent',
          'llm:ChatCompletion',
        ]);
        expect(record.output).toBe('It is sunny in Paris.');
      }, 90_000);
    });

    connectorConformance('Phoenix', async () => ({
      endpoint: server.base,
      credential: server.apiKey,
      connector: (endpoint, credential) =>
        createPhoenixConnector({ endpoint, project: PROJECT, http, apiKey: () => credential }),
      seeded: async () =>
        listed
          .filter((h) => !h.inProgress)
          .map((h) => ({ storeId: h.storeId, startMs: h.startMs })),
      readScores: async (storeId) =>
        (await traceAnnotations(server, PROJECT, storeId)).map((a) => ({
          name: a.name,
          value: a.result.score ?? a.result.label,
        })),
    }));
  },
);
