/**
 * Peer figure for the ingest benchmark: the same OTLP/HTTP protobuf bodies posted to Arize Phoenix
 * (`phoenix serve`, its own SQLite in a fresh temp dir), timed until Phoenix has STORED every span.
 *
 * Phoenix answers `POST /v1/traces` before inserting: the request only queues the spans for its
 * bulk inserter. So the clock runs until Phoenix's GraphQL API reports a span count (summed over
 * all projects) equal to the number of spans sent; the rate at the last acknowledgement is
 * reported too (`ackSpansPerSecond`).
 *
 * The Python side is the interop tests' Phoenix venv (TOUCHSTONE_INTEROP_PHOENIX_PYTHON, the same
 * pin) when set, else a cached venv that bench/peers/venv.sh makes with PHOENIX_REQUIREMENT. Skipped, with a reason, when TOUCHSTONE_BENCH_PHOENIX=0 or when the venv or the
 * server cannot be made to work here.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PHOENIX_PYTHON } from '../../test/interop/phoenix/phoenix-server.js';
import { percentile } from '../stats.js';
import { type IngestFigures, postBodies, type SliceOptions, sleep } from './post.js';

export type PhoenixIngestResult =
  | (IngestFigures & {
      version: string;
      /** Spans/s counted up to the last HTTP acknowledgement (before Phoenix stored them). */
      ackSpansPerSecond: number;
      ackSeconds: number;
    })
  | { skipped: string };

const HERE = dirname(fileURLToPath(import.meta.url));
const VENV_SCRIPT = join(HERE, 'venv.sh');
const PHOENIX_REQUIREMENT = 'arize-phoenix==20.26.1';
const VENV_TIMEOUT_MS = 20 * 60_000;
const START_TIMEOUT_MS = 180_000;
const STORE_TIMEOUT_MS = 10 * 60_000;
/**
 * Store-check interval: 1% of the time elapsed so far, between 100 ms and 2 s. Each check is a
 * COUNT over Phoenix's span table on the same server, so polling flat out would slow the inserts
 * being measured; this keeps the overshoot in the stored time to about 1%.
 */
const POLL_MIN_MS = 100;
const POLL_MAX_MS = 2000;

/**
 * Runs `phoenix serve` in-process with gRPC switched off: Phoenix binds its OTLP/gRPC listener
 * to [::] (every interface) with no setting to change that, and the benchmark only uses OTLP/HTTP.
 * PHOENIX_GRPC_PORT still points at a free port in case the patch stops applying.
 */
const LAUNCHER = `
import sys
import phoenix.server.grpc_server as grpc_server

async def _grpc_disabled(self):
    return None

grpc_server.GrpcServer.__aenter__ = _grpc_disabled
from phoenix.server.main import main
sys.argv = ["phoenix", "serve"]
sys.exit(main())
`;

