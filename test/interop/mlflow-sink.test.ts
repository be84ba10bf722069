import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentTrace, protobufBody, recordSpans } from '../support/otel.js';
import {
  callJson,
  eventually,
  freePort,
  type ServerProcess,
  startServer,
} from '../support/process.js';
import {
  assessmentsViaPython,
  MLFLOW_PYTHON,
  MLFLOW_SKIP_REASON,
  type MlflowServer,
  startMlflowServer,
} from './mlflow/mlflow-server.js';

/**
 * The `trace_feedback` sink against a real MLflow 3.x server: one agent trace exported over OTLP
 * to both MLflow (its OTLP endpoint, into an experiment) and `touchstone serve`; the policy's
 * scores land on the MLflow trace `tr-<trace id>` as assessments, read back with MLflow's own
 * Python client. Needs TOUCHSTONE_INTEROP_MLFLOW_PYTHON; skipped without it.
 */

if (MLFLOW_PYTHON === undefined) {
  describe('trace_feedback sink against a live MLflow server', () => {
    it.skip(`skipped: ${MLFLOW_SKIP_REASON}`, () => {});
  });
}

const EXPERIMENT = 'touchstone-sink';
const POLICY = 'agent-health';

describe.skipIf(MLFLOW_PYTHON === undefined)(
  'trace_feedback sink against a live MLflow server',
  () => {
    let mlflow: MlflowServer | undefined;
    let touchstone: ServerProcess | undefined;
    let dir = '';
    let base = '';

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'touchstone-mlflow-sink-'));
      const port = await freePort();
      base = `http://127.0.0.1:${port}`;
      writeFileSync(
        join(dir, 'config.yaml'),
        [
          'log_level: warn',
          'online:',
          '  poll_interval: 100ms',
          'traces:',
          '  completion_grace: 1s',
          'sources:',
          "  allow_hosts: ['127.0.0.1']",
          '',
        ].join('\n'),
      );
      const [m, t] = await Promise.allSettled([
        startMlflowServer(MLFLOW_PYTHON as string),
        startServer([
          '--data-dir',
          join(dir, 'data'),
          '--listen',
          `127.0.0.1:${port}`,
          '--config',
          join(dir, 'config.yaml'),
        ]),
      ]);
      if (m.status === 'fulfilled') mlflow = m.value;
      if (t.status === 'fulfilled') touchstone = t.value;
      if (m.status === 'rejected') throw m.reason;
      if (t.status === 'rejected') throw t.reason;
    }, 240_000);

    afterAll(async () => {
      const proc = touchstone?.proc;
      if (proc !== undefined && proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGTERM');
        await touchstone?.exited;
      }
      await mlflow?.stop();
      if (dir !== '') rmSync(dir, { recursive: true, force: true });
    }, 60_000);

    it("writes a pushed trace's scores onto the same trace in MLflow", async () => {
      const server = mlflow as MlflowServer;
      const created = await callJson(server.base, 'POST', '/api/2.0/mlflow/experiments/create', {
        name: EXPERIMENT,
      });
      await callJson(base, 'POST', '/v1alpha1/policies', {
        apiVersion: 'touchstone.dev/v1alpha1',
        kind: 'OnlineEvalPolicy',
        metadata: { name: POLICY },
        spec: {
          stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
          sinks: [
            {
              type: 'trace_feedback',
              connector: 'mlflow',
              endpoint: server.base,
              locations: [EXPERIMENT],
            },
          ],
        },
      });
      let traceId = '';
      const spans = recordSpans({ 'service.name': 'agent' }, (tracer) => {
        traceId = agentTrace(tracer, { fail: true });
      });
      const body = protobufBody(spans);
      // The agent exports to both: MLflow's OTLP endpoint (into the experiment) and Touchstone.
      for (const [url, headers] of [
        [`${server.base}/v1/traces`, { 'x-mlflow-experiment-id': String(created.experiment_id) }],
        [`${base}/v1/traces`, {}],
      ] as const) {
        const res = await fetch(url, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/x-protobuf', ...headers },
        });
        expect(res.status).toBe(200);
      }
      const assessments = await eventually(async () => {
        const found = await assessmentsViaPython(server, `tr-${traceId}`).catch(() => []);
        return found.length > 0 ? found : undefined;
      }, 60_000);
      expect(assessments).toEqual([
        expect.objectContaining({
          name: 'tool-errors',
          value: 1,
          source_type: 'CODE',
          source_id: `touchstone/${POLICY}`,
          valid: true,
        }),
      ]);
    }, 180_000);
  },
);
