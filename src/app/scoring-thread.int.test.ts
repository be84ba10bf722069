import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { getPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { agentTrace, jsonBody, recordSpans } from '../../test/support/otel.js';
import { eventually, threadsOfThisProcess } from '../../test/support/process.js';
import { storeVariants } from '../../test/support/stores.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { loadConfig } from '../config/index.js';
import { systemClock } from '../core/index.js';
import { CompleterThread, normalizeStoredTrace, TraceCompleter } from '../ingest/index.js';
import { PolicyEngine } from '../policies/index.js';
import { openStore } from '../store/index.js';
import { Metrics } from '../telemetry/index.js';
import { WebhookOutbox } from '../webhooks/index.js';
import { TestReceiver } from '../webhooks/receiver.testkit.js';
import { type App, createApp } from './index.js';
import { ScoringThread } from './scoring-thread.js';

/**
 * Online scoring in its worker thread, end to end in a listening app (system clock): OTLP in,
 * completed on arrival, scored by the worker (its own store connection), the results and the
 * `trace.scored` delivery stored, delivered by the main thread's dispatcher, and the worker's
 * metrics forwarded to the main thread's /metrics.
 */
describe.each(storeVariants())('ScoringThread on $name', (variant) => {
  let hooks: TestReceiver;
  let app: App;
  let dataDir: string;
  let dispose: () => Promise<void>;

  beforeAll(async () => {
    hooks = await TestReceiver.start();
  });
  afterAll(async () => {
    await hooks.close();
  });
  /** The app, not listening yet, with the policy `weather` applied. */
  async function build(overrides: Record<string, unknown> = {}): Promise<void> {
    const store = await variant.open();
    dispose = store.dispose;
    const config = loadConfig({
      overrides: {
        data_dir: dataDir,
        listen: '127.0.0.1:0',
        log_level: 'silent',
        online: { worker: true },
        webhooks: { allow_hosts: ['127.0.0.1'] },
        ...store.overrides,
        ...overrides,
      },
    });
    app = await createApp(config, {
      env: {},
      processMetrics: false,
      logger: pino({ level: 'silent' }),
    });
    await app.policies.apply(OPEN_PRINCIPAL, {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name: 'weather' },
      spec: { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] },
    });
  }
  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'touchstone-scoring-'));
    hooks.received.length = 0;
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await app.close();
    await dispose();
    rmSync(dataDir, { recursive: true, force: true });
  });

  async function ingest(): Promise<string> {
    let traceId = '';
    const spans = recordSpans({ 'service.name': 'weather' }, (tr) => {
      traceId = agentTrace(tr, { fail: true });
    });
    const res = await app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: jsonBody(spans),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(200);
    return traceId;
  }

  async function resultsOf(traceId: string) {
    return eventually(async () => {
      const r = await app.server.inject({ url: `/v1alpha1/traces/${traceId}/scores` });
      const body = r.json() as { results?: Record<string, { outcome: string }[]> };
      return body.results?.weather;
    });
  }

  it('scores in the worker: results and the delivery stored, metrics forwarded, stopped with the app', async () => {
    await build();
    const hook = await app.webhooks.service.apply(OPEN_PRINCIPAL, {
      name: 'ops',
      url: hooks.url,
      events: ['trace.scored'],
    });
    hooks.secret = hook.secret ?? '';
    // The in-process engine is only the fallback: it must not be the one that scores here.
    const inProcess = vi.spyOn(app.engine, 'start');
    const ticked = vi.spyOn(app.engine, 'tick');
    await app.listen();
    const traceId = await ingest();
    expect(await resultsOf(traceId)).toEqual([
      expect.objectContaining({ evaluator: 'tool-errors', outcome: 'OUTCOME_SCORED' }),
    ]);
    const delivered = await eventually(async () =>
      hooks.received.find((r) => r.event === 'trace.scored'),
    );
    expect(delivered.verified).toBe(true);
    const lines = await eventually(async () => {
      const text = (await app.server.inject({ url: '/metrics' })).body.split('\n');
      const want = [
        'touchstone_policy_traces_scored_total{project="default",policy="weather"} 1',
        'touchstone_online_freshness_seconds_count 1',
      ];
      return want.every((w) => text.includes(w)) ? text : undefined;
    });
    expect(lines).toContain(
      'touchstone_policy_results_total{project="default",policy="weather",outcome="OUTCOME_SCORED"} 1',
    );
    expect(lines).toContain(
      'touchstone_policy_traces_selected_total{project="default",policy="weather"} 1',
    );
    expect(inProcess).not.toHaveBeenCalled();
    expect(ticked).not.toHaveBeenCalled();
    if (process.platform === 'linux') {
      // The worker yields to the thread answering requests: its own nice value, not the process's.
      expect(threadsOfThisProcess()).toContainEqual({ name: 'ts-scoring', nice: 10 });
      expect(getPriority()).toBe(0);
    }
    await app.close();
    // Stopped within the shutdown order: the store is closed and nothing fell back in-process.
    expect(inProcess).not.toHaveBeenCalled();
  });

  it('completes traces in the same worker: no completion worker, nothing in-process', async () => {
    // Not completed on arrival: the completion loop completes the trace once its grace passed.
    await build({ traces: { complete_on_arrival: false, completion_grace: '0s' } });
    const completionWorker = vi.spyOn(CompleterThread.prototype, 'start');
    const inProcess = vi.spyOn(app.completer, 'start');
    const ticked = vi.spyOn(app.completer, 'tick');
    await app.listen();
    const traceId = await ingest();
    expect(await resultsOf(traceId)).toEqual([
      expect.objectContaining({ evaluator: 'tool-errors', outcome: 'OUTCOME_SCORED' }),
    ]);
    // Counted on this thread's /metrics, from the worker's message.
    await eventually(async () => {
      const text = (await app.server.inject({ url: '/metrics' })).body.split('\n');
      return text.includes('touchstone_traces_completed_total 1') ? true : undefined;
    });
    expect(completionWorker).not.toHaveBeenCalled();
    expect(inProcess).not.toHaveBeenCalled();
    expect(ticked).not.toHaveBeenCalled();
  });
});