export async function phoenixIngest(
  bodies: Buffer[],
  options: SliceOptions,
): Promise<PhoenixIngestResult> {
  if (process.env.TOUCHSTONE_BENCH_PHOENIX === '0') {
    return { skipped: 'disabled by TOUCHSTONE_BENCH_PHOENIX=0' };
  }
  const python = PHOENIX_PYTHON
    ? { path: PHOENIX_PYTHON }
    : await venvPython('phoenix', PHOENIX_REQUIREMENT);
  if ('skipped' in python) return python;

  const spans = bodies.reduce((n, b) => n + countSpans(b), 0);
  const workDir = mkdtempSync(join(tmpdir(), 'touchstone-bench-phoenix-'));
  let server: PhoenixServer | undefined;
  try {
    server = await startPhoenix(python.path, workDir);
    if ('skipped' in server) return server;
    const base = server.base;
    const version = await fetch(`${base}/arize_phoenix_version`)
      .then(async (res) => (res.ok ? (await res.text()).trim() : 'unknown'))
      .catch(() => 'unknown');
    if (options.warmUp !== undefined) {
      await postBodies(`${base}/v1/traces`, [options.warmUp], { inFlight: 1 });
      const warmSpans = countSpans(options.warmUp);
      const until = performance.now() + STORE_TIMEOUT_MS;
      while ((await storedSpans(base)) < warmSpans && performance.now() < until) await sleep(250);
    }
    const before = await storedSpans(base);

    const t0 = performance.now();
    const posted = await postBodies(`${base}/v1/traces`, bodies, options);
    const ackSeconds = posted.seconds;

    const target = before + spans;
    let stored = before;
    const deadline = performance.now() + STORE_TIMEOUT_MS;
    while (stored < target) {
      if (performance.now() > deadline) {
        return {
          skipped: `Phoenix stored ${stored - before} of ${spans} spans within ${STORE_TIMEOUT_MS / 60_000} min`,
        };
      }
      if (server.exited()) return { skipped: `Phoenix exited while storing: ${server.logTail()}` };
      const elapsed = performance.now() - t0;
      await sleep(Math.min(POLL_MAX_MS, Math.max(POLL_MIN_MS, elapsed / 100)));
      stored = await storedSpans(base);
    }
    const seconds = (performance.now() - t0) / 1000;
    return {
      spans,
      stored: stored - before,
      seconds,
      spansPerSecond: (stored - before) / seconds,
      p95Ms: percentile(posted.latencies, 95),
      retries: posted.retries,
      version,
      ackSpansPerSecond: spans / ackSeconds,
      ackSeconds,
    };
  } catch (err) {
    const tail = server !== undefined && !('skipped' in server) ? ` (${server.logTail()})` : '';
    return { skipped: `Phoenix run failed: ${(err as Error).message}${tail}` };
  } finally {
    if (server !== undefined && !('skipped' in server)) await server.stop();
    rmSync(workDir, { recursive: true, force: true });
  }
}

/** The python of a cached venv with one pinned requirement (bench/peers/venv.sh makes or reuses it). */
export async function venvPython(
  name: string,
  requirement: string,
): Promise<{ path: string } | { skipped: string }> {
  try {
    const out = await run('bash', [VENV_SCRIPT, name, requirement], VENV_TIMEOUT_MS);
    const last = out.trim().split('\n').at(-1)?.trim() ?? '';
    if (last === '') return { skipped: `venv.sh printed no python path for ${requirement}` };
    return { path: last };
  } catch (err) {
    return { skipped: `venv.sh ${requirement} failed: ${(err as Error).message.slice(-500)}` };
  }
}

type PhoenixServer =
  | { base: string; stop: () => Promise<void>; exited: () => boolean; logTail: () => string }
  | { skipped: string };

