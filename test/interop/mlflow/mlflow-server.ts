import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../support/process.js';
import { killGroup, runPython } from '../../support/python.js';

/**
 * A real MLflow tracking server for interop tests, run from the venv that
 * TOUCHSTONE_INTEROP_MLFLOW_PYTHON points at (test/interop/mlflow/requirements.txt; .ci/run
 * makes it). It binds 127.0.0.1 only, keeps its SQLite database and artifacts in a temp dir, and
 * stops by itself: serve.py stops the server's process group when our stdin pipe closes (this
 * process ended or died) or after `maxSeconds`; `stop()` also kills the group directly.
 */

export const MLFLOW_PYTHON = process.env.TOUCHSTONE_INTEROP_MLFLOW_PYTHON || undefined;

export const MLFLOW_SKIP_REASON =
  'TOUCHSTONE_INTEROP_MLFLOW_PYTHON is not set (the python of a venv with ' +
  'test/interop/mlflow/requirements.txt; see test/interop/mlflow/README.md)';

const HERE = join(process.cwd(), 'test', 'interop', 'mlflow');

export interface MlflowServer {
  base: string;
  python: string;
  workDir: string;
  /** `mlflow.__version__` of the venv. */
  version: string;
  stop(): Promise<void>;
}

export interface FixtureTraces {
  experiment_id: string;
  agent: string;
  questions: string[];
  artifact_only: string;
  no_spans: string;
  running: string;
}

export async function startMlflowServer(
  python: string,
  options: { maxSeconds?: number; startTimeoutMs?: number } = {},
): Promise<MlflowServer> {
  const workDir = mkdtempSync(join(tmpdir(), 'touchstone-mlflow-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const launcher: ChildProcess = spawn(
    python,
    [join(HERE, 'serve.py'), String(port), workDir, String(options.maxSeconds ?? 1800)],
    { cwd: workDir, detached: true, stdio: ['pipe', 'pipe', 'pipe'] },
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
  for (;;) {
    if (exited) {
      await stop();
      throw new Error(`mlflow server exited during start-up:\n${log.slice(-1500)}`);
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`mlflow server did not answer /health in time:\n${log.slice(-1500)}`);
    }
    try {
      const res = await fetch(`${base}/health`, { signal: AbortSignal.timeout(2000) });
      const text = await res.text();
      if (res.ok && text.trim() === 'OK') break;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 300));
  }
  const version = (await (await fetch(`${base}/version`)).text()).trim();
  return { base, python, workDir, version, stop };
}

/** Creates the experiment and the fixture traces (make_traces.py) on the server. */
export async function makeTraces(server: MlflowServer, experiment: string): Promise<FixtureTraces> {
  const out = await runPython(server.python, [
    join(HERE, 'make_traces.py'),
    server.base,
    experiment,
  ]);
  const last = out.trim().split('\n').at(-1) ?? '';
  return JSON.parse(last) as FixtureTraces;
}

/**
 * Logs one agent trace with MLflow's tracing library (sdk_trace.py): its MLflow id, and its spans
 * as one OTLP/JSON export request under the OpenTelemetry trace id `otelTraceId`.
 */
export async function logSdkTrace(
  server: MlflowServer,
  experiment: string,
  otelTraceId: string,
): Promise<{ mlflowTraceId: string; otlp: unknown }> {
  const out = await runPython(server.python, [
    join(HERE, 'sdk_trace.py'),
    server.base,
    experiment,
    otelTraceId,
  ]);
  return JSON.parse(out.trim().split('\n').at(-1) ?? '') as {
    mlflowTraceId: string;
    otlp: unknown;
  };
}

export interface PyAssessment {
  id: string;
  name: string;
  value: unknown;
  source_type: string;
  source_id: string;
  rationale: string | null;
  valid: boolean;
}

const READ_ASSESSMENTS = `
import json, sys, mlflow
mlflow.set_tracking_uri(sys.argv[1])
trace = mlflow.get_trace(sys.argv[2])
print(json.dumps([
    {"id": a.assessment_id, "name": a.name, "value": a.value,
     "source_type": a.source.source_type, "source_id": a.source.source_id,
     "rationale": a.rationale, "valid": a.valid}
    for a in trace.info.assessments
]))
`;

/** A trace's assessments as MLflow's own Python client reads them. */
export async function assessmentsViaPython(
  server: MlflowServer,
  traceId: string,
): Promise<PyAssessment[]> {
  const out = await runPython(server.python, ['-c', READ_ASSESSMENTS, server.base, traceId]);
  return JSON.parse(out.trim().split('\n').at(-1) ?? '[]') as PyAssessment[];
}