describe('ScoringThread fallback', () => {
  let dataDir: string;
  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'touchstone-scoring-'));
  });
  afterEach(() => {
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('scores in its worker by default, and in-process with online.worker false', async () => {
    expect(loadConfig({ overrides: { data_dir: dataDir } }).online.worker).toBe(true);
    const config = loadConfig({
      overrides: {
        data_dir: dataDir,
        listen: '127.0.0.1:0',
        log_level: 'silent',
        online: { worker: false },
      },
    });
    expect(config.online.worker).toBe(false);
    const app = await createApp(config, {
      env: {},
      processMetrics: false,
      logger: pino({ level: 'silent' }),
    });
    const inProcess = vi.spyOn(app.engine, 'start');
    try {
      await app.listen();
      expect(inProcess).toHaveBeenCalledOnce();
    } finally {
      await app.close();
    }
  });

  it('scores in-process when the worker cannot start', async () => {
    const store = await openStore(
      { store: { driver: 'sqlite' }, data_dir: dataDir },
      { clock: systemClock },
    );
    // The worker's data dir is a file: its store cannot open, so the worker ends before ready.
    const blocked = join(dataDir, 'not-a-dir');
    writeFileSync(blocked, '');
    const config = loadConfig({ overrides: { data_dir: blocked, log_level: 'silent' } });
    const metrics = new Metrics({ processMetrics: false });
    const fallback = new PolicyEngine({
      store,
      clock: systemClock,
      registry: (await import('../evaluators/index.js')).defaultRegistry(),
      judge: () => undefined,
      events: new WebhookOutbox({ clock: systemClock }),
    });
    const started = vi.spyOn(fallback, 'start');
    const rules = { graceMs: 0, idleMs: 60_000, maxAgeMs: 600_000 };
    const completer = new TraceCompleter({
      store,
      clock: systemClock,
      rules,
      normalize: normalizeStoredTrace,
    });
    const completing = vi.spyOn(completer, 'start');
    const warnings: string[] = [];
    const thread = new ScoringThread({
      data: { config, env: {}, completion: { rules, maxEventsPerSpan: 128 } },
      fallback,
      completer,
      observer: metrics,
      logger: { warn: (_obj, msg) => warnings.push(msg) },
    });
    thread.start();
    try {
      await eventually(async () => (started.mock.calls.length > 0 ? true : undefined));
      expect(thread.inWorker).toBe(false);
      // Completion, which ran in the same worker, goes on in-process too.
      expect(completing).toHaveBeenCalledOnce();
      expect(warnings).toContain(
        'online scoring and trace completion worker did not start; scoring and completing in-process',
      );
      // Wakes go to the engine that runs.
      const woken = vi.spyOn(fallback, 'wake');
      thread.wake();
      expect(woken).toHaveBeenCalled();
    } finally {
      await thread.shutdown();
      await thread.shutdown();
      await completer.shutdown();
      await store.close();
    }
  });
});