async function startPhoenix(python: string, workDir: string): Promise<PhoenixServer> {
  const [port, grpcPort] = await freePorts(2);
  const env: NodeJS.ProcessEnv = {};
  // Nothing from the caller's Phoenix settings (e.g. a PostgreSQL URL) may leak in.
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PHOENIX_')) env[k] = v;
  Object.assign(env, {
    PHOENIX_HOST: '127.0.0.1',
    PHOENIX_PORT: String(port),
    PHOENIX_GRPC_PORT: String(grpcPort),
    PHOENIX_WORKING_DIR: workDir,
    PHOENIX_TELEMETRY_ENABLED: 'false',
    PHOENIX_ALLOW_EXTERNAL_RESOURCES: 'false',
    PHOENIX_LOGGING_LEVEL: 'warning',
    PHOENIX_DB_LOGGING_LEVEL: 'warning',
    PHOENIX_LOG_MIGRATIONS: 'false',
    PYTHONUNBUFFERED: '1',
  });
  // Own process group, so stopping it reaches every child (uvicorn workers, migrations).
  const child = spawn(python, ['-c', LAUNCHER], {
    cwd: workDir,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  const keep = (chunk: Buffer): void => {
    log = (log + chunk.toString('utf8')).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exited = false;
  const exitedPromise = new Promise<void>((resolve) => {
    child.once('exit', () => {
      exited = true;
      resolve();
    });
    child.once('error', (err) => {
      keep(Buffer.from(String(err)));
      exited = true;
      resolve();
    });
  });
  // Last resort if the benchmark process dies without running the finally block.
  const onExit = (): void => killGroup(child, 'SIGKILL');
  process.once('exit', onExit);

  const stop = async (): Promise<void> => {
    process.removeListener('exit', onExit);
    if (!exited) {
      killGroup(child, 'SIGTERM');
      const timer = setTimeout(() => killGroup(child, 'SIGKILL'), 10_000);
      await exitedPromise;
      clearTimeout(timer);
    }
    // Children that outlived the main process (same group).
    killGroup(child, 'SIGKILL');
  };
  const logTail = (): string => log.trim().split('\n').slice(-8).join(' | ').slice(-1000);

  const base = `http://127.0.0.1:${port}`;
  const deadline = performance.now() + START_TIMEOUT_MS;
  for (;;) {
    if (exited) {
      await stop();
      return { skipped: `phoenix serve exited during start-up: ${logTail()}` };
    }
    if (performance.now() > deadline) {
      await stop();
      return { skipped: `phoenix serve did not answer within ${START_TIMEOUT_MS / 1000} s` };
    }
    try {
      const res = await fetch(`${base}/healthz`);
      await res.arrayBuffer();
      if (res.ok) {
        // GraphQL must answer too (the store check depends on it).
        await storedSpans(base);
        break;
      }
    } catch {
      // not listening yet
    }
    await sleep(250);
  }
  return { base, stop, exited: () => exited, logTail };
}

/** Spans Phoenix has stored, over all projects. */
async function storedSpans(base: string): Promise<number> {
  const res = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: '{ projects { edges { node { name recordCount } } } }' }),
  });
  const json = (await res.json()) as {
    data?: { projects?: { edges?: { node: { recordCount: number } }[] } };
    errors?: { message: string }[];
  };
  const edges = json.data?.projects?.edges;
  if (!res.ok || edges === undefined) {
    throw new Error(
      `GraphQL span count failed (${res.status}): ${JSON.stringify(json.errors ?? json)}`,
    );
  }
  return edges.reduce((n, e) => n + e.node.recordCount, 0);
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

async function freePorts(n: number): Promise<number[]> {
  // Hold all listeners open together so the ports are distinct, then release them.
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const s = createServer();
          s.once('error', reject);
          s.listen(0, '127.0.0.1', () => resolve(s));
        }),
    ),
  );
  const ports = servers.map((s) => {
    const addr = s.address();
    if (addr === null || typeof addr === 'string') throw new Error('no port');
    return addr.port;
  });
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  return ports;
}

function run(cmd: string, args: string[], timeout = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      { timeout, maxBuffer: 16 * 1024 * 1024, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`${err.message}\n${String(stderr).slice(-1000)}`));
        else resolve(String(stdout));
      },
    );
  });
}

/** Spans in an OTLP ExportTraceServiceRequest (protobuf), by walking the wire format. */
export function countSpans(body: Uint8Array): number {
  let n = 0;
  // ExportTraceServiceRequest.resource_spans = 1
  for (const rs of lenFields(body, 1)) {
    // ResourceSpans.scope_spans = 2
    for (const ss of lenFields(rs, 2)) {
      // ScopeSpans.spans = 2
      for (const _ of lenFields(ss, 2)) n++;
    }
  }
  return n;
}

function* lenFields(buf: Uint8Array, field: number): Generator<Uint8Array> {
  let i = 0;
  const varint = (): number => {
    let v = 0;
    let mul = 1;
    for (;;) {
      if (i >= buf.length) throw new Error('truncated protobuf');
      const b = buf[i++] as number;
      v += (b & 0x7f) * mul;
      if (b < 0x80) return v;
      mul *= 128;
    }
  };
  while (i < buf.length) {
    const key = varint();
    const wire = key % 8;
    const num = Math.floor(key / 8);
    if (wire === 0) varint();
    else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else if (wire === 2) {
      const len = varint();
      if (num === field) yield buf.subarray(i, i + len);
      i += len;
    } else throw new Error(`unsupported protobuf wire type ${wire}`);
  }
}
