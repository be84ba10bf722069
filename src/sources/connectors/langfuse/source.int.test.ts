import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { agentRun, SAMPLE_TRACE_ID, sampleTrace } from '../../../../test/fakes/langfuse/samples.js';
import { LangfuseFake } from '../../../../test/fakes/langfuse/server.js';
import { type App, createApp } from '../../../app/index.js';
import { OPEN_PRINCIPAL } from '../../../auth/index.js';
import { loadConfig } from '../../../config/index.js';
import { FakeClock } from '../../../core/index.js';
import { normalizeStoredTrace, PulledTraceWriter } from '../../../ingest/index.js';
import { createHttpClient, type HttpClient } from '../../../net/index.js';
import { compileRedaction } from '../../../redaction/index.js';
import { SourceManager } from '../../manager.js';
import { compileOverrides } from '../../overrides.js';
import type { parseSource } from '../../resource.js';
import { SourceDirectory, WriteBackWriter } from '../../write-back.js';
import { findConnector } from '../index.js';
import { scoreId } from './ids.js';

/**
 * A Langfuse source end to end against the contract fake: the source manager pulls through the
 * connector built by the CONNECTORS manifest, stores traces, defers a running one, re-polls
 * without fetching or storing anything twice, and the write-back writer puts the policy's scores
 * on the traces in Langfuse, once per value.
 */

const T0 = Date.parse('2026-11-22T10:00:00Z');
const MIN = 60_000;

let fake: LangfuseFake;
let http: HttpClient;
let clock: FakeClock;
let app: App;
let dataDir: string;
let manager: SourceManager;
let writer: WriteBackWriter;

beforeAll(async () => {
  fake = await LangfuseFake.start();
  http = createHttpClient({ timeoutMs: 10_000 });
});
afterAll(async () => {
  await http.close();
  await fake.close();
});

