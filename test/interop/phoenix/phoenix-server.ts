import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../support/process.js';
import { killGroup, runPython } from '../../support/python.js';

/**
 * A real Arize Phoenix server for interop tests, run from the venv that
 * TOUCHSTONE_INTEROP_PHOENIX_PYTHON points at (test/interop/phoenix/requirements.txt; .ci/run
 * makes it). `phoenix serve` binds 127.0.0.1 only (its OTLP/gRPC listener, which would bind every
 * interface, is switched off), keeps its SQLite database in a temp dir (PHOENIX_WORKING_DIR), runs
 * with authentication on, and stops by itself: serve.py stops the server's process group when
 * our stdin pipe closes (this process ended or died) or after `maxSeconds`; `stop()` also kills
 * the group directly. The test's API key is a system API key made with the admin secret, as an
 * administrator makes one for an integration.
 */

export const PHOENIX_PYTHON = process.env.TOUCHSTONE_INTEROP_PHOENIX_PYTHON || undefined;

export const PHOENIX_SKIP_REASON =
  'TOUCHSTONE_INTEROP_PHOENIX_PYTHON is not set (the python of a venv with ' +
  'test/interop/phoenix/requirements.txt; see test/interop/phoenix/README.md)';

const HERE = join(process.cwd(), 'test', 'interop', 'phoenix');

export interface PhoenixServer {
  base: string;
  python: string;
  /** `x-phoenix-server-version` of the running server. */
  version: string;
  /** A system API key (bearer). */
  apiKey: string;
  /** PHOENIX_ADMIN_SECRET (also a bearer for admin routes). */
  adminSecret: string;
  stop(): Promise<void>;
}

export interface OpenTrace {
  trace_id: string;
  span_id: string;
  start_ns: string;
}

export interface FixtureTraces {
  project: string;
  /** openinference-openai scenario with a tool error (suggest_clothes raises). */
  agent: string;
  /** openinference-langgraph scenario. */
  langgraph: string;
  /** Four small CHAIN traces with labels. */
  questions: string[];
  /** A trace whose root span has not arrived. */
  open: OpenTrace;
}

export /** A Phoenix secret: at least 32 characters with a digit and a lowercase letter. */
function secret(prefix: string): string {
  return `${prefix}-${randomBytes(24).toString('hex')}-0a`;
}

