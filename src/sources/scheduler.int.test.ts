import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { storeVariants } from '../../test/support/stores.js';
import { type App, createApp } from '../app/index.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { type Config, loadConfig } from '../config/index.js';
import { FakeClock } from '../core/index.js';
import { normalizeStoredTrace, PulledTraceWriter } from '../ingest/index.js';
import { NetErrors } from '../net/index.js';
import { compileRedaction } from '../redaction/index.js';
import { FakeStore } from './fake-store.testkit.js';
import { SourceManager, type SourceManagerOptions } from './manager.js';
import { WINDOW_LABELS } from './scheduler.js';
import type { SourceStatus } from './service.js';

/**
 * Scheduled mode against the store double, with a clock the test moves: windows on cron
 * boundaries, empty windows, waiting for the previous run, missed deadlines (slow store, pause,
 * failures), stable window ids, and two replicas on one database.
 */

const MIN = 60_000;
/** Applied at 10:20: the first window is [10:00, 11:00), evaluated at 11:00. */
const T0 = Date.parse('2026-11-22T10:20:00Z');
const at = (hhmm: string) => Date.parse(`2026-11-22T${hhmm}Z`);

const scheduled = (spec: Record<string, unknown> = {}) => ({
  apiVersion: 'touchstone.dev/v1alpha1',
  kind: 'TraceSource',
  metadata: { name: 'hourly' },
  spec: {
    connector: 'mlflow',
    endpoint: 'http://127.0.0.1:5000',
    locations: ['agent'],
    schedule: { cron: '0 * * * *', window: '1h' },
    runSpec: { evaluators: [{ ref: 'tool-errors' }] },
    ...spec,
  },
});

