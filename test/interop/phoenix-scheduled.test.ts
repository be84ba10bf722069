import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callJson } from '../support/process.js';
import {
  PHOENIX_PYTHON,
  PHOENIX_SKIP_REASON,
  type PhoenixServer,
  startPhoenixServer,
} from './phoenix/phoenix-server.js';
import {
  agentExport,
  startTouchstone,
  type Touchstone,
  windowRunWith,
} from './touchstone-server.js';

/**
 * A scheduled source against a real Phoenix server: agent traces exported over OTLP into a
 * Phoenix project are evaluated by `touchstone serve` as a batch run of the window they fall in,
 * through the Phoenix connector with its API key; the run finishes with its summaries and the
 * source's status names it. Needs TOUCHSTONE_INTEROP_PHOENIX_PYTHON; skipped without it.
 */

const live = PHOENIX_PYTHON !== undefined;
const PROJECT = 'touchstone-scheduled';
const KEY_VAR = 'PHOENIX_SCHEDULED_API_KEY';

describe('scheduled source against a live Phoenix server', () => {
  let phoenix: PhoenixServer | undefined;
  let touchstone: Touchstone | undefined;

  beforeAll(async () => {
    if (!live) return;
    phoenix = await startPhoenixServer(PHOENIX_PYTHON as string);
    touchstone = await startTouchstone(
      [
        "sources: {allow_hosts: ['127.0.0.1']}",
        `credentials: {grants: [{env: ${KEY_VAR}, projects: [default], hosts: ['127.0.0.1']}]}`,
      ],
      { [KEY_VAR]: phoenix.apiKey },
    );
  }, 240_000);
  afterAll(async () => {
    await touchstone?.stop();
    await phoenix?.stop();
  }, 60_000);

  it.skipIf(!live)(
    'evaluates the window the traces fall in as a batch run',
    async () => {
      const server = phoenix as PhoenixServer;
      const base = (touchstone as Touchstone).base;
      const wanted: string[] = [];
      for (let i = 0; i < 3; i++) {
        const trace = agentExport({ 'openinference.project.name': PROJECT });
        await trace.sendTo(`${server.base}/v1/traces`, {
          authorization: `Bearer ${server.apiKey}`,
        });
        wanted.push(trace.traceId);
      }
      // Windows end every minute and reach five minutes back: the first window ending after the
      // apply holds the traces just exported.
      await callJson(base, 'POST', '/v1alpha1/sources', {
        apiVersion: 'touchstone.dev/v1alpha1',
        kind: 'TraceSource',
        metadata: { name: 'phoenix-windows' },
        spec: {
          connector: 'phoenix',
          endpoint: server.base,
          locations: [PROJECT],
          credentials: { env: KEY_VAR },
          schedule: { cron: '* * * * *', window: '5m' },
          runSpec: { evaluators: [{ ref: 'tool-errors' }] },
        },
      });
      const run = await windowRunWith(base, wanted);
      expect(run.labels['touchstone.dev/source']).toBe('phoenix-windows');
      const first = run.spec.dataset.records.find((r) => r.id === wanted[0]);
      expect(first?.trajectory?.length).toBeGreaterThan(0);
      expect(run.summaries?.map((s) => s.metric)).toContain('tool-errors');
      const source = await callJson(base, 'GET', '/v1alpha1/sources/phoenix-windows');
      expect(source.status.missedWindows).toBe(0);
      expect(source.status.lastRunId).toBeDefined();
    },
    300_000,
  );

  it.skipIf(live)(`skipped: ${PHOENIX_SKIP_REASON}`, () => {});
});