export async function startPhoenixServer(
  python: string,
  options: { maxSeconds?: number; startTimeoutMs?: number } = {},
): Promise<PhoenixServer> {
  const workDir = mkdtempSync(join(tmpdir(), 'touchstone-phoenix-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const adminSecret = secret('admin');
  const launcher: ChildProcess = spawn(
    python,
    [join(HERE, 'serve.py'), String(port), workDir, String(options.maxSeconds ?? 1800)],
    {
      cwd: workDir,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: {
        ...process.env,
        PHOENIX_ENABLE_AUTH: 'true',
        PHOENIX_SECRET: secret('jwt'),
        PHOENIX_ADMIN_SECRET: adminSecret,
      },
    },
  );
  let log = '';
  let serverGroup: number | undefined;
  launcher.stdout?.on('data', (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    if (serverGroup === undefined) {
      const first = /^(\d+)\n/.exec(text);
      if (first) serverGroup = Number(first[1]);
    }
    log = (log + text).slice(-4000);
  });
  launcher.stderr?.on('data', (chunk: Buffer) => {
    log = (log + chunk.toString('utf8')).slice(-4000);
  });
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    launcher.once('exit', () => {
      exited = true;
      resolve();
    });
    launcher.once('error', (err) => {
      log += String(err);
      exited = true;
      resolve();
    });
  });
  // Last resort when the test process exits without afterAll.
  const onExit = (): void => {
    killGroup(serverGroup, 'SIGKILL');
    killGroup(launcher.pid, 'SIGKILL');
  };
  process.once('exit', onExit);

  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      process.removeListener('exit', onExit);
      launcher.stdin?.end();
      killGroup(serverGroup, 'SIGTERM');
      const timer = setTimeout(() => {
        killGroup(serverGroup, 'SIGKILL');
        killGroup(launcher.pid, 'SIGKILL');
      }, 20_000);
      if (!exited) await exit;
      clearTimeout(timer);
      killGroup(serverGroup, 'SIGKILL');
      rmSync(workDir, { recursive: true, force: true });
    })();
    return stopped;
  };

  const deadline = Date.now() + (options.startTimeoutMs ?? 180_000);
  let version = '';
  for (;;) {
    if (exited) {
      await stop();
      throw new Error(`phoenix serve exited during start-up:\n${log.slice(-1500)}`);
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`phoenix serve did not answer /healthz in time:\n${log.slice(-1500)}`);
    }
    try {
      const res = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.ok) {
        version = res.headers.get('x-phoenix-server-version') ?? '';
        break;
      }
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 300));
  }
  try {
    const res = await fetch(`${base}/v1/system/api_keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminSecret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ data: { name: 'touchstone-interop' } }),
    });
    const body = (await res.json()) as { data?: { key?: string } };
    if (res.status !== 201 || typeof body.data?.key !== 'string') {
      throw new Error(`creating a system API key answered ${res.status}`);
    }
    return { base, python, version, apiKey: body.data.key, adminSecret, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Makes the fixture traces (make_traces.py make) in `project`. */
export async function makeTraces(server: PhoenixServer, project: string): Promise<FixtureTraces> {
  const out = await runPython(
    server.python,
    [join(HERE, 'make_traces.py'), 'make', server.base, project],
    { env: { PHOENIX_API_KEY: server.apiKey } },
  );
  const last = out.trim().split('\n').at(-1) ?? '';
  return JSON.parse(last) as FixtureTraces;
}

/** Sends the open trace's root span (make_traces.py close). */
export async function closeOpenTrace(
  server: PhoenixServer,
  project: string,
  open: OpenTrace,
): Promise<void> {
  await runPython(
    server.python,
    [
      join(HERE, 'make_traces.py'),
      'close',
      server.base,
      project,
      open.trace_id,
      open.span_id,
      open.start_ns,
    ],
    { env: { PHOENIX_API_KEY: server.apiKey } },
  );
}

/** GET on Phoenix's REST API with the test's API key; the parsed JSON body. */
export async function phoenixGet(
  server: PhoenixServer,
  path: string,
  query: [string, string][] = [],
): Promise<{ status: number; json: unknown }> {
  const search = new URLSearchParams(query).toString();
  const res = await fetch(`${server.base}${path}${search === '' ? '' : `?${search}`}`, {
    headers: { authorization: `Bearer ${server.apiKey}` },
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: res.status, json };
}

export interface PhoenixAnnotation {
  id: string;
  name: string;
  annotator_kind: string;
  result: { label: string | null; score: number | null; explanation: string | null };
  metadata: Record<string, unknown>;
  identifier: string;
  source: string;
  trace_id?: string;
  span_id?: string;
}

/** A trace's annotations, as Phoenix's REST API lists them. */
export async function traceAnnotations(
  server: PhoenixServer,
  project: string,
  traceId: string,
): Promise<PhoenixAnnotation[]> {
  const { status, json } = await phoenixGet(
    server,
    `/v1/projects/${encodeURIComponent(project)}/trace_annotations`,
    [
      ['trace_ids', traceId],
      ['limit', '1000'],
    ],
  );
  if (status !== 200) throw new Error(`trace_annotations answered ${status}`);
  return (json as { data: PhoenixAnnotation[] }).data;
}

const READ_SPAN_ANNOTATIONS = `
import json, sys
from phoenix.client import Client
client = Client(base_url=sys.argv[1], api_key=sys.argv[2])
rows = client.spans.get_span_annotations(span_ids=sys.argv[4:], project_identifier=sys.argv[3])
print(json.dumps([
    {"id": a["id"], "span_id": a["span_id"], "name": a["name"],
     "annotator_kind": a["annotator_kind"], "result": a["result"],
     "metadata": a["metadata"], "identifier": a["identifier"], "source": a["source"]}
    for a in rows
]))
`;

/** Span annotations as Phoenix's own Python client (arize-phoenix-client) reads them. */
export async function spanAnnotationsViaPython(
  server: PhoenixServer,
  project: string,
  spanIds: string[],
): Promise<PhoenixAnnotation[]> {
  const out = await runPython(server.python, [
    '-c',
    READ_SPAN_ANNOTATIONS,
    server.base,
    server.apiKey,
    project,
    ...spanIds,
  ]);
  return JSON.parse(out.trim().split('\n').at(-1) ?? '[]') as PhoenixAnnotation[];
}

/** Polls `probe` until it returns a value (not undefined), or fails after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
