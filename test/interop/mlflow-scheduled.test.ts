import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callJson } from '../support/process.js';
import {
  MLFLOW_PYTHON,
  MLFLOW_SKIP_REASON,
  type MlflowServer,
  makeTraces,
  startMlflowServer,
} from './mlflow/mlflow-server.js';
import { startTouchstone, type Touchstone, windowRunWith } from './touchstone-server.js';

/**
 * A scheduled source against a real MLflow 3.x server: `touchstone serve` evaluates the traces
 * the MLflow SDK made (make_traces.py) as a batch run of the window they fall in, the run
 * finishes with its summaries, and the source's status names it. Needs
 * TOUCHSTONE_INTEROP_MLFLOW_PYTHON; skipped without it.
 */

const live = MLFLOW_PYTHON !== undefined;
const EXPERIMENT = 'touchstone-scheduled';

describe('scheduled source against a live MLflow server', () => {
  let mlflow: MlflowServer | undefined;
  let touchstone: Touchstone | undefined;
  let base = '';

  beforeAll(async () => {
    if (!live) return;
    const [m, t] = await Promise.allSettled([
      startMlflowServer(MLFLOW_PYTHON as string),
      startTouchstone(["sources: {allow_hosts: ['127.0.0.1']}"]),
    ]);
    if (m.status === 'fulfilled') mlflow = m.value;
    if (t.status === 'fulfilled') touchstone = t.value;
    if (m.status === 'rejected') throw m.reason;
    if (t.status === 'rejected') throw t.reason;
    base = touchstone?.base ?? '';
  }, 240_000);
  afterAll(async () => {
    await touchstone?.stop();
    await mlflow?.stop();
  }, 60_000);

  it.skipIf(!live)(
    'evaluates the window the traces fall in as a batch run',
    async () => {
      const server = mlflow as MlflowServer;
      // Windows end every minute and reach five minutes back: the first window ending after the
      // traces are made holds them all, however long making them takes (under five minutes).
      const traces = await makeTraces(server, EXPERIMENT);
      await callJson(base, 'POST', '/v1alpha1/sources', {
        apiVersion: 'touchstone.dev/v1alpha1',
        kind: 'TraceSource',
        metadata: { name: 'mlflow-windows' },
        spec: {
          connector: 'mlflow',
          endpoint: server.base,
          locations: [EXPERIMENT],
          // The fixture's running trace is evaluated as it is rather than holding the window.
          maxInProgressAge: '1s',
          schedule: { cron: '* * * * *', window: '5m' },
          runSpec: {
            evaluators: [{ ref: 'tool-errors' }, { ref: 'step-budget', params: { maxSteps: 10 } }],
          },
        },
      });
      const wanted = [traces.agent, ...traces.questions].map((id) => id.replace(/^tr-/, ''));
      const run = await windowRunWith(base, wanted);
      expect(run.labels['touchstone.dev/source']).toBe('mlflow-windows');
      const agent = run.spec.dataset.records.find((r) => r.id === wanted[0]);
      expect(agent?.trajectory?.length).toBeGreaterThan(0);
      expect(run.summaries?.map((s) => s.metric)).toEqual(
        expect.arrayContaining(['tool-errors', 'step-budget.steps']),
      );
      const source = await callJson(base, 'GET', '/v1alpha1/sources/mlflow-windows');
      expect(source.status.lastScheduledAt).toBeDefined();
      expect(source.status.missedWindows).toBe(0);
    },
    300_000,
  );

  it.skipIf(live)(`skipped: ${MLFLOW_SKIP_REASON}`, () => {});
});
