import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, eventually, freePort, type ServerProcess, startServer } from '../support/process.js';

/**
 * The real OpenTelemetry Python SDK and OTLP/HTTP exporter against a real server process, set up
 * only through the standard OTEL_* variables. Needs TOUCHSTONE_INTEROP_PYTHON: the interpreter of
 * a venv with test/interop/python/requirements.txt (.ci/run makes it).
 */
const PYTHON = process.env.TOUCHSTONE_INTEROP_PYTHON;

describe.skipIf(PYTHON === undefined || PYTHON === '')(
  'OpenTelemetry Python exporter → touchstone serve',
  () => {
    const dir = mkdtempSync(join(tmpdir(), 'touchstone-pyinterop-'));
    let base: string;
    let server: ServerProcess;
    let ingestKey: string;
    let viewerKey: string;

    beforeAll(async () => {
      const port = await freePort();
      base = `http://127.0.0.1:${port}`;
      writeFileSync(join(dir, 'config.yaml'), 'auth: {}\ntraces:\n  completion_grace: 200ms\n');
      const data = join(dir, 'data');
      const key = (role: string) =>
        JSON.parse(
          cli(['keys', 'create', '--project', 'py', '--role', role, '--data-dir', data, '--json'])
            .stdout,
        ).secret as string;
      ingestKey = key('ingest');
      viewerKey = key('viewer');
      server = await startServer([
        '--data-dir',
        data,
        '--listen',
        `127.0.0.1:${port}`,
        '--config',
        join(dir, 'config.yaml'),
      ]);
    });
    afterAll(() => {
      server?.proc.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    });

    const exportTrace = (key: string) =>
      spawnSync(PYTHON as string, ['test/interop/python/export_trace.py'], {
        encoding: 'utf8',
        timeout: 60_000,
        env: {
          ...process.env,
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${base}/v1/traces`,
          OTEL_EXPORTER_OTLP_HEADERS: `Authorization=Bearer%20${key}`,
          OTEL_SERVICE_NAME: 'py-agent',
        },
      });

    it('stores the trace and completes it with its trajectory, labels and tool error', async () => {
      const run = exportTrace(ingestKey);
      expect(run.status, run.stderr).toBe(0);
      const traceId = run.stdout.trim();
      const got = await eventually(async () => {
        const res = await fetch(`${base}/v1alpha1/traces/${traceId}`, {
          headers: { authorization: `Bearer ${viewerKey}` },
        });
        return res.status === 200
          ? ((await res.json()) as {
              trace: { service: string; labels: Record<string, string>; error: boolean };
              record: { trajectory: { type: string; name: string; error: string }[] };
            })
          : undefined;
      });
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
      const run = exportTrace(viewerKey);
      expect(run.status).toBe(1);
    });
  },
);
