import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { agentRun } from '../../test/fakes/langfuse/samples.js';
import { LangfuseFake } from '../../test/fakes/langfuse/server.js';
import { FaultProxy } from '../../test/support/fault-proxy.js';
import { cli } from '../../test/support/process.js';
import { storeVariants } from '../../test/support/stores.js';
import { type App, createApp } from '../app/index.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { loadConfig } from '../config/index.js';
import { FakeClock } from '../core/index.js';
import type { SourceStatus } from './service.js';

/**
 * Write-back failures, classified: the app's own source manager and writer, the real Langfuse
 * connector and HTTP client, the Langfuse contract fake behind a fault proxy. A refusal the store
 * would repeat (401, 403, 404, a 400 validation error) dead-letters the row after one attempt
 * (status, /metrics, `touchstone source get`); a transient failure (429, 5xx, Langfuse's 422
 * resource-limit answer) is retried, never before Retry-After, and then written.
 */

const T0 = Date.parse('2026-11-22T10:00:00Z');
const MIN = 60_000;
const SOURCE = 'prod-langfuse';
const TRACE = `00000001${'ab'.repeat(12)}`;

let fake: LangfuseFake;
let proxy: FaultProxy;

beforeAll(async () => {
  fake = await LangfuseFake.start();
  proxy = await FaultProxy.start(fake.url);
});
afterAll(async () => {
  await proxy.close();
  await fake.close();
});

