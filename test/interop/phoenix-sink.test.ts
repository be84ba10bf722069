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
  PHOENIX_PYTHON,
  PHOENIX_SKIP_REASON,
  type PhoenixServer,
  startPhoenixServer,
  traceAnnotations,
} from './phoenix/phoenix-server.js';

/**
 * The `trace_feedback` sink against a real Phoenix server: one agent trace exported over OTLP to
 * both Phoenix (its OTLP endpoint, into a project) and `touchstone serve`; the policy's scores
 * land on the Phoenix trace with the same OpenTelemetry trace id as trace annotations, read back
 * through Phoenix's REST API. Needs TOUCHSTONE_INTEROP_PHOENIX_PYTHON; skipped without it.
 */

if (PHOENIX_PYTHON === undefined) {
  describe('trace_feedback sink against a live Phoenix server', () => {
    it.skip(`skipped: ${PHOENIX_SKIP_REASON}`, () => {});
  });
}

const PROJECT = 'touchstone-sink';
const POLICY = 'agent-health';
const KEY_VAR = 'PHOENIX_SINK_API_KEY';

describe.skipIf(PHOENIX_PYTHON === undefined)(
  'trace_feedback sink against a live Phoenix server',
  () => {
    let phoenix: PhoenixServer | undefined;
    let touchstone: ServerProcess | undefined;
    let dir = '';
    let base = '';

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'touchstone-phoenix-sink-'));
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
          'credentials:',
          '  grants:',
          `    - {env: ${KEY_VAR}, projects: [default], hosts: ['127.0.0.1']}`,
          '',
        ].join('\n'),
      );
      phoenix = await startPhoenixServer(PHOENIX_PYTHON as string);
      touchstone = await startServer(
        [
          '--data-dir',
          join(dir, 'data'),
          '--listen',
          `127.0.0.1:${port}`,
          '--config',
          join(dir, 'config.yaml'),
        ],
        { [KEY_VAR]: phoenix.apiKey },
      );
    }, 240_000);

    afterAll(async () => {
      const proc = touchstone?.proc;
      if (proc !== undefined && proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGTERM');
        await touchstone?.exited;
      }
      await phoenix?.stop();
      if (dir !== '') rmSync(dir, { recursive: true, force: true });
    }, 60_000);

    it("writes a pushed trace's scores onto the same trace in Phoenix", async () => {
      const server = phoenix as PhoenixServer;
      await callJson(base, 'POST', '/v1alpha1/policies', {
        apiVersion: 'touchstone.dev/v1alpha1',
        kind: 'OnlineEvalPolicy',
        metadata: { name: POLICY },
        spec: {
          stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
          sinks: [
            {
              type: 'trace_feedback',
              connector: 'phoenix',
              endpoint: server.base,
              locations: [PROJECT],
              credentials: { env: KEY_VAR },
            },
          ],
        },
      });
      let traceId = '';
      const resource = { 'service.name': 'agent', 'openinference.project.name': PROJECT };
      const spans = recordSpans(resource, (tracer) => {
        traceId = agentTrace(tracer, { fail: true });
      });
      const body = protobufBody(spans);
      // The agent exports to both: Phoenix's OTLP endpoint (into the project) and Touchstone.
      for (const [url, headers] of [
        [`${server.base}/v1/traces`, { authorization: `Bearer ${server.apiKey}` }],
        [`${base}/v1/traces`, {}],
      ] as const) {
        const res = await fetch(url, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/x-protobuf', ...headers },
        });
        expect(res.status).toBe(200);
      }
      const annotations = await eventually(async () => {
        const found = await traceAnnotations(server, PROJECT, traceId).catch(() => []);
        return found.length > 0 ? found : undefined;
      }, 60_000);
      expect(annotations).toEqual([
        expect.objectContaining({
          name: 'tool-errors',
          annotator_kind: 'CODE',
          result: expect.objectContaining({ score: 1 }),
        }),
      ]);
    }, 180_000);
  },
);
