import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { agentTrace, protobufBody, recordSpans } from '../support/otel.js';
import { callJson, eventually, freePort, startServer } from '../support/process.js';

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

/** One agent trace (a failing tool call) as OTLP/protobuf, sent where and when a test says. */
export function agentExport(resource: Record<string, string> = {}): {
  traceId: string;
  sendTo(url: string, headers?: Record<string, string>): Promise<void>;
} {
  let traceId = '';
  const spans = recordSpans({ 'service.name': 'agent', ...resource }, (tracer) => {
    traceId = agentTrace(tracer, { fail: true });
  });
  const body = protobufBody(spans);
  return {
    traceId,
    async sendTo(url, headers = {}) {
      const res = await fetch(url, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/x-protobuf', ...headers },
      });
      expect(res.status).toBe(200);
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
  const trace = agentExport(resource);
  await trace.sendTo(store.url, store.headers);
  await trace.sendTo(`${touchstone}/v1/traces`);
  return trace.traceId;
}

/**
 * An agent trace sent to Touchstone alone and scored there (`tool-errors`), a few seconds ago: a
 * sink has tried to write its score to a store that does not hold it yet. The test sends it to
 * the store next, with `sendTo`.
 */
export async function scoredBeforeTheStoreHasIt(
  touchstone: string,
  resource: Record<string, string> = {},
): Promise<ReturnType<typeof agentExport>> {
  const trace = agentExport(resource);
  await trace.sendTo(`${touchstone}/v1/traces`);
  await eventually(async () => {
    const scores = await callJson(
      touchstone,
      'GET',
      `/v1alpha1/traces/${trace.traceId}/scores`,
    ).catch(() => undefined);
    return JSON.stringify(scores ?? {}).includes('tool-errors') ? true : undefined;
  }, 60_000);
  // The writer tries within a second of scoring.
  await new Promise((r) => setTimeout(r, 3_000));
  return trace;
}

/** A scheduled window's run as the API shows it. */
export interface WindowRunView {
  id: string;
  status: string;
  labels: Record<string, string>;
  summaries?: { metric: string }[];
  spec: { dataset: { records: { id: string; trajectory?: unknown[] }[] } };
}

/** Waits for a succeeded run whose dataset (a window's snapshot) holds every one of `traceIds`. */
export function windowRunWith(touchstone: string, traceIds: readonly string[]) {
  return eventually(async () => {
    const list = (await callJson(touchstone, 'GET', '/v1alpha1/runs')).runs as { id: string }[];
    for (const { id } of list) {
      const view = (await callJson(touchstone, 'GET', `/v1alpha1/runs/${id}`)) as WindowRunView;
      const ids = view.spec.dataset.records.map((r) => r.id);
      if (view.status === 'RUN_STATUS_SUCCEEDED' && traceIds.every((w) => ids.includes(w))) {
        return view;
      }
    }
    return undefined;
  }, 150_000);
}
