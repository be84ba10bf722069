import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isTouchstoneError, type Span } from '../../src/core/index.js';
import { normalizeTrace } from '../../src/ingest/index.js';
import { createHttpClient, type HttpClient } from '../../src/net/index.js';
import type {
  FetchedTrace,
  TraceHeader,
  TraceStoreConnector,
} from '../../src/sources/connector.js';
import { createMlflowConnector } from '../../src/sources/connectors/mlflow/index.js';
import { connectorConformance } from '../sources/conformance.js';
import {
  assessmentsViaPython,
  type FixtureTraces,
  MLFLOW_PYTHON,
  MLFLOW_SKIP_REASON,
  type MlflowServer,
  makeTraces,
  startMlflowServer,
} from './mlflow/mlflow-server.js';

/**
 * The MLflow connector against a real `mlflow server` (SQLite backend) with traces made by the
 * MLflow Python SDK, and its write-back checked with MLflow's own Python client. Needs
 * TOUCHSTONE_INTEROP_MLFLOW_PYTHON (test/interop/mlflow/README.md); skipped without it.
 */

if (MLFLOW_PYTHON === undefined) {
  describe('MLflow connector against a live MLflow server', () => {
    it.skip(`skipped: ${MLFLOW_SKIP_REASON}`, () => {});
  });
}

const EXPERIMENT = 'touchstone-connector';

function spansOf(fetched: FetchedTrace | undefined): Span[] {
  if (fetched === undefined || !('spans' in fetched)) {
    throw new Error(`expected spans, got ${JSON.stringify(fetched)}`);
  }
  return fetched.spans;
}