describe.each(storeVariants())('write-back failures on $name', (variant) => {
  let clock: FakeClock;
  let app: App;
  let dataDir: string;
  let dispose: () => Promise<void>;

  beforeEach(async () => {
    fake.observations.length = 0;
    fake.scores.clear();
    fake.violations.length = 0;
    proxy.fault = undefined;
    clock = new FakeClock(T0);
    fake.now = () => clock.now();
    dataDir = mkdtempSync(join(tmpdir(), 'touchstone-write-back-'));
    const store = await variant.open();
    dispose = store.dispose;
    const config = loadConfig({
      overrides: {
        data_dir: dataDir,
        log_level: 'silent',
        sources: { allow_hosts: ['127.0.0.1'] },
        credentials: { grants: [{ env: 'LANGFUSE_KEYS', projects: ['*'] }] },
        // The host in a connector's message stands for anything an operator redacts.
        traces: { redaction: { patterns: ['127\\.0\\.0\\.1'] } },
        ...store.overrides,
      },
    });
    app = await createApp(config, {
      env: { LANGFUSE_KEYS: fake.credential },
      clock,
      processMetrics: false,
      logger: pino({ level: 'silent' }),
    });
    await app.policies.apply(OPEN_PRINCIPAL, {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name: 'tools' },
      spec: { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] },
    });
    await app.sources.apply(OPEN_PRINCIPAL, {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'TraceSource',
      metadata: { name: SOURCE },
      spec: {
        connector: 'langfuse',
        endpoint: proxy.url,
        credentials: { env: 'LANGFUSE_KEYS' },
        backfill: { since: '2h' },
        poll: { interval: '30s' },
        writeBack: { enabled: true },
        policies: ['tools'],
      },
    });
    // One scored trace, its write-back queued.
    fake.add(...agentRun(1, T0 - 20 * MIN, { error: true }));
    await app.sourceManager.tick();
    await app.engine.tick();
  });
  afterEach(async () => {
    expect(fake.violations).toEqual([]);
    await app.close();
    await dispose();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const status = async () =>
    (
      (await app.server.inject({ method: 'GET', url: `/v1alpha1/sources/${SOURCE}` })).json() as {
        status: SourceStatus;
      }
    ).status;
  const metric = async () => {
    const text = (await app.server.inject({ method: 'GET', url: '/metrics' })).body;
    const line = text
      .split('\n')
      .find((l) =>
        l.startsWith(
          `touchstone_source_write_back_dead_letters_total{project="default",source="${SOURCE}"}`,
        ),
      );
    return line === undefined ? 0 : Number(line.split(' ').at(-1));
  };

  it.each([
    [401, 'LANGFUSE_ACCESS_DENIED'],
    [403, 'LANGFUSE_ACCESS_DENIED'],
    [404, 'LANGFUSE_REQUEST_REFUSED'],
    [400, 'LANGFUSE_REQUEST_REFUSED'],
  ])('a %i dead-letters the row after one attempt', async (code, errorCode) => {
    proxy.fault = { status: code, body: '{"message":"refused"}' };
    const before = proxy.seen.length;
    expect(await app.writeBacks.tick()).toBe(0);
    const tried = proxy.seen.length - before;
    expect(tried).toBeGreaterThan(0);

    // Never sent again, however long the writer keeps going.
    for (const wait of [5_000, 60 * MIN, 24 * 60 * MIN]) {
      clock.advance(wait);
      await app.writeBacks.tick();
    }
    expect(proxy.seen.length - before).toBe(tried);
    expect(fake.scores.size).toBe(0);

    const s = await status();
    expect(s).toMatchObject({ deadLetters: 1, scored: 0 });
    expect(s.lastDeadLetters).toEqual([
      {
        traceId: TRACE,
        policy: 'tools',
        metric: 'tool-errors',
        code: errorCode,
        attempts: 1,
        message: expect.stringContaining(`answered ${code}`),
        at: new Date(T0).toISOString(),
      },
    ]);
    // The connector's message names the host; the redaction text rules apply to it.
    expect(s.lastDeadLetters?.[0]?.message).toMatch(/^Langfuse at \[REDACTED\]:\d+ /);
    expect(await metric()).toBe(1);
  });

  it('a 503 with Retry-After is retried no sooner, then written', async () => {
    proxy.fault = { status: 503, headers: { 'retry-after': '7' }, body: '' };
    await app.writeBacks.tick();
    const tried = proxy.seen.length;
    proxy.fault = undefined;
    clock.advance(6_000);
    await app.writeBacks.tick();
    expect(proxy.seen.length).toBe(tried);
    clock.advance(1_000);
    expect(await app.writeBacks.tick()).toBe(1);
    expect([...fake.scores.values()].map((s) => [s.traceId, s.name, s.value])).toEqual([
      [TRACE, 'tool-errors', 1],
    ]);
    expect(await status()).toMatchObject({ deadLetters: 0, scored: 1 });
    expect((await status()).lastDeadLetters).toBeUndefined();
    expect(await metric()).toBe(0);
  });

  it.each([
    [429, 'Too Many Requests'],
    [500, 'Internal Server Error'],
    [502, 'Bad Gateway'],
    // Langfuse answers 422 when a ClickHouse query hits its resource limits: transient.
    [422, 'Request timed out'],
  ])('a %i is retried with backoff (no Retry-After), then written', async (code, text) => {
    proxy.fault = { status: code, body: JSON.stringify({ message: text }) };
    await app.writeBacks.tick();
    await app.writeBacks.tick();
    proxy.fault = undefined;
    // The first retry is drawn below 5 s (full jitter).
    clock.advance(5_000);
    expect(await app.writeBacks.tick()).toBe(1);
    expect(fake.scores.size).toBe(1);
    expect(await status()).toMatchObject({ deadLetters: 0, scored: 1 });
  });

  it.runIf(variant.name === 'sqlite')(
    'touchstone source get shows the dead letters',
    async () => {
      proxy.fault = { status: 403, body: '{"message":"forbidden"}' };
      await app.writeBacks.tick();
      await app.close();
      const got = cli(['source', 'get', SOURCE, '--data-dir', dataDir]);
      expect(got.code, got.stderr).toBe(0);
      expect(JSON.parse(got.stdout).status).toMatchObject({
        deadLetters: 1,
        lastDeadLetters: [{ traceId: TRACE, code: 'LANGFUSE_ACCESS_DENIED', attempts: 1 }],
      });
    },
    60_000,
  );
});
