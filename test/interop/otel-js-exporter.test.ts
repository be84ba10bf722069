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
import { cli, completedTrace, type IngestServer, startIngestServer } from '../support/process.js';

/**
 * The real OpenTelemetry JS exporters (protobuf and JSON over HTTP) pointed at a real server
 * process, authenticating with an ingest key exactly as a user configures them.
 */
describe('OpenTelemetry JS exporters → touchstone serve', () => {
  let server: IngestServer;
  let base: string;
  let ingestKey: string;
  let viewerKey: string;
  beforeAll(async () => {
    server = await startIngestServer('agents', ['team=interop']);
    ({ base, ingestKey, viewerKey } = server);
  });
  afterAll(() => server?.stop());

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
      const got = await completedTrace(server, traceId);
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