describe.each(storeVariants())('scheduled sources on $name', (variant) => {
  let clock: FakeClock;
  let config: Config;
  let app: App;
  let dataDir: string;
  let dispose: () => Promise<void>;
  let fake: FakeStore;
  const managers: SourceManager[] = [];
  const others: App[] = [];

  /** A replica's manager over `on`'s database, pulling from the store double. */
  function replica(on: App, options: Partial<SourceManagerOptions> = {}): SourceManager {
    const pulled = new PulledTraceWriter({
      store: on.store,
      redactor: compileRedaction(config.traces.redaction),
      clock,
      normalize: normalizeStoredTrace,
    });
    const manager = new SourceManager({
      store: on.store,
      clock,
      connector: () => fake,
      write: (t, adjust) => pulled.write(t, adjust),
      snapshot: (t, adjust) => pulled.snapshot(t, adjust),
      options: { pageSize: 50, maxRecordsPerSecond: 1_000_000, ...options },
      sleep: async () => undefined,
    });
    managers.push(manager);
    return manager;
  }

  beforeEach(async () => {
    clock = new FakeClock(T0);
    dataDir = mkdtempSync(join(tmpdir(), 'touchstone-scheduled-'));
    const store = await variant.open();
    dispose = store.dispose;
    config = loadConfig({
      overrides: {
        data_dir: dataDir,
        log_level: 'silent',
        sources: { allow_hosts: ['127.0.0.1'] },
        // The fake's traces ask `question <n>`: the snapshot must hold the redacted text.
        traces: { redaction: { patterns: ['question [0-9]+'] } },
        ...store.overrides,
      },
    });
    app = await createApp(config, {
      env: {},
      clock,
      processMetrics: false,
      logger: pino({ level: 'silent' }),
    });
    fake = new FakeStore();
  });
  afterEach(async () => {
    for (const m of managers.splice(0)) await m.shutdown();
    for (const a of others.splice(0)) await a.close();
    await app.close();
    await dispose();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const apply = (spec: Record<string, unknown> = {}) =>
    app.sources.apply(OPEN_PRINCIPAL, scheduled(spec));
  const status = async () =>
    (await app.sources.get(OPEN_PRINCIPAL, undefined, 'hourly')).status as SourceStatus;
  const runs = async () =>
    (await app.store.runs.list('default', { pageSize: 100 })).items.sort((a, b) =>
      a.createdAt.localeCompare(b.createdAt),
    );
  const recordIds = async (id: string) => {
    const spec = (await app.store.runs.get(id, { spec: true }))?.spec as {
      dataset: { records: { id: string }[] };
    };
    return spec.dataset.records.map((r) => r.id);
  };
  const tickAt = async (manager: SourceManager, hhmm: string) => {
    clock.set(at(hhmm));
    await manager.tick();
  };

  it('evaluates each window on its boundary as an ordinary run; start included, end excluded', async () => {
    const before = fake.add(1, at('10:05:00'));
    const last = fake.add(2, at('10:59:59.999'));
    const boundary = fake.add(3, at('11:00:00'));
    fake.add(4, at('09:59:59.999'));
    await app.webhooks.service.apply(OPEN_PRINCIPAL, {
      name: 'runs',
      url: 'https://hooks.example.com/runs',
      events: ['WEBHOOK_EVENT_RUN_FINISHED'],
    });
    await apply();
    const manager = replica(app);
    await tickAt(manager, '10:59:59.999');
    expect(await runs()).toEqual([]);

    await tickAt(manager, '11:00:00');
    const [run] = await runs();
    expect(run).toMatchObject({
      status: 'RUN_STATUS_PENDING',
      name: 'hourly-202611221100',
      createdBy: 'source:hourly',
      labels: {
        [WINDOW_LABELS.source]: 'hourly',
        [WINDOW_LABELS.start]: '2026-11-22T10:00:00.000Z',
        [WINDOW_LABELS.end]: '2026-11-22T11:00:00.000Z',
      },
    });
    expect(await recordIds(run!.id)).toEqual([before.traceId, last.traceId]);
    // Redacted and normalized before the snapshot is stored.
    const snapshot = JSON.stringify((await app.store.runs.get(run!.id, { spec: true }))?.spec);
    expect(snapshot).toContain('[REDACTED]');
    expect(snapshot).not.toMatch(/question [0-9]/);
    expect(snapshot).toContain('"trajectory"');
    expect(await status()).toMatchObject({
      lastRunId: run!.id,
      lastScheduledAt: '2026-11-22T11:00:00.000Z',
      missedWindows: 0,
    });
    // Nothing of the window is stored as a trace or scored online: the run grades it.
    expect((await app.store.traces.list({ project: 'default' }, { pageSize: 5 })).items).toEqual(
      [],
    );

    // An ordinary run: the executor runs it, with summaries, and lists it.
    await app.runExecutor.drain();
    const done = await app.runs.get(OPEN_PRINCIPAL, undefined, run!.id);
    expect(done).toMatchObject({ status: 'RUN_STATUS_SUCCEEDED' });
    expect(JSON.stringify(done.summaries)).toContain('tool-errors');
    const deliveries = await app.webhooks.service.deliveries(OPEN_PRINCIPAL, undefined, 'runs', {
      pageSize: 10,
    });
    expect(deliveries.items.map((d) => d.runId)).toEqual([run!.id]);
    const listed = await app.server.inject({ url: '/v1alpha1/runs' });
    expect(listed.json().runs.map((r: { id: string }) => r.id)).toContain(run!.id);

    // The next window holds the boundary trace.
    await tickAt(manager, '12:00:00');
    const second = (await runs())[1];
    expect(await recordIds(second!.id)).toEqual([boundary.traceId]);
  });

  it("applies the run spec's gates to a window's run: a failing gate fires run.gate_failed", async () => {
    fake.add(1, at('10:10:00'), { fail: true });
    fake.add(2, at('10:20:00'));
    await app.webhooks.service.apply(OPEN_PRINCIPAL, {
      name: 'gates',
      url: 'https://hooks.example.com/gates',
      events: ['WEBHOOK_EVENT_RUN_GATE_FAILED'],
    });
    await apply({ runSpec: { evaluators: [{ ref: 'tool-errors' }], gates: ['tool-errors <= 0'] } });
    await tickAt(replica(app), '11:00:00');
    const [run] = await runs();
    await app.runExecutor.drain();
    const done = await app.runs.get(OPEN_PRINCIPAL, undefined, run!.id);
    expect(done).toMatchObject({
      status: 'RUN_STATUS_FAILED',
      gates: [expect.objectContaining({ value: 0.5, passed: false })],
    });
    const deliveries = await app.webhooks.service.deliveries(OPEN_PRINCIPAL, undefined, 'gates', {
      pageSize: 10,
    });
    expect(deliveries.items.map((d) => d.runId)).toEqual([run!.id]);
  });

  it('advances past empty windows without a run, and starts from the apply, not from history', async () => {
    fake.add(1, at('08:30:00'));
    await apply();
    const manager = replica(app);
    await tickAt(manager, '11:00:00');
    await tickAt(manager, '12:00:30');
    expect(await runs()).toEqual([]);
    expect(await status()).toMatchObject({
      missedWindows: 0,
      lastScheduledAt: '2026-11-22T12:00:30.000Z',
    });
    expect((await status()).lastRunId).toBeUndefined();
    expect((await app.store.sources.getState('default', 'hourly'))?.schedule?.cursor).toBe(
      at('12:00:00'),
    );
  });

  it('waits for the previous run; a window whose deadline passes meanwhile is missed, not piled up', async () => {
    for (const [i, hhmm] of ['10:30', '11:30', '12:30', '13:30'].entries()) {
      fake.add(i + 1, at(`${hhmm}:00`));
    }
    await apply();
    const manager = replica(app);
    await tickAt(manager, '11:00:00');
    expect(await runs()).toHaveLength(1);
    // Run 1 still pending: the 12:00 window waits.
    await tickAt(manager, '12:00:00');
    await tickAt(manager, '12:30:00');
    expect(await runs()).toHaveLength(1);
    await app.runExecutor.drain();
    await tickAt(manager, '12:31:00');
    expect(await runs()).toHaveLength(2);
    // Run 2 pending past 14:00, the 13:00 window's deadline: that window is missed.
    await tickAt(manager, '14:00:01');
    expect(await runs()).toHaveLength(2);
    expect(await status()).toMatchObject({ missedWindows: 1 });
    // Looked at again within poll.interval (30 s) of the previous run's end.
    await app.runExecutor.drain();
    await tickAt(manager, '14:00:31');
    const all = await runs();
    expect(all).toHaveLength(3);
    expect(all[2]?.labels[WINDOW_LABELS.end]).toBe('2026-11-22T14:00:00.000Z');
    expect(await status()).toMatchObject({ missedWindows: 1, lastRunId: all[2]?.id });
  });

  it('misses a window whose slow fetch ends after the starting deadline', async () => {
    fake.add(1, at('10:30:00'));
    await apply();
    const manager = replica(app);
    clock.set(at('11:00:00'));
    fake.beforeList = () => clock.advance(61 * MIN);
    await manager.tick();
    expect(await runs()).toEqual([]);
    const s = await status();
    expect(s).toMatchObject({ missedWindows: 1 });
    expect(s.lastError).toContain('was missed');
    expect((await app.store.sources.getState('default', 'hourly'))?.schedule?.cursor).toBe(
      at('11:00:00'),
    );
  });

  it('counts the deadlines passed while paused, and evaluates the window still due on resume', async () => {
    fake.add(1, at('12:30:00'));
    await apply();
    const manager = replica(app);
    await app.sources.pause(OPEN_PRINCIPAL, undefined, 'hourly');
    await tickAt(manager, '11:00:00');
    await tickAt(manager, '13:30:00');
    // The 11:00 and 12:00 windows' deadlines (12:00, 13:00) passed while paused.
    expect(await status()).toMatchObject({ phase: 'paused', missedWindows: 2 });
    expect(await runs()).toEqual([]);
    await app.sources.resume(OPEN_PRINCIPAL, undefined, 'hourly');
    await manager.tick();
    const [run] = await runs();
    expect(run?.labels[WINDOW_LABELS.end]).toBe('2026-11-22T13:00:00.000Z');
    expect(await status()).toMatchObject({ missedWindows: 2, lastRunId: run?.id });
  });

  it('does not move the cursor on a failed or incomplete fetch; retried until the deadline', async () => {
    const done = fake.add(1, at('10:10:00'));
    const running = fake.add(2, at('10:50:00'), { inProgress: true });
    await apply();
    const manager = replica(app);
    await tickAt(manager, '11:00:00');
    expect(await runs()).toEqual([]);
    expect((await status()).lastError).toContain('1 traces still running');
    fake.traces = fake.traces.filter((t) => t !== running);
    fake.add(2, at('10:50:00'));
    fake.failListAfterPages = 0;
    fake.failure = NetErrors.OUTBOUND_UNAVAILABLE('the store answered 503');
    await tickAt(manager, '11:10:00');
    expect(await status()).toMatchObject({ phase: 'error' });
    expect((await app.store.sources.getState('default', 'hourly'))?.schedule?.cursor).toBe(T0);
    fake.failListAfterPages = Number.POSITIVE_INFINITY;
    await tickAt(manager, '11:20:00');
    const [run] = await runs();
    expect(await recordIds(run!.id)).toEqual([done.traceId, fake.traces.at(-1)?.traceId]);
    expect((await status()).phase).toBe('tailing');
    expect((await status()).lastError).toBeUndefined();

    // A store failing past the next deadline: that window is missed once.
    fake.failListAfterPages = 0;
    await tickAt(manager, '12:00:00');
    await tickAt(manager, '13:00:01');
    expect(await status()).toMatchObject({ missedWindows: 1 });
  });

  it("gives a store that runs long searches (Databricks) the pull's longer budget for a window", async () => {
    fake.add(1, at('10:30:00'));
    // Budgets scaled down: a listing of 1 s outlasts the pull budget, not the long-search one.
    const budgets = { pullBudgetMs: 250, longSearchBudgetMs: 30_000 };
    fake.listDelayMs = 1_000;
    await apply();
    await tickAt(replica(app, budgets), '11:00:00');
    expect(await runs()).toEqual([]);
    expect((await status()).lastError).toContain('did not finish within 0.25 s');

    await app.sources.delete(OPEN_PRINCIPAL, undefined, 'hourly');
    clock.set(T0);
    await apply({ variant: 'databricks', locations: ['1234'] });
    await tickAt(replica(app, budgets), '11:00:00');
    const [run] = await runs();
    expect(run?.labels[WINDOW_LABELS.end]).toBe('2026-11-22T11:00:00.000Z');
    expect((await status()).lastError).toBeUndefined();
  });

  it('keeps the cursor when applied again, and never evaluates a window twice', async () => {
    fake.add(1, at('10:30:00'));
    fake.add(2, at('11:30:00'));
    await apply();
    const manager = replica(app);
    await tickAt(manager, '11:00:00');
    const cursor = (await app.store.sources.getState('default', 'hourly'))?.schedule;
    await apply({ runSpec: { evaluators: [{ ref: 'tool-errors' }, { ref: 'exact-match' }] } });
    expect((await app.store.sources.getState('default', 'hourly'))?.schedule).toEqual(cursor);

    // A replica that restarts with the cursor behind a window already evaluated (its run
    // committed) finds the window's run by its id and does not insert it again.
    await app.runExecutor.drain();
    const state = (await app.store.sources.getState('default', 'hourly'))!;
    await app.store.sources.saveState({ ...state, schedule: { ...cursor!, cursor: T0 } });
    await tickAt(replica(app), '11:05:00');
    expect(await runs()).toHaveLength(1);
    // Its records are counted once.
    expect(await status()).toMatchObject({ pulled: 1 });
    expect((await app.store.sources.getState('default', 'hourly'))?.schedule?.cursor).toBe(
      at('11:00:00'),
    );
  });

  it('two holders committing the same window at once: one run, the cursor moved, no error', async () => {
    fake.add(1, at('10:30:00'));
    await apply();
    // Both fetches wait at the gate, then both commit the window together.
    let open: () => void = () => undefined;
    fake.fetchGate = new Promise((resolve) => {
      open = resolve;
    });
    const manager = replica(app);
    clock.set(at('11:00:00'));
    const ticks = Promise.all([manager.tick(), manager.tick()]);
    while (fake.gated < 2) await new Promise((r) => setTimeout(r, 5));
    open();
    await ticks;
    expect(await runs()).toHaveLength(1);
    expect(await status()).toMatchObject({
      pulled: 1,
      lastScheduledAt: '2026-11-22T11:00:00.000Z',
    });
  });

  it('honours maxRecords and records the truncation on the run', async () => {
    for (let i = 1; i <= 10_001; i++) fake.add(i, at('10:00:00') + i * 300);
    await apply();
    await tickAt(replica(app), '11:00:00');
    const [run] = await runs();
    expect(run?.labels[WINDOW_LABELS.truncated]).toBe('maxRecords');
    expect(await recordIds(run!.id)).toHaveLength(10_000);
    expect(await status()).toMatchObject({ pulled: 10_000 });
  }, 120_000);

  it.runIf(variant.name === 'sqlite')(
    'stops a snapshot at 64 MiB and records the truncation on the run',
    async () => {
      // 3500 traces whose records hold an 8 KiB answer several times: about 90 MiB of records.
      const answer = 'x'.repeat(8 * 1024);
      for (let i = 1; i <= 3500; i++) fake.add(i, at('10:00:00') + i * 300, { output: answer });
      await apply();
      await tickAt(replica(app), '11:00:00');
      const [run] = await runs();
      expect(run?.labels[WINDOW_LABELS.truncated]).toBe('snapshot-bytes');
      const spec = (await app.store.runs.get(run!.id, { spec: true }))?.spec as {
        dataset: { records: unknown[] };
      };
      const bytes = spec.dataset.records.reduce<number>(
        (n, r) => n + Buffer.byteLength(JSON.stringify(r)),
        0,
      );
      expect(bytes).toBeLessThanOrEqual(64 * 1024 * 1024);
      expect(bytes).toBeGreaterThan(63 * 1024 * 1024);
      expect(spec.dataset.records.length).toBeLessThan(3500);
    },
    180_000,
  );

  it('two replicas: one evaluates a window, the other takes over from the stored cursor', async () => {
    fake.add(1, at('10:30:00'));
    fake.add(2, at('11:30:00'));
    await apply();
    const second = await createApp(config, {
      env: {},
      clock,
      processMetrics: false,
      logger: pino({ level: 'silent' }),
    });
    others.push(second);
    const a = replica(app);
    const b = replica(second);
    clock.set(at('11:00:00'));
    await Promise.all([a.tick(), b.tick(), a.tick(), b.tick()]);
    expect(await runs()).toHaveLength(1);
    await app.runExecutor.drain();
    // Replica a is gone; b evaluates the next window from the stored cursor.
    await a.shutdown();
    await tickAt(b, '12:00:00');
    const all = await runs();
    expect(all.map((r) => r.labels[WINDOW_LABELS.end])).toEqual([
      '2026-11-22T11:00:00.000Z',
      '2026-11-22T12:00:00.000Z',
    ]);
  });
});
