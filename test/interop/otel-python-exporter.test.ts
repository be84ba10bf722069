import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { completedTrace, type IngestServer, startIngestServer } from '../support/process.js';

/**
 * The real OpenTelemetry Python SDK and OTLP/HTTP exporter against a real server process, set up
 * only through the standard OTEL_* variables. Needs TOUCHSTONE_INTEROP_PYTHON: the interpreter of
 * a venv with test/interop/python/requirements.txt (.ci/run makes it).
 */
const PYTHON = process.env.TOUCHSTONE_INTEROP_PYTHON;

describe.skipIf(PYTHON === undefined || PYTHON === '')(
  'OpenTelemetry Python exporter → touchstone serve',
  () => {
    let server: IngestServer;
    beforeAll(async () => {
      server = await startIngestServer('py');
    });
    afterAll(() => server?.stop());

    const exportTrace = (key: string) =>
      spawnSync(PYTHON as string, ['test/interop/python/export_trace.py'], {
        encoding: 'utf8',
        timeout: 60_000,
        env: {
          ...process.env,
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${server.base}/v1/traces`,
          OTEL_EXPORTER_OTLP_HEADERS: `Authorization=Bearer%20${key}`,
          OTEL_SERVICE_NAME: 'py-agent',
        },
      });

    it('stores the trace and completes it with its trajectory, labels and tool error', async () => {
      const run = exportTrace(server.ingestKey);
      expect(run.status, run.stderr).toBe(0);
      const got = await completedTrace(server, run.stdout.trim());
      expect(got.trace).toMatchObject({
        service: 'py-agent',
        error: true,
        labels: { workflow: 'weather' },
      });
      expect(got.record.trajectory.find((s) => s.type === 'tool')).toMatchObject({
        name: 'get_weather',
        error: 'weather service timed out',
      });
    });

    it('a key that may not ingest makes the exporter report failure', () => {
      expect(exportTrace(server.viewerKey).status).toBe(1);
    });
  },
);