describe.skipIf(MLFLOW_PYTHON === undefined)(
  'MLflow connector against a live MLflow server',
  () => {
    let server: MlflowServer;
    let http: HttpClient;
    let connector: TraceStoreConnector;
    let ids: FixtureTraces;
    let window: { fromMs: number; toMs: number };
    let listed: TraceHeader[];

    async function listAll(pageSize: number): Promise<{ headers: TraceHeader[]; pages: number }> {
      const headers: TraceHeader[] = [];
      let pageToken: string | undefined;
      let pages = 0;
      do {
        const page = await connector.list({
          ...window,
          pageSize,
          ...(pageToken ? { pageToken } : {}),
        });
        headers.push(...page.traces);
        pageToken = page.nextPageToken;
        pages++;
      } while (pageToken !== undefined && pages < 50);
      return { headers, pages };
    }

    beforeAll(async () => {
      server = await startMlflowServer(MLFLOW_PYTHON as string);
      const before = Date.now();
      ids = await makeTraces(server, EXPERIMENT);
      window = { fromMs: before - 5_000, toMs: Date.now() + 5_000 };
      http = createHttpClient({ timeoutMs: 60_000 });
      connector = createMlflowConnector({ endpoint: server.base, locations: [EXPERIMENT], http });
      listed = (await listAll(100)).headers;
    }, 300_000);

    afterAll(async () => {
      await http?.close();
      await server?.stop();
    }, 60_000);

    it(`runs MLflow 3.x (${MLFLOW_PYTHON ? 'live' : 'skipped'})`, () => {
      expect(server.version).toMatch(/^3\./);
    });

    describe('check', () => {
      it('resolves the experiment by name and by id', async () => {
        await connector.check();
        await createMlflowConnector({
          endpoint: server.base,
          locations: [ids.experiment_id],
          http,
        }).check();
      });

      it('names an unknown experiment', async () => {
        const err = await createMlflowConnector({
          endpoint: server.base,
          locations: ['no-such-experiment'],
          http,
        })
          .check()
          .catch((e: unknown) => e);
        expect(isTouchstoneError(err) && err.code).toBe('MLFLOW_EXPERIMENT_NOT_FOUND');
      });
    });

    describe('list', () => {
      it('lists every fixture trace once, ascending by start time', () => {
        expect(listed.map((h) => h.storeId)).toEqual([
          ids.agent,
          ...ids.questions,
          ids.artifact_only,
          ids.no_spans,
          ids.running,
        ]);
        const starts = listed.map((h) => h.startMs);
        expect([...starts].sort((a, b) => a - b)).toEqual(starts);
      });

      it('pages with a small page size without losing or repeating a trace', async () => {
        const { headers, pages } = await listAll(2);
        expect(pages).toBeGreaterThanOrEqual(4);
        expect(headers.map((h) => h.storeId)).toEqual(listed.map((h) => h.storeId));
      });

      it('an empty window is an empty page, not an error', async () => {
        const page = await connector.list({
          fromMs: 1_000_000_000_000,
          toMs: 1_000_000_060_000,
          pageSize: 10,
        });
        expect(page).toEqual({ traces: [] });
      });

      it('the window bounds are inclusive start, exclusive end', async () => {
        const agent = listed[0] as TraceHeader;
        const from = await connector.list({
          fromMs: agent.startMs,
          toMs: agent.startMs + 1,
          pageSize: 10,
        });
        expect(from.traces.map((h) => h.storeId)).toEqual([ids.agent]);
        const before = await connector.list({
          fromMs: agent.startMs - 10,
          toMs: agent.startMs,
          pageSize: 10,
        });
        expect(before.traces).toEqual([]);
      });

      it('headers carry the OTel trace id, state, tags and metadata', () => {
        const agent = listed[0] as TraceHeader;
        expect(agent).toMatchObject({ traceId: ids.agent.slice(3), inProgress: false });
        expect(agent.resource).toMatchObject({
          'mlflow.tag.workflow': 'weather',
          'mlflow.metadata.mlflow.trace.session': 'conv-42',
        });
        expect(listed.find((h) => h.storeId === ids.running)?.inProgress).toBe(true);
      });
    });

    describe('fetch', () => {
      let fetched: Map<string, FetchedTrace>;
      beforeAll(async () => {
        fetched = await connector.fetch([
          ...listed,
          {
            storeId: 'tr-00000000000000000000000000000001',
            traceId: '00000000000000000000000000000001',
            startMs: 0,
            inProgress: false,
            resource: { 'mlflow.tag.mlflow.trace.spansLocation': 'TRACKING_STORE' },
          },
        ]);
      }, 60_000);

      it('converts the agent trace into spans ingest turns into a trajectory', () => {
        const spans = spansOf(fetched.get(ids.agent));
        expect(spans).toHaveLength(5);
        for (const s of spans) {
          expect(s.traceId).toBe(ids.agent.slice(3));
          expect(s.spanId).toMatch(/^[0-9a-f]{16}$/);
          expect(BigInt(s.startTimeUnixNano)).toBeGreaterThan(BigInt(Number.MAX_SAFE_INTEGER));
        }
        const { record } = normalizeTrace(spans);
        const steps = record.trajectory ?? [];
        expect(steps.map((s) => `${s.type}:${s.name}`)).toEqual([
          'agent:travel_agent',
          'llm:ChatOpenAI',
          'tool:get_weather',
          'tool:get_time',
          'llm:ChatOpenAI',
        ]);
        expect(steps[1]?.usage).toMatchObject({ inputTokens: 84, outputTokens: 41 });
        expect(steps[3]?.error).toBe('TimeoutError: time service timed out');
        expect(record.output).toBe(
          'It is sunny and 21°C in Paris; the time service did not answer.',
        );
      });

      it('the artifact route and batchGet give the same spans for the same trace', async () => {
        const agent = listed[0] as TraceHeader;
        const { 'mlflow.tag.mlflow.trace.spansLocation': _, ...rest } = agent.resource;
        const viaArtifact = await connector.fetch([{ ...agent, resource: rest }]);
        const strip = (spans: Span[]) =>
          spans.map(({ resource: _r, ...s }) => s).sort((a, b) => a.spanId.localeCompare(b.spanId));
        expect(strip(spansOf(viaArtifact.get(agent.storeId)))).toEqual(
          strip(spansOf(fetched.get(agent.storeId))),
        );
      });

      it('reads the artifact-only trace, the running one so far, and reports the others missing', () => {
        expect(
          spansOf(fetched.get(ids.artifact_only))
            .map((s) => s.name)
            .sort(),
        ).toEqual(['answer', 'retrieve']);
        expect(spansOf(fetched.get(ids.running)).map((s) => s.name)).toEqual(['step-1']);
        expect(fetched.get(ids.no_spans)).toEqual({ missing: expect.any(String) });
        expect(fetched.get('tr-00000000000000000000000000000001')).toEqual({
          missing: expect.any(String),
        });
      });
    });

    describe('write-back', () => {
      const base = () => ({
        storeId: ids.agent,
        traceId: ids.agent.slice(3),
        policy: 'quality',
        metric: 'tool-errors',
        judge: false,
      });
      let created: string;

      it('creates feedback assessments MLflow reads back with name, value, source and rationale', async () => {
        const out = await connector.writeBack([
          {
            ...base(),
            score: { name: 'tool-errors', value: 0.5, explanation: 'one of two tools failed' },
          },
          {
            ...base(),
            metric: 'helpfulness.passed',
            judge: true,
            score: { name: 'helpfulness.passed', passed: true, explanation: 'answers it' },
          },
          { ...base(), metric: 'tone', score: { name: 'tone', label: 'friendly' } },
        ]);
        expect(out.map((o) => o.status)).toEqual(['created', 'created', 'created']);
        created = (out[0] as { remoteId: string }).remoteId;
        const seen = await assessmentsViaPython(server, ids.agent);
        expect(seen).toEqual(
          expect.arrayContaining([
            {
              id: created,
              name: 'tool-errors',
              value: 0.5,
              source_type: 'CODE',
              source_id: 'touchstone/quality',
              rationale: 'one of two tools failed',
              valid: true,
            },
            expect.objectContaining({
              name: 'helpfulness.passed',
              value: true,
              source_type: 'LLM_JUDGE',
              source_id: 'touchstone/quality',
              rationale: 'answers it',
            }),
            expect.objectContaining({ name: 'tone', value: 'friendly', source_type: 'CODE' }),
          ]),
        );
        expect(seen).toHaveLength(3);
      });

      it('updates in place through the remote id (PATCH with an update mask)', async () => {
        const out = await connector.writeBack([
          {
            ...base(),
            remoteId: created,
            score: { name: 'tool-errors', value: 0.75, explanation: 're-scored' },
          },
        ]);
        expect(out).toEqual([{ status: 'updated', remoteId: created }]);
        const mine = (await assessmentsViaPython(server, ids.agent)).filter(
          (a) => a.name === 'tool-errors',
        );
        expect(mine).toEqual([
          expect.objectContaining({ id: created, value: 0.75, rationale: 're-scored' }),
        ]);
      });

      it('without a remote id, updates the assessment with the same name and source instead of duplicating', async () => {
        const out = await connector.writeBack([
          { ...base(), score: { name: 'tool-errors', value: 0.25, explanation: 'ledger lost' } },
          // A stale remote id (deleted in MLflow) also lands on the same assessment.
          {
            ...base(),
            remoteId: 'a-00000000000000000000000000000000',
            score: { name: 'tool-errors', value: 0.3 },
          },
        ]);
        expect(out).toEqual([
          { status: 'updated', remoteId: created },
          { status: 'updated', remoteId: created },
        ]);
        const mine = (await assessmentsViaPython(server, ids.agent)).filter(
          (a) => a.name === 'tool-errors',
        );
        expect(mine).toEqual([
          expect.objectContaining({ id: created, value: 0.3, source_id: 'touchstone/quality' }),
        ]);
      });

      it('another policy writing the same metric gets its own assessment', async () => {
        const [out] = await connector.writeBack([
          { ...base(), policy: 'safety', score: { name: 'tool-errors', value: 1 } },
        ]);
        expect(out?.status).toBe('created');
        const sources = (await assessmentsViaPython(server, ids.agent))
          .filter((a) => a.name === 'tool-errors')
          .map((a) => a.source_id)
          .sort();
        expect(sources).toEqual(['touchstone/quality', 'touchstone/safety']);
      });

      it('a trace MLflow does not have fails the item without retry', async () => {
        const [out] = await connector.writeBack([
          {
            ...base(),
            storeId: 'tr-00000000000000000000000000000001',
            score: { name: 'x', value: 1 },
          },
        ]);
        expect(out).toMatchObject({ status: 'failed', retryable: false });
      });
    });

    connectorConformance('MLflow', async () => ({
      endpoint: server.base,
      credential: 'sentinel-mlflow-token-8c1d70',
      connector: (endpoint, credential) =>
        createMlflowConnector({ endpoint, locations: [EXPERIMENT], http, token: () => credential }),
      seeded: async () =>
        listed
          .filter((h) => !h.inProgress)
          .map((h) => ({ storeId: h.storeId, startMs: h.startMs })),
      readScores: async (storeId) =>
        (await assessmentsViaPython(server, storeId))
          .filter((a) => a.valid)
          .map((a) => ({ name: a.name, value: a.value })),
    }));
  },
);
