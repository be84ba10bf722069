import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DatabricksFake } from '../../../../test/fakes/databricks/server.js';
import { storeVariants } from '../../../../test/support/stores.js';
import { type App, createApp } from '../../../app/index.js';
import { OPEN_PRINCIPAL } from '../../../auth/index.js';
import { loadConfig } from '../../../config/index.js';
import { FakeClock } from '../../../core/index.js';
import { normalizeStoredTrace, PulledTraceWriter } from '../../../ingest/index.js';
import { createHttpClient, type HttpClient } from '../../../net/index.js';
import { compileRedaction } from '../../../redaction/index.js';
import { SourceManager, type SourceManagerOptions } from '../../manager.js';
import { createDatabricksConnector } from './databricks-connector.js';

/**
 * Databricks sources pulled by the source manager against the contract fake workspace: what a
 * failure does to the source's status and watermark (a second 401, a search past five minutes).
 */

const T0 = Date.parse('2026-06-01T12:00:00Z');
const MIN = 60_000;

describe.each(storeVariants())('Databricks sources pulled by the manager on $name', (variant) => {
  let clock: FakeClock;
  let app: App;
  let dataDir: string;
  let fake: DatabricksFake;
  let http: HttpClient;
  let manager: SourceManager;
  let dispose: () => Promise<void>;

  let pulled: PulledTraceWriter;

  /** A manager over the fake workspace; `wait` is how the connector waits between polls. */
  function managerWith(
    options: Partial<SourceManagerOptions>,
    wait: (ms: number) => Promise<void>,
  ) {
    return new SourceManager({
      store: app.store,
      clock,
      // The applied source names a real workspace; the fake stands in for it.
      connector: () =>
        createDatabricksConnector({
          endpoint: fake.url,
          locations: ['main.agents'],
          http,
          credential: fake.clientSecret,
          clientId: fake.clientId,
          sqlWarehouseId: fake.sqlWarehouseId,
          clock: { now: () => clock.now(), sleep: wait },
        }),
      write: (t, adjust) => pulled.write(t, adjust),
      options: { pageSize: 10, maxRecordsPerSecond: 1_000_000, ...options },
      sleep: async () => undefined,
    });
  }

  beforeEach(async () => {
    clock = new FakeClock(T0);
    dataDir = mkdtempSync(join(tmpdir(), 'touchstone-databricks-'));
    const store = await variant.open();
    dispose = store.dispose;
    const config = loadConfig({
      overrides: { data_dir: dataDir, log_level: 'silent', ...store.overrides },
    });
    app = await createApp(config, {
      env: {},
      clock,
      processMetrics: false,
      logger: pino({ level: 'silent' }),
    });
    fake = await DatabricksFake.start({ now: () => clock.now() });
    http = createHttpClient({ timeoutMs: 10_000 });
    for (let i = 1; i <= 4; i++) fake.store.add('main.agents', T0 - 90 * MIN + i * MIN);
    pulled = new PulledTraceWriter({
      store: app.store,
      redactor: compileRedaction(config.traces.redaction),
      clock,
      normalize: normalizeStoredTrace,
    });
    manager = managerWith({}, async (ms) => clock.advance(ms));
    await app.sources.apply(OPEN_PRINCIPAL, {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'TraceSource',
      metadata: { name: 'uc' },
      spec: {
        connector: 'mlflow',
        variant: 'databricks',
        endpoint: 'https://dbc-1234.cloud.databricks.com',
        locations: ['main.agents'],
        auth: { databricks: { clientId: fake.clientId, sqlWarehouseId: fake.sqlWarehouseId } },
        backfill: { since: '2h' },
        poll: { interval: '30s' },
      },
    });
  });
  afterEach(async () => {
    await manager.shutdown();
    await app.close();
    await dispose();
    await http.close();
    expect(fake.violations).toEqual([]);
    await fake.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const state = async () => {
    const s = await app.store.sources.getState('default', 'uc');
    if (s === undefined) throw new Error('the source has a state');
    return s;
  };

  it('pulls catalog-schema traces as catalog.schema/<id>', async () => {
    await manager.tick();
    const page = await app.store.traces.list({ project: 'default' }, { pageSize: 50 });
    expect(page.items.map((t) => t.traceId).sort()).toEqual(
      [...fake.store.traces.values()].map((t) => `main.agents/${t.hex}`).sort(),
    );
    expect((await state()).lastError).toBeUndefined();
    // The API reads one by that id (its slash encoded in the path).
    const id = page.items[0]?.traceId as string;
    const res = await app.server.inject({
      method: 'GET',
      url: `/v1alpha1/traces/${encodeURIComponent(id)}`,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().trace).toMatchObject({ traceId: id });
  });

  it('a second 401 puts the source in error with a clear lastError and no secret', async () => {
    await manager.tick();
    fake.rejectAll = true;
    const before = fake.tokenRequests;
    clock.advance(MIN);
    await manager.tick();
    const s = await state();
    expect(s.phase).toBe('error');
    expect(s.lastError).toMatch(/^MLFLOW_ACCESS_DENIED: Databricks at 127\.0\.0\.1:\d+ .* 401/);
    expect(s.lastError).not.toContain(fake.clientSecret);
    expect(fake.tokenRequests - before).toBe(1);
  });

  it('a token endpoint answering an HTML page puts the source in error, naming only the media type', async () => {
    fake.tokenFault = {
      status: 200,
      contentType: 'text/html; charset=utf-8',
      body: `<html><body>Sign in ${fake.clientSecret}</body></html>`,
    };
    try {
      await manager.tick();
    } finally {
      fake.tokenFault = undefined;
    }
    const s = await state();
    expect(s.phase).toBe('error');
    expect(s.lastError).toMatch(
      /^MLFLOW_BAD_RESPONSE: Databricks token endpoint at 127\.0\.0\.1:\d+ answered text\/html without an access token$/,
    );
  });

  it('a search past five minutes is retried at the next pull, the watermark intact', async () => {
    fake.searchDurationMs = 6 * MIN;
    const initial = (await state()).watermark;
    await manager.tick();
    const failed = await state();
    expect(failed.phase).toBe('error');
    expect(failed.lastError).toContain('MLFLOW_SEARCH_TIMEOUT');
    expect(failed.watermark).toBe(initial);
    expect((await app.store.traces.list({ project: 'default' }, { pageSize: 50 })).items).toEqual(
      [],
    );
    // The warehouse is warm by the next pull.
    fake.searchDurationMs = MIN;
    clock.set(failed.nextPullAt);
    await manager.tick();
    const ok = await state();
    expect(ok.lastError).toBeUndefined();
    expect(ok.phase).not.toBe('error');
    expect(ok.watermark).toBeGreaterThan(initial);
    expect(
      (await app.store.traces.list({ project: 'default' }, { pageSize: 50 })).items,
    ).toHaveLength(4);
  });

  it('a catalog-schema search may outlast the ordinary pull budget: the source gets a longer one', async () => {
    // Each poll of the search takes real time here; together they outlast a 100 ms budget.
    const slow = managerWith({ pullBudgetMs: 100 }, async (ms) => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      clock.advance(ms);
    });
    fake.searchDurationMs = MIN;
    try {
      await slow.tick();
    } finally {
      await slow.shutdown();
    }
    const s = await state();
    expect(s.lastError).toBeUndefined();
    expect(
      (await app.store.traces.list({ project: 'default' }, { pageSize: 50 })).items,
    ).toHaveLength(4);
  });
});