beforeEach(async () => {
  fake.observations.length = 0;
  fake.scores.clear();
  fake.requests.length = 0;
  fake.violations.length = 0;
  clock = new FakeClock(T0);
  fake.now = () => clock.now();
  dataDir = mkdtempSync(join(tmpdir(), 'touchstone-langfuse-'));
  const config = loadConfig({
    overrides: { data_dir: dataDir, log_level: 'silent', sources: { allow_hosts: ['127.0.0.1'] } },
  });
  app = await createApp(config, {
    env: {},
    clock,
    processMetrics: false,
    logger: pino({ level: 'silent' }),
  });
  // What the app does: the manifest builds the connector, with the credential resolved.
  const connector = (source: ReturnType<typeof parseSource>) =>
    findConnector('langfuse', undefined)!.create(source, { http, credential: fake.credential });
  const pulled = new PulledTraceWriter({
    store: app.store,
    redactor: compileRedaction(config.traces.redaction),
    clock,
    normalize: normalizeStoredTrace,
  });
  manager = new SourceManager({
    store: app.store,
    clock,
    connector,
    write: (t, adjust) => pulled.write(t, adjust),
    overrides: (s) => compileOverrides(s, 'default'),
    options: { pageSize: 2, maxRecordsPerSecond: 1_000_000 },
    sleep: async () => undefined,
  });
  writer = new WriteBackWriter({
    store: app.store,
    clock,
    directory: new SourceDirectory({ store: app.store, clock }),
    connector,
  });
});
afterEach(async () => {
  expect(fake.violations).toEqual([]);
  await manager.shutdown();
  await app.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const applySource = (spec: Record<string, unknown> = {}) =>
  app.sources.apply(OPEN_PRINCIPAL, {
    apiVersion: 'touchstone.dev/v1alpha1',
    kind: 'TraceSource',
    metadata: { name: 'prod-langfuse' },
    spec: {
      connector: 'langfuse',
      endpoint: fake.url,
      locations: ['production'],
      backfill: { since: '2h' },
      poll: { interval: '30s' },
      traceLabels: { env: 'prod' },
      ...spec,
    },
  });

const traceFetches = () =>
  fake.requestsTo('/api/public/v2/observations').filter((r) => r.query.has('traceId'));

describe('a Langfuse source', () => {
  it('pulls the environment, defers a running trace, and re-polls without duplicates', async () => {
    fake.add(...agentRun(1, T0 - 90 * MIN));
    fake.add(...agentRun(2, T0 - 80 * MIN, { error: true }));
    fake.add(...agentRun(3, T0 - 70 * MIN));
    const running = agentRun(4, T0 - 40 * MIN, { running: true });
    fake.add(...running);
    fake.add(...agentRun(5, T0 - 60 * MIN, { environment: 'staging' }));
    await applySource();
    await manager.tick();

    const stored = await app.store.traces.list({ project: 'default' }, { pageSize: 50 });
    expect(stored.items.map((t) => t.traceId).sort()).toEqual(
      [1, 2, 3].map((i) => `${i.toString(16).padStart(8, '0')}${'ab'.repeat(12)}`),
    );
    expect(stored.items[0]?.labels).toMatchObject({ source: 'prod-langfuse', env: 'prod' });
    const failed = await app.store.traces.get('default', `00000002${'ab'.repeat(12)}`);
    expect(failed?.record.trajectory?.find((s) => s.type === 'tool')?.error).toBe(
      'lookup failed: timeout',
    );
    expect(traceFetches()).toHaveLength(3);
    const view = await app.sources.get(OPEN_PRINCIPAL, undefined, 'prod-langfuse');
    expect(view.status).toMatchObject({ pulled: 3, deferred: 1 });

    // The next poll reads the look-back again: nothing unchanged is fetched or stored twice.
    clock.advance(31_000);
    await manager.tick();
    expect(traceFetches()).toHaveLength(3);
    expect(
      (await app.store.traces.list({ project: 'default' }, { pageSize: 50 })).items,
    ).toHaveLength(3);

    // The running trace ends: it is fetched and stored once.
    (running[0] as { endTime?: string | null }).endTime = new Date(T0 - 39 * MIN).toISOString();
    clock.advance(31_000);
    await manager.tick();
    expect(traceFetches().map((r) => r.query.get('traceId'))).toEqual([
      `00000001${'ab'.repeat(12)}`,
      `00000002${'ab'.repeat(12)}`,
      `00000003${'ab'.repeat(12)}`,
      `00000004${'ab'.repeat(12)}`,
    ]);
    clock.advance(31_000);
    await manager.tick();
    expect(traceFetches()).toHaveLength(4);
    expect(
      (await app.store.traces.list({ project: 'default' }, { pageSize: 50 })).items,
    ).toHaveLength(4);
  });

  it('writes the policy scores back onto the traces, once per value', async () => {
    await app.policies.apply(OPEN_PRINCIPAL, {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name: 'tools' },
      spec: { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] },
    });
    fake.add(...agentRun(1, T0 - 20 * MIN, { error: true }));
    fake.add(...sampleTrace(T0 - 10 * MIN));
    await applySource({ locations: [], writeBack: { enabled: true }, policies: ['tools'] });
    await manager.tick();
    await app.engine.tick();
    await writer.tick();

    const scores = [...fake.scores.values()].sort((a, b) =>
      (a.traceId ?? '').localeCompare(b.traceId ?? ''),
    );
    expect(scores.map((s) => [s.traceId, s.name, s.dataType, s.value, s.environment])).toEqual([
      [`00000001${'ab'.repeat(12)}`, 'tool-errors', 'NUMERIC', 1, 'production'],
      [SAMPLE_TRACE_ID, 'tool-errors', 'NUMERIC', 0, 'default'],
    ]);
    expect(scores[1]).toMatchObject({
      id: scoreId({ traceId: SAMPLE_TRACE_ID, policy: 'tools', metric: 'tool-errors' }),
      source: 'API',
      metadata: { source: 'touchstone', policy: 'tools', evaluator: 'code' },
    });
    expect(
      (await app.sources.get(OPEN_PRINCIPAL, undefined, 'prod-langfuse')).status,
    ).toMatchObject({ scored: 2 });

    // Rescored with the same values: nothing is written again.
    const posts = fake.requestsTo('/api/public/scores').length;
    await app.policies.rescore(
      OPEN_PRINCIPAL,
      undefined,
      'tools',
      new Date(T0 - 60 * MIN).toISOString(),
    );
    await app.engine.tick();
    await writer.tick();
    expect(fake.requestsTo('/api/public/scores')).toHaveLength(posts);
    expect(fake.scores.size).toBe(2);
  });
});
