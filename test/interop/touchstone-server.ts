import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { agentTrace, protobufBody, recordSpans } from '../support/otel.js';
import { freePort, startServer } from '../support/process.js';

/**
 * A `touchstone serve` process for the live tests: its own data dir and config (the lines given,
 * after `log_level: warn`), stopped with SIGTERM and its directory removed by `stop`.
 */
export interface Touchstone {
  base: string;
  stop(): Promise<void>;
}

export async function startTouchstone(
  config: string[],
  env: Record<string, string> = {},
): Promise<Touchstone> {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-live-'));
  writeFileSync(join(dir, 'config.yaml'), ['log_level: warn', ...config, ''].join('\n'));
  const port = await freePort();
  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    server = await startServer(
      [
        '--data-dir',
        join(dir, 'data'),
        '--listen',
        `127.0.0.1:${port}`,
        '--config',
        join(dir, 'config.yaml'),
      ],
      env,
    );
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    base: `http://127.0.0.1:${port}`,
    async stop() {
      const { proc } = server;
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGTERM');
        await server.exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * One agent trace (a failing tool call) exported over OTLP/protobuf to a store's OTLP endpoint and
 * to Touchstone, as an agent with two exporters does; returns its trace id.
 */
export async function exportToBoth(
  store: { url: string; headers: Record<string, string> },
  touchstone: string,
  resource: Record<string, string> = {},
): Promise<string> {
  let traceId = '';
  const spans = recordSpans({ 'service.name': 'agent', ...resource }, (tracer) => {
    traceId = agentTrace(tracer, { fail: true });
  });
  const body = protobufBody(spans);
  for (const [url, headers] of [
    [store.url, store.headers],
    [`${touchstone}/v1/traces`, {}],
  ] as const) {
    const res = await fetch(url, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/x-protobuf', ...headers },
    });
    expect(res.status).toBe(200);
  }
  return traceId;
}
