/**
 * Records the Phoenix answers the connector's unit tests replay, from a live server:
 *
 *   TOUCHSTONE_INTEROP_PHOENIX_PYTHON=<venv>/bin/python npx tsx test/interop/phoenix/record.ts
 *
 * Starts `phoenix serve` (SQLite, auth on) from the venv, makes the fixture traces with
 * make_traces.py, drives the real connector through check, list, fetch and write-back while a
 * recording HTTP client keeps every exchange (answers only: no request header, so no API key, is
 * kept), adds a few direct requests for answers the connector's normal path avoids, sends the open
 * trace's late root span and lists again, and writes src/sources/connectors/phoenix/testdata/
 * (cassette.json + bodies/, raw bytes).
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createHttpClient, type HttpClient, type HttpRequest } from '../../../src/net/index.js';
import type { TraceHeader, WriteBackItem } from '../../../src/sources/connector.js';
import { createPhoenixConnector } from '../../../src/sources/connectors/phoenix/index.js';
import {
  closeOpenTrace,
  makeTraces,
  PHOENIX_PYTHON,
  PHOENIX_SKIP_REASON,
  startPhoenixServer,
  waitFor,
} from './phoenix-server.js';

const OUT = join(process.cwd(), 'src', 'sources', 'connectors', 'phoenix', 'testdata');
export const PROJECT = 'touchstone-fixtures';
const UNKNOWN = '00000000000000000000000000000001';

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
  if (PHOENIX_PYTHON === undefined) throw new Error(PHOENIX_SKIP_REASON);
  const server = await startPhoenixServer(PHOENIX_PYTHON);
  const exchanges: Exchange[] = [];
  const bodies: [string, Buffer][] = [];
  let group = '';
  const inner = createHttpClient({ timeoutMs: 60_000 });
  const http: HttpClient = {
    async request(req: HttpRequest) {
      const res = await inner.request(req);
      const url = new URL(req.url);
      const n = String(exchanges.length + 1).padStart(2, '0');
      const type = res.headers['content-type'] ?? '';
      const ext = type.includes('json') ? 'json' : 'txt';
      const bodyFile = `bodies/${n}-${group}.${ext}`;
      const headers: Record<string, string> = {};
      for (const k of ['content-type', 'retry-after', 'x-phoenix-server-version']) {
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
  const direct = async (g: string, path: string, key = server.apiKey) => {
    group = g;
    await http.request({
      method: 'GET',
      url: `${server.base}${path}`,
      headers: { authorization: `Bearer ${key}` },
    });
  };

  try {
    const startedAt = Date.now();
    const traces = await makeTraces(server, PROJECT);
    const window = { fromMs: startedAt - 60_000, toMs: Date.now() + 60_000 };
    const connector = createPhoenixConnector({
      endpoint: server.base,
      project: PROJECT,
      http,
      apiKey: () => server.apiKey,
    });

    group = 'check';
    await connector.check();

    group = 'check-unknown';
    await createPhoenixConnector({
      endpoint: server.base,
      project: 'no-such-project',
      http,
      apiKey: () => server.apiKey,
    })
      .check()
      .then(
        () => {
          throw new Error('check of an unknown project passed');
        },
        () => undefined,
      );

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
    await connector.fetch([
      ...headers,
      { storeId: UNKNOWN, traceId: UNKNOWN, startMs: 0, inProgress: false, resource: {} },
    ]);

    const agent = headers.find((h) => h.storeId === traces.agent);
    if (agent === undefined) throw new Error('the agent trace was not listed');
    const item: WriteBackItem = {
      storeId: agent.storeId,
      traceId: agent.traceId,
      policy: 'quality',
      metric: 'tool-errors',
      judge: false,
      score: { name: 'tool-errors', value: 0.5, explanation: 'one of two tool calls failed' },
    };
    group = 'write-create';
    const [created] = await connector.writeBack([
      item,
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
    group = 'write-span';
    const fetched = await connector.fetch([agent]);
    const spans = fetched.get(agent.storeId);
    const failing =
      spans !== undefined && 'spans' in spans
        ? spans.spans.find((s) => s.name === 'suggest_clothes')?.spanId
        : undefined;
    if (failing === undefined) throw new Error('no suggest_clothes span');
    exchanges.splice(-1, 1);
    bodies.splice(-1, 1);
    await connector.writeBack([
      {
        ...item,
        metric: 'tool-call-ok',
        score: { name: 'tool-call-ok', value: 0, metadata: { spanId: failing } },
      },
    ]);
    group = 'write-missing-trace';
    await connector.writeBack([
      { ...item, storeId: UNKNOWN, traceId: UNKNOWN },
      { ...item, storeId: traces.langgraph, traceId: traces.langgraph },
    ]);

    // Answers the connector's normal path avoids.
    await direct('limit-too-large', `/v1/projects/${PROJECT}/traces?limit=5000`);
    await direct('route-missing', '/v1/no-such-route');
    await direct('unauthorized', `/v1/projects/${PROJECT}`, `${server.apiKey.slice(0, -4)}AAAA`);

    // The open trace's root span arrives: the same window lists it finished.
    await closeOpenTrace(server, PROJECT, traces.open);
    group = 'late-root';
    const mark = exchanges.length;
    await waitFor('the late root span', async () => {
      exchanges.splice(mark);
      bodies.splice(mark);
      const page = await connector.list({ ...window, pageSize: 10 });
      const h = page.traces.find((x) => x.storeId === traces.open.trace_id);
      return h !== undefined && !h.inProgress ? h : undefined;
    });

    rmSync(OUT, { recursive: true, force: true });
    mkdirSync(join(OUT, 'bodies'), { recursive: true });
    for (const [file, body] of bodies) writeFileSync(join(OUT, file), body);
    const cassette = {
      phoenixVersion: server.version,
      recordedWith: 'test/interop/phoenix/record.ts',
      project: PROJECT,
      window,
      traces,
      exchanges,
    };
    writeFileSync(join(OUT, 'cassette.json'), `${JSON.stringify(cassette, null, 2)}\n`);
    console.log(
      `recorded ${exchanges.length} exchanges from Phoenix ${server.version} into ${OUT}`,
    );
  } finally {
    await http.close();
    await server.stop();
  }
}

await main();
