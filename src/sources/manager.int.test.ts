import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { storeVariants } from '../../test/support/stores.js';
import { type App, createApp } from '../app/index.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { loadConfig } from '../config/index.js';
import { FakeClock } from '../core/index.js';
import { normalizeStoredTrace, PulledTraceWriter } from '../ingest/index.js';
import { NetErrors } from '../net/index.js';
import { compileRedaction } from '../redaction/index.js';
import { FakeStore } from './fake-store.testkit.js';
import { SourceManager } from './manager.js';
import { compileOverrides } from './overrides.js';
import type { SourceStatus } from './service.js';
import { SourceDirectory, SourceResultSink, WriteBackWriter } from './write-back.js';

/**
 * The source manager against an in-memory store double (a connector only lists, fetches and
 * writes back, so the manager's rules are tested here once for every store; each real connector
 * has its own contract tests against its server or recorded answers).
 */

const T0 = Date.parse('2026-11-22T10:00:00Z');
const MIN = 60_000;

const sourceResource = (spec: Record<string, unknown>) => ({
  apiVersion: 'touchstone.dev/v1alpha1',
  kind: 'TraceSource',
  metadata: { name: 'prod-mlflow' },
  spec: {
    connector: 'mlflow',
    endpoint: 'http://127.0.0.1:5000',
    locations: ['agent'],
    backfill: { since: '2h' },
    poll: { interval: '30s' },
    ...spec,
  },
});

