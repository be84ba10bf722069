/**
 * Peer figure for the ingest benchmark: the same OTLP/HTTP protobuf bodies posted to MLflow 3's
 * OTLP endpoint (`POST /v1/traces` of `mlflow server`, SQLite backend, with the
 * `x-mlflow-experiment-id` header it requires), on a real server started by the interop tests'
 * helper (test/interop/mlflow/mlflow-server.ts, the venv of TOUCHSTONE_INTEROP_MLFLOW_PYTHON).
 *
 * MLflow writes the spans to its database before it answers, so the clock stops at the last
 * answer (the warm-up body, if any, is posted first and left out of the count); what it stored is then read back through its REST API (traces of the experiment by
 * search, their spans by batchGet) and only that count makes the rate. Skipped, with a reason,
 * when TOUCHSTONE_BENCH_MLFLOW=0, when the venv is not set or when the server cannot start.
 */
import { MLFLOW_PYTHON, startMlflowServer } from '../../test/interop/mlflow/mlflow-server.js';
import { countSpans } from './phoenix.js';
import { type IngestFigures, postBodies, type SliceOptions, storedAtAnswer } from './post.js';

export type MlflowIngestResult = (IngestFigures & { version: string }) | { skipped: string };

/** Trace ids per batchGet request (a GET: the ids are in the query string). */
const BATCH_GET = 50;

export async function mlflowIngest(
  bodies: Buffer[],
  options: SliceOptions,
): Promise<MlflowIngestResult> {
  if (process.env.TOUCHSTONE_BENCH_MLFLOW === '0') {
    return { skipped: 'disabled by TOUCHSTONE_BENCH_MLFLOW=0' };
  }
  if (MLFLOW_PYTHON === undefined) {
    return { skipped: 'TOUCHSTONE_INTEROP_MLFLOW_PYTHON is not set (see test/interop/mlflow)' };
  }
  let server: Awaited<ReturnType<typeof startMlflowServer>> | undefined;
  try {
    server = await startMlflowServer(MLFLOW_PYTHON, { maxSeconds: 3600 });
    const experimentId = await createExperiment(server.base);
    const headers = { 'x-mlflow-experiment-id': experimentId };
    const url = `${server.base}/v1/traces`;
    const warmUp = options.warmUp === undefined ? [] : [options.warmUp];
    await postBodies(url, warmUp, { inFlight: 1, headers });
    const spans = bodies.reduce((n, b) => n + countSpans(b), 0);
    const posted = await postBodies(url, bodies, { ...options, headers });
    const warmSpans = warmUp.reduce((n, b) => n + countSpans(b), 0);
    const stored = (await storedSpans(server.base, experimentId)) - warmSpans;
    return { ...storedAtAnswer(posted, spans, stored), version: server.version };
  } catch (err) {
    return { skipped: `MLflow run failed: ${(err as Error).message.slice(0, 1500)}` };
  } finally {
    await server?.stop();
  }
}

async function mlflowJson<T>(url: string, init?: RequestInit): Promise<T> {
  const res = await fetch(url, init);
  const text = await res.text();
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

async function createExperiment(base: string): Promise<string> {
  const { experiment_id } = await mlflowJson<{ experiment_id: string }>(
    `${base}/api/2.0/mlflow/experiments/create`,
    {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'touchstone-bench-ingest' }),
    },
  );
  return experiment_id;
}

/** Spans of every trace of the experiment, as MLflow's REST API returns them. */
async function storedSpans(base: string, experimentId: string): Promise<number> {
  const ids: string[] = [];
  let pageToken: string | undefined;
  do {
    const page = await mlflowJson<{ traces?: { trace_id: string }[]; next_page_token?: string }>(
      `${base}/api/3.0/mlflow/traces/search`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          locations: [
            { type: 'MLFLOW_EXPERIMENT', mlflow_experiment: { experiment_id: experimentId } },
          ],
          max_results: 500,
          page_token: pageToken,
        }),
      },
    );
    for (const t of page.traces ?? []) ids.push(t.trace_id);
    pageToken = page.next_page_token || undefined;
  } while (pageToken !== undefined);
  let spans = 0;
  for (let i = 0; i < ids.length; i += BATCH_GET) {
    const query = ids
      .slice(i, i + BATCH_GET)
      .map((id) => `trace_ids=${encodeURIComponent(id)}`)
      .join('&');
    const { traces } = await mlflowJson<{ traces?: { spans?: unknown[] }[] }>(
      `${base}/api/3.0/mlflow/traces/batchGet?${query}`,
    );
    for (const t of traces ?? []) spans += t.spans?.length ?? 0;
  }
  return spans;
}
