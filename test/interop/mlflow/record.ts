/**
 * Records the MLflow answers the connector's unit tests replay, from a live server:
 *
 *   TOUCHSTONE_INTEROP_MLFLOW_PYTHON=<venv>/bin/python npx tsx test/interop/mlflow/record.ts
 *
 * Starts `mlflow server` (SQLite) from the venv, makes the fixture traces with make_traces.py,
 * drives the real connector through check, list, fetch and write-back while a recording HTTP
 * client keeps every exchange, adds a few direct requests for answers the connector's normal path
 * avoids, and writes src/sources/connectors/mlflow/testdata/ (cassette.json + bodies/, raw bytes).
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createHttpClient, type HttpClient, type HttpRequest } from '../../../src/net/index.js';
import type { TraceHeader } from '../../../src/sources/connector.js';
import { createMlflowConnector } from '../../../src/sources/connectors/mlflow/index.js';
import {
  MLFLOW_PYTHON,
  MLFLOW_SKIP_REASON,
  makeTraces,
  startMlflowServer,
} from './mlflow-server.js';

const OUT = join(process.cwd(), 'src', 'sources', 'connectors', 'mlflow', 'testdata');
export const EXPERIMENT = 'touchstone-fixtures';
const SPANS_TAG = 'mlflow.tag.mlflow.trace.spansLocation';
const UNKNOWN: TraceHeader = {
  storeId: 'tr-00000000000000000000000000000001',
  traceId: '00000000000000000000000000000001',
  startMs: 0,
  inProgress: false,
  resource: { [SPANS_TAG]: 'TRACKING_STORE' },
};

interface Exchange {
  group: string;
  method: string;
  /** Path and query, without the origin (the port changes every run). */
  url: string;
  requestBody?: string;
  status: number;
  headers: Record<string, string>;
  bodyFile: string;
}

async function main(): Promise<void> {
  if (MLFLOW_PYTHON === undefined) throw new Error(MLFLOW_SKIP_REASON);
  const server = await startMlflowServer(MLFLOW_PYTHON);
  const exchanges: Exchange[] = [];
  const bodies: [string, Buffer][] = [];
  let group = '';
  const inner = createHttpClient({ timeoutMs: 60_000 });
  const http: HttpClient = {
    async request(req: HttpRequest) {
      const res = await inner.request(req);
      const url = new URL(req.url);
      const n = String(exchanges.length + 1).padStart(2, '0');
      const ext = /json|text\/plain/.test(res.headers['content-type'] ?? '') ? 'json' : 'txt';
      const bodyFile = `bodies/${n}-${group}.${ext}`;
      const headers: Record<string, string> = {};
      for (const k of ['content-type', 'retry-after']) {
        const v = res.headers[k];
        if (v !== undefined) headers[k] = v;
      }
      exchanges.push({
        group,
        method: req.method,
        url: `${url.pathname}${url.search}`,
        ...(req.body === undefined ? {} : { requestBody: String(req.body) }),
        status: res.status,
        headers,
        bodyFile,
      });
      bodies.push([bodyFile, res.body]);
      return res;
    },
    close: () => inner.close(),
  };
  const direct = async (g: string, req: Omit<HttpRequest, 'url'> & { path: string }) => {
    group = g;
    const { path, ...rest } = req;
    await http.request({ ...rest, url: `${server.base}${path}` });
  };

  try {
    const startedAt = Date.now();
    const traces = await makeTraces(server, EXPERIMENT);
    const window = { fromMs: startedAt - 60_000, toMs: Date.now() + 60_000 };
    const connector = createMlflowConnector({
      endpoint: server.base,
      locations: [EXPERIMENT],
      http,
    });

    group = 'check';
    await connector.check();

    group = 'list';
    const headers: TraceHeader[] = [];
    let pageToken: string | undefined;
    do {
      const page = await connector.list({
        ...window,
        pageSize: 3,
        ...(pageToken ? { pageToken } : {}),
      });
      headers.push(...page.traces);
      pageToken = page.nextPageToken;
    } while (pageToken !== undefined);

    group = 'list-empty';
    await connector.list({ fromMs: 1_000_000_000_000, toMs: 1_000_000_060_000, pageSize: 3 });

    group = 'fetch';
    await connector.fetch(headers);

    // batchGet answers 500 for a whole batch when one trace's spans are not in the tracking
    // store: a header that claims they are makes the connector find it one by one.
    const byId = (id: string) => {
      const h = headers.find((x) => x.storeId === id);
      if (h === undefined) throw new Error(`trace ${id} was not listed`);
      return h;
    };
    group = 'fetch-fallback';
    const claimed = byId(traces.artifact_only);
    await connector.fetch([
      byId(traces.questions[0] as string),
      { ...claimed, resource: { ...claimed.resource, [SPANS_TAG]: 'TRACKING_STORE' } },
    ]);
    group = 'fetch-unknown';
    await connector.fetch([UNKNOWN]);

    group = 'check-unknown';
    await createMlflowConnector({ endpoint: server.base, locations: ['no-such-experiment'], http })
      .check()
      .then(
        () => {
          throw new Error('check of an unknown experiment passed');
        },
        () => undefined,
      );

    const agent = headers.find((h) => h.storeId === traces.agent);
    if (agent === undefined) throw new Error('the agent trace was not listed');
    const item = {
      storeId: agent.storeId,
      traceId: agent.traceId,
      policy: 'quality',
      metric: 'tool-errors',
      judge: false,
    };
    group = 'write-create';
    const [created] = await connector.writeBack([
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
    if (created?.status !== 'created') throw new Error(`create failed: ${JSON.stringify(created)}`);
    group = 'write-update';
    await connector.writeBack([
      {
        ...item,
        remoteId: created.remoteId,
        score: { name: 'tool-errors', value: 0.75, explanation: 're-scored' },
      },
    ]);
    group = 'write-lookup';
    await connector.writeBack([
      { ...item, score: { name: 'tool-errors', value: 0.25, explanation: 'ledger lost' } },
    ]);

    group = 'write-missing-trace';
    await connector.writeBack([
      {
        ...item,
        storeId: UNKNOWN.storeId,
        traceId: UNKNOWN.traceId,
        score: { name: 'tool-errors', value: 1 },
      },
    ]);

    // Answers the connector's normal path avoids.
    await direct('search-page-too-large', {
      method: 'POST',
      path: '/api/3.0/mlflow/traces/search',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        locations: [
          { type: 'MLFLOW_EXPERIMENT', mlflow_experiment: { experiment_id: traces.experiment_id } },
        ],
        max_results: 501,
      }),
    });
    await direct('route-missing', { method: 'GET', path: '/api/3.0/mlflow/no-such-route' });

    rmSync(OUT, { recursive: true, force: true });
    mkdirSync(join(OUT, 'bodies'), { recursive: true });
    for (const [file, body] of bodies) writeFileSync(join(OUT, file), body);
    const cassette = {
      mlflowVersion: server.version,
      recordedWith: 'test/interop/mlflow/record.ts',
      experiment: EXPERIMENT,
      window,
      traces,
      exchanges,
    };
    writeFileSync(join(OUT, 'cassette.json'), `${JSON.stringify(cassette, null, 2)}\n`);
    console.log(`recorded ${exchanges.length} exchanges from MLflow ${server.version} into ${OUT}`);
  } finally {
    await http.close();
    await server.stop();
  }
}

await main();