describe.each(storeVariants())('source manager on $name', (variant) => {
  let clock: FakeClock;
  let app: App;
  let dataDir: string;
  let dispose: () => Promise<void>;
  let overrideErrors: string[];
  let fake: FakeStore;
  let manager: SourceManager;
  let writer: WriteBackWriter;

  beforeEach(async () => {
    clock = new FakeClock(T0);
    overrideErrors = [];
    dataDir = mkdtempSync(join(tmpdir(), 'touchstone-sources-'));
    const store = await variant.open();
    dispose = store.dispose;
    const config = loadConfig({
      overrides: {
        data_dir: dataDir,
        log_level: 'silent',
        sources: { allow_hosts: ['127.0.0.1'] },
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
    const directory = new SourceDirectory({ store: app.store, clock });
    const pulled = new PulledTraceWriter({
      store: app.store,
      redactor: compileRedaction(config.traces.redaction),
      clock,
      normalize: normalizeStoredTrace,
    });
    manager = new SourceManager({
      store: app.store,
      clock,
      connector: () => fake,
      write: (t, adjust) => pulled.write(t, adjust),
      overrides: (s) =>
        compileOverrides(s, 'default', (field, reason) =>
          overrideErrors.push(`${field}: ${reason}`),
        ),
      options: { pageSize: 3, maxRecordsPerSecond: 1_000_000 },
      sleep: async () => undefined,
    });
    writer = new WriteBackWriter({ store: app.store, clock, directory, connector: () => fake });
  });
  afterEach(async () => {
    await manager.shutdown();
    await app.close();
    await dispose();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const applySource = (spec: Record<string, unknown> = {}) =>
    app.sources.apply(OPEN_PRINCIPAL, sourceResource(spec));
  const state = async () => (await app.store.sources.getState('default', 'prod-mlflow'))!;
  // Pulled traces are queued for online scoring only in a project that has a policy.
  const applyPolicy = () =>
    app.policies.apply(OPEN_PRINCIPAL, {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name: 'tools' },
      spec: { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] },
    });

  it('backfills page by page, stores pulled traces as ordinary labelled traces, and skips unchanged ones', async () => {
    for (let i = 1; i <= 7; i++) fake.add(i, T0 - 100 * MIN + i * MIN);
    await applyPolicy();
    await applySource({
      traceLabels: { env: 'prod' },
      overrides: {
        reference: '"answer"',
        'labels.team': 'resource["mlflow.tag.team"]',
        'metadata.question': 'input.upperAscii()',
        output: 'labels["nope"]',
      },
    });
    await manager.tick();
    expect(fake.fetched).toHaveLength(7);
    const page = await app.store.traces.list({ project: 'default' }, { pageSize: 50 });
    expect(page.items).toHaveLength(7);
    expect(page.items[0]?.labels).toMatchObject({ source: 'prod-mlflow', env: 'prod' });
    expect(page.items[0]?.source).toBe('prod-mlflow');
    // Overrides set record fields; a failing one leaves its field as it was, and is reported.
    expect(overrideErrors).toEqual(Array(7).fill('output: error'));
    const stored = await app.store.traces.get('default', page.items[0]?.traceId ?? '');
    expect(stored?.record).toMatchObject({
      reference: 'answer',
      output: 'answer',
      metadata: { question: 'QUESTION 7' },
      labels: { team: 'search', source: 'prod-mlflow', env: 'prod' },
    });
    const s = await state();
    expect(s.phase).toBe('tailing');
    expect(s.watermark).toBe(T0 - 30 * MIN);
    expect(s.pulled).toBe(7);
    expect(await app.store.work.stats()).toMatchObject({ depth: 7 });

    // The next poll re-reads the look-back window but fetches nothing unchanged.
    clock.advance(31_000);
    await manager.tick();
    expect(fake.fetched).toHaveLength(7);
    const view = await app.sources.get(OPEN_PRINCIPAL, undefined, 'prod-mlflow');
    expect(view.status).toMatchObject({ phase: 'tailing', pulled: 7, deferred: 0, lagSeconds: 0 });
  });

  it('keeps the store id of a pulled trace in the transaction that queues it for scoring', async () => {
    // The engine may score a trace as soon as its work item commits, before the page ends; its
    // scores are written back only if the trace's store id is known by then.
    const first = fake.add(1, T0 - 10 * MIN);
    fake.add(2, T0 - 9 * MIN);
    await applyPolicy();
    await applySource();
    const known: (string | undefined)[] = [];
    const pulled = new PulledTraceWriter({
      store: app.store,
      redactor: compileRedaction(loadConfig({}).traces.redaction),
      clock,
      normalize: normalizeStoredTrace,
    });
    const watching = new SourceManager({
      store: app.store,
      clock,
      connector: () => fake,
      write: async (t, adjust) => {
        const changed = await pulled.write(t, adjust);
        known.push(await app.store.sources.storeIdOf('default', 'prod-mlflow', t.traceId));
        return changed;
      },
      options: { pageSize: 3, maxRecordsPerSecond: 1_000_000 },
      sleep: async () => undefined,
    });
    try {
      await watching.tick();
    } finally {
      await watching.shutdown();
    }
    expect(known).toEqual([first.storeId, expect.stringMatching(/^tr-/)]);
  });

  it("finds a pulled trace, and its scores, by the store's own id as well as by its trace id", async () => {
    const mlflow = fake.add(1, T0 - 10 * MIN);
    // A store id that is no OpenTelemetry trace id (a Langfuse UUID): the trace id is derived.
    const langfuse = fake.add(2, T0 - 9 * MIN, { storeId: '7d9f0d8e-1c2b-4a5e-9f00-0a1b2c3d4e5f' });
    await applySource();
    await manager.tick();
    const get = (id: string, scores = '') =>
      app.server.inject({ url: `/v1alpha1/traces/${encodeURIComponent(id)}${scores}` });
    for (const t of [mlflow, langfuse]) {
      const byTraceId = await get(t.traceId);
      expect(byTraceId.statusCode).toBe(200);
      const byStoreId = await get(t.storeId);
      expect(byStoreId.statusCode).toBe(200);
      expect(byStoreId.json()).toEqual(byTraceId.json());
      expect(byStoreId.json().trace.traceId).toBe(t.traceId);
      const scores = await get(t.storeId, '/scores');
      expect(scores.statusCode).toBe(200);
      expect(scores.json().trace.traceId).toBe(t.traceId);
    }
    expect(mlflow.storeId).toBe(`tr-${mlflow.traceId}`);
    expect((await get('tr-ffffffffffffffffffffffffffffffff')).statusCode).toBe(404);
    // Store ids are matched exactly (trace ids in any case).
    expect((await get(langfuse.storeId.toUpperCase())).statusCode).toBe(404);
    expect((await get(mlflow.traceId.toUpperCase())).statusCode).toBe(200);
  });

  it('stores a large pulled trace in slices, letting other work run, and its resource once', async () => {
    const big = fake.add(1, T0 - 10 * MIN);
    const text = 'The flight to Paris leaves at seven. '.repeat(1000);
    for (let i = 0; i < 300; i++) {
      big.spans.push({
        ...big.spans[1]!,
        spanId: (0x100 + i).toString(16).padStart(16, '0'),
        attributes: { 'gen_ai.operation.name': 'execute_tool', 'output.value': text },
        // One resource object for the trace's spans, as the connectors build them.
        resource: big.spans[0]!.resource,
      });
    }
    await applySource();
    // Turns of the event loop taken while the trace is redacted and written: a health check or
    // another request gets each of them.
    let turns = 0;
    let running = true;
    const count = () => {
      turns++;
      if (running) setImmediate(count);
    };
    setImmediate(count);
    try {
      await manager.tick();
    } finally {
      running = false;
    }
    // 11 MB of text, read in slices of 32 Ki characters.
    expect(turns).toBeGreaterThan(100);
    const spans = await app.store.traces.spans('default', big.traceId);
    expect(spans).toHaveLength(302);
    expect(spans.every((s) => s.resource === spans[0]!.resource)).toBe(true);
    expect(spans[0]!.resource).toEqual({ 'service.name': 'agent', 'mlflow.tag.team': 'search' });
  });

  it('defers a running trace, then stores it when it ends (or as it is after maxInProgressAge)', async () => {
    const running = fake.add(1, T0 - 40 * MIN, { inProgress: true });
    const stuck = fake.add(2, T0 - 35 * MIN, { inProgress: true });
    await applySource({ maxInProgressAge: '10m' });
    await manager.tick();
    expect(fake.fetched).toEqual([]);
    expect((await app.sources.get(OPEN_PRINCIPAL, undefined, 'prod-mlflow')).status).toMatchObject({
      deferred: 2,
    });
    // The watermark waits for the earliest running trace (not only now − maxTraceDuration).
    expect((await state()).watermark).toBe(T0 - 40 * MIN);

    running.inProgress = false;
    running.endMs = running.startMs + 2000;
    clock.advance(31_000);
    await manager.tick();
    expect(fake.fetched).toEqual([running.storeId]);

    clock.advance(10 * MIN);
    await manager.tick();
    expect(fake.fetched).toEqual([running.storeId, stuck.storeId]);
  });

  it('commits the watermark per page; a failure backs off (Retry-After honoured) and resumes where it stopped', async () => {
    for (let i = 1; i <= 7; i++) fake.add(i, T0 - 100 * MIN + i * MIN);
    fake.failListAfterPages = 1;
    fake.failure = NetErrors.OUTBOUND_UNAVAILABLE('the store answered 503', {
      retryAfterSeconds: 42,
    });
    await applySource();
    await manager.tick();
    let s = await state();
    expect(s.phase).toBe('error');
    expect(s.lastError).toMatch(/503/);
    expect(s.watermark).toBe(T0 - 97 * MIN);
    expect(s.nextPullAt).toBe(clock.now() + 42_000);

    fake.failListAfterPages = Number.POSITIVE_INFINITY;
    clock.advance(41_000);
    await manager.tick();
    expect((await state()).phase).toBe('error');
    clock.advance(2_000);
    await manager.tick();
    s = await state();
    expect(s.phase).toBe('tailing');
    expect(s.lastError).toBeUndefined();
    expect(new Set(fake.fetched).size).toBe(7);
  });

  it('puts lastError and the failure log through the redaction text rules', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => lines.push(line) });
    const redactor = compileRedaction({ pii: ['email'], patterns: ['acct-[0-9]+'] });
    const redacting = new SourceManager({
      store: app.store,
      clock,
      connector: () => fake,
      write: async () => true,
      logger,
      redactText: (text) => redactor.redactText(text),
    });
    fake.add(1, T0 - 50 * MIN);
    fake.failListAfterPages = 0;
    fake.failure = NetErrors.OUTBOUND_UNAVAILABLE(
      'the store at acct-774411.example.com answered 503 for ops@example.com',
    );
    await applySource();
    await redacting.tick();
    const s = await state();
    expect(s.phase).toBe('error');
    expect(s.lastError).toBe(
      'OUTBOUND_UNAVAILABLE: the store at [REDACTED].example.com answered 503 for [REDACTED]',
    );
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('source pull failed');
    expect(lines[0]).toContain('[REDACTED]');
    expect(lines[0]).not.toMatch(/acct-774411|ops@example\.com/);
    await redacting.shutdown();
  });

  it('skips a trace whose spans are missing (once, with a reason) and a pull that never ends keeps its place', async () => {
    const a = fake.add(1, T0 - 50 * MIN);
    const b = fake.add(2, T0 - 49 * MIN);
    fake.missing.add(a.storeId);
    await applySource();
    await manager.tick();
    expect(fake.fetched).toEqual([a.storeId, b.storeId]);
    expect(
      (await app.store.traces.list({ project: 'default' }, { pageSize: 10 })).items.map(
        (t) => t.traceId,
      ),
    ).toEqual([b.traceId]);
    clock.advance(31_000);
    await manager.tick();
    // Not fetched again until the store changes it.
    expect(fake.fetched).toEqual([a.storeId, b.storeId]);

    const hanging = new SourceManager({
      store: app.store,
      clock,
      connector: () => fake,
      write: async () => true,
      options: { pullBudgetMs: 200 },
    });
    fake.hang = true;
    const before = await state();
    clock.advance(31_000);
    await hanging.tick();
    const after = await state();
    expect(after.lastError).toMatch(/did not finish within 0.2 s/);
    expect(after.watermark).toBe(before.watermark);
    expect(after.nextPullAt).toBe(clock.now());
    await hanging.shutdown();
  });

  it('pause stops pulling; backfill reads history again and re-scores only changed traces', async () => {
    const t = fake.add(1, T0 - 50 * MIN);
    await applyPolicy();
    await applySource({ backfill: { since: '0' } });
    await app.sources.pause(OPEN_PRINCIPAL, undefined, 'prod-mlflow');
    await manager.tick();
    expect(fake.fetched).toEqual([]);
    expect((await app.sources.get(OPEN_PRINCIPAL, undefined, 'prod-mlflow')).status).toMatchObject({
      phase: 'paused',
    });
    await app.sources.resume(OPEN_PRINCIPAL, undefined, 'prod-mlflow');
    await manager.tick();
    expect(fake.fetched).toEqual([]);

    await app.sources.backfill(
      OPEN_PRINCIPAL,
      undefined,
      'prod-mlflow',
      new Date(T0 - 60 * MIN).toISOString(),
    );
    const phase = async () =>
      ((await app.sources.get(OPEN_PRINCIPAL, undefined, 'prod-mlflow')).status as SourceStatus)
        .phase;
    expect(await phase()).toBe('backfilling');
    await manager.tick();
    expect(fake.fetched).toEqual([t.storeId]);
    // History was read again in that pull: tailing at once, not maxTraceDuration later.
    expect(await phase()).toBe('tailing');
    const depth = (await app.store.work.stats()).depth;
    await app.sources.backfill(
      OPEN_PRINCIPAL,
      undefined,
      'prod-mlflow',
      new Date(T0 - 60 * MIN).toISOString(),
    );
    t.resource = { 'mlflow.tag.team': 'search', 'touchstone.label.reviewed': 'yes' };
    await manager.tick();
    expect(fake.fetched).toEqual([t.storeId, t.storeId]);
    // A label tag changed the record (its labels), so its digest changed: queued again.
    expect((await app.store.work.stats()).depth).toBe(depth + 1);
  });

  it('writes scores back once per value, updating the same remote score when it changes', async () => {
    await applyPolicy();
    const t = fake.add(1, T0 - 10 * MIN, { fail: true });
    await applySource({ writeBack: { enabled: true }, policies: ['tools'] });
    await manager.tick();
    await app.engine.tick();
    await writer.tick();
    expect(
      fake.written.map((w) => [w.metric, w.policy, w.score.value, w.judge, w.remoteId]),
    ).toEqual([['tool-errors', 'tools', 1, false, undefined]]);
    expect((await state()).scored).toBe(1);

    // Rescored with the same value: nothing is written.
    await app.policies.rescore(
      OPEN_PRINCIPAL,
      undefined,
      'tools',
      new Date(T0 - 60 * MIN).toISOString(),
    );
    await app.engine.tick();
    await writer.tick();
    expect(fake.written).toHaveLength(1);

    // The tool call is retried successfully in the store: the trace changes, is pulled and scored
    // again, and the same remote assessment is updated.
    const tool = t.spans[1] as unknown as { status: { code: number; message: string } };
    tool.status = { code: 0, message: '' };
    t.endMs = (t.endMs ?? 0) + 1;
    clock.advance(31_000);
    await manager.tick();
    await app.engine.tick();
    await writer.tick();
    expect(fake.written.map((w) => [w.metric, w.score.value, w.remoteId])).toEqual([
      ['tool-errors', 1, undefined],
      ['tool-errors', 0, 'a-1'],
    ]);
    expect((await state()).scored).toBe(2);
  });

  it('reads sources through the results transaction when the directory cache expired in between', async () => {
    await applySource({ writeBack: { enabled: true } });
    const directory = new SourceDirectory({ store: app.store, clock });
    const sink = new SourceResultSink({ directory, clock });
    expect(await sink.allowedPolicies('default', 'prod-mlflow')).toBeUndefined();
    clock.advance(1500);
    const trace = {
      traceId: 'a'.repeat(32),
      project: 'default',
      source: 'prod-mlflow',
      service: 'agent',
      name: 'agent',
      startTime: new Date(T0).toISOString(),
      durationMs: 1,
      steps: 1,
      error: false,
      labels: {},
      digest: 'd',
      completedAt: new Date(T0).toISOString(),
    };
    await app.store.withTransaction((tx) =>
      sink.onStored(tx, { trace, policy: 'p', digest: 'd', results: [], judged: new Set() }),
    );
  });

  it('a source naming a missing policy is NotFound; azureml and mixed databricks locations are refused', async () => {
    await expect(applySource({ policies: ['nope'] })).rejects.toMatchObject({
      code: 'SOURCE_POLICY_NOT_FOUND',
    });
    await expect(applySource({ variant: 'azureml' })).rejects.toMatchObject({
      code: 'SOURCE_VARIANT_REFUSED',
    });
    await expect(
      applySource({
        variant: 'databricks',
        endpoint: 'https://example.cloud.databricks.com',
        locations: ['123', 'main.agents'],
      }),
    ).rejects.toMatchObject({ code: 'SOURCE_LOCATIONS_MIXED' });
    await expect(applySource({ endpoint: 'http://10.0.0.5:5000' })).rejects.toMatchObject({
      code: 'SOURCE_ENDPOINT_REFUSED',
    });
  });
});
