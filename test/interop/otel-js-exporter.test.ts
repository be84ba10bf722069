import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { OTLPTraceExporter as OtlpHttpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentTrace } from '../support/otel.js';
import { cli, eventually, freePort, type ServerProcess, startServer } from '../support/process.js';

/**
 * The real OpenTelemetry JS exporters (protobuf and JSON over HTTP) pointed at a real server
 * process, authenticating with an ingest key exactly as a user configures them.
 */
describe('OpenTelemetry JS exporters → touchstone serve', () => {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-interop-'));
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
        cli([
          'keys',
          'create',
          '--project',
          'agents',
          '--role',
          role,
          '--data-dir',
          data,
          '--json',
          '--label',
          'team=interop',
        ]).stdout,
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

  async function exportWith(exporter: SpanExporter, service: string): Promise<string> {
    const provider = new BasicTracerProvider({
      resource: resourceFromAttributes({
        'service.name': service,
        'touchstone.label.workflow': 'weather',
      }),
      spanProcessors: [new BatchSpanProcessor(exporter)],
    });
    const traceId = agentTrace(provider.getTracer('interop'), { fail: true });
    await provider.forceFlush();
    await provider.shutdown();
    return traceId;
  }

  for (const [kind, make] of [
    [
      'protobuf',
      () =>
        new OtlpProtoExporter({
          url: `${base}/v1/traces`,
          headers: { Authorization: `Bearer ${ingestKey}` },
        }),
    ],
    [
      'json',
      () =>
        new OtlpHttpJsonExporter({
          url: `${base}/v1/traces`,
          headers: { Authorization: `Bearer ${ingestKey}` },
        }),
    ],
  ] as const) {
    it(`stores and completes a trace sent by the ${kind} exporter`, async () => {
      const traceId = await exportWith(make(), `js-${kind}`);
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
        service: `js-${kind}`,
        error: true,
        labels: { workflow: 'weather', team: 'interop' },
      });
      const tool = got.record.trajectory.find((s) => s.type === 'tool');
      expect(tool).toMatchObject({ name: 'get_weather', error: 'weather service timed out' });

      const listed = cli(['traces', 'list', '--server', base, '--service', `js-${kind}`], {
        TOUCHSTONE_API_KEY: viewerKey,
      });
      expect(listed.code, listed.stderr).toBe(0);
      expect(listed.stdout).toContain(traceId);
      expect(listed.stdout).toMatch(/workflow=weather/);
    });
  }

  it('an exporter with a key that may not ingest is refused (403) and nothing is stored', async () => {
    const exporter = new OtlpProtoExporter({
      url: `${base}/v1/traces`,
      headers: { Authorization: `Bearer ${viewerKey}` },
    });
    const failure: unknown = await exportWith(exporter, 'js-forbidden').then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(inspect(failure)).toMatch(/code: 403/);
    await new Promise((r) => setTimeout(r, 500));
    const res = await fetch(`${base}/v1alpha1/traces?service=js-forbidden`, {
      headers: { authorization: `Bearer ${viewerKey}` },
    });
    expect(((await res.json()) as { traces: unknown[] }).traces).toEqual([]);
  });
});
