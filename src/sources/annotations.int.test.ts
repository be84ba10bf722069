import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { agentRun } from '../../test/fakes/langfuse/samples.js';
import { LangfuseFake } from '../../test/fakes/langfuse/server.js';
import { storeVariants } from '../../test/support/stores.js';
import { type App, createApp } from '../app/index.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { loadConfig } from '../config/index.js';
import { FakeClock } from '../core/index.js';

/**
 * People's annotations of a pulled trace, written back to Langfuse (the contract fake, which
 * checks scores against their score configs as Langfuse does): each annotation is one score of
 * source ANNOTATION under a score config of its name and data type, found or created, with a new
 * label added to a categorical config; annotating again updates the same score; a name Langfuse
 * cannot take for a config is dead-lettered with a message saying why.
 */

const T0 = Date.parse('2026-11-22T10:00:00Z');
const MIN = 60_000;
const SOURCE = 'prod-langfuse';
const TRACE = `00000001${'ab'.repeat(12)}`;

let fake: LangfuseFake;

beforeAll(async () => {
  fake = await LangfuseFake.start();
});
afterAll(async () => fake.close());

describe.each(storeVariants())('annotation write-back to Langfuse on $name', (variant) => {
  let clock: FakeClock;
  let app: App;
  let dataDir: string;
  let dispose: () => Promise<void>;
  let traceId = '';

  beforeEach(async () => {
    fake.observations.length = 0;
    fake.scores.clear();
    fake.scoreConfigs.configs.clear();
    fake.violations.length = 0;
    clock = new FakeClock(T0);
    fake.now = () => clock.now();
    dataDir = mkdtempSync(join(tmpdir(), 'touchstone-annotation-write-back-'));
    const store = await variant.open();
    dispose = store.dispose;
    const config = loadConfig({
      overrides: {
        data_dir: dataDir,
        log_level: 'silent',
        sources: { allow_hosts: ['127.0.0.1'] },
        credentials: { grants: [{ env: 'LANGFUSE_KEYS', projects: ['*'] }] },
        ...store.overrides,
      },
    });
    app = await createApp(config, {
      env: { LANGFUSE_KEYS: fake.credential },
      clock,
      processMetrics: false,
      logger: pino({ level: 'silent' }),
    });
    await app.sources.apply(OPEN_PRINCIPAL, {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'TraceSource',
      metadata: { name: SOURCE },
      spec: {
        connector: 'langfuse',
        endpoint: fake.url,
        credentials: { env: 'LANGFUSE_KEYS' },
        backfill: { since: '2h' },
        poll: { interval: '30s' },
        writeBack: { enabled: true },
      },
    });
    fake.add(...agentRun(1, T0 - 20 * MIN));
    await app.sourceManager.tick();
    const listed = await app.server.inject({ method: 'GET', url: '/v1alpha1/traces' });
    traceId = listed.json().traces[0].traceId;
  });
  afterEach(async () => {
    expect(fake.violations).toEqual([]);
    await app.close();
    await dispose();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const annotate = async (body: Record<string, unknown>) => {
    const res = await app.server.inject({
      method: 'POST',
      url: `/v1alpha1/traces/${traceId}/annotations`,
      payload: body,
    });
    expect(res.statusCode, res.body).toBe(200);
  };
  const annotations = () => [...fake.scores.values()].filter((s) => s.source === 'ANNOTATION');

  it('writes each annotation as an ANNOTATION score under a config of its name and type', async () => {
    await annotate({ name: 'tone', label: 'friendly', comment: 'warm and brief' });
    await annotate({ name: 'correct', value: 0.75 });
    await annotate({ name: 'grounded', passed: false });
    expect(await app.writeBacks.tick()).toBe(3);
    const configOf = (name: string) =>
      [...fake.scoreConfigs.configs.values()].find((c) => c.name === name);
    expect(configOf('tone')).toMatchObject({
      dataType: 'CATEGORICAL',
      categories: [{ label: 'friendly', value: 0 }],
    });
    expect(configOf('correct')).toMatchObject({ dataType: 'NUMERIC', minValue: 0, maxValue: 1 });
    expect(configOf('grounded')).toMatchObject({ dataType: 'BOOLEAN' });
    const byName = Object.fromEntries(annotations().map((s) => [s.name, s]));
    expect(byName.tone).toMatchObject({
      traceId: TRACE,
      dataType: 'CATEGORICAL',
      value: 'friendly',
      comment: 'warm and brief',
      configId: configOf('tone')?.id,
      metadata: {
        source: 'touchstone',
        policy: '@human/anonymous',
        evaluator: 'human',
        annotator: 'anonymous',
      },
    });
    expect(byName.correct).toMatchObject({ dataType: 'NUMERIC', value: 0.75 });
    expect(byName.grounded).toMatchObject({ dataType: 'BOOLEAN', value: 0 });

    // Another label: added to the config's categories; the same score is updated, no new one.
    const toneId = byName.tone?.id;
    await annotate({ name: 'tone', label: 'curt' });
    expect(await app.writeBacks.tick()).toBe(1);
    expect(configOf('tone')?.categories).toEqual([
      { label: 'friendly', value: 0 },
      { label: 'curt', value: 1 },
    ]);
    expect(annotations()).toHaveLength(3);
    expect(fake.scores.get(toneId as string)).toMatchObject({ value: 'curt', writes: 2 });
    expect(fake.scoreConfigs.configs.size).toBe(3);
  });

  it('leaves a config of the same name and another type alone and makes its own beside it', async () => {
    const theirs = fake.scoreConfigs.create({
      name: 'correct',
      dataType: 'CATEGORICAL',
      categories: [{ label: 'yes', value: 1 }],
    });
    await annotate({ name: 'correct', passed: true });
    expect(await app.writeBacks.tick()).toBe(1);
    const [score] = annotations();
    expect(score).toMatchObject({ name: 'correct', dataType: 'BOOLEAN', value: 1 });
    expect(score?.configId).not.toBe((theirs as { id: string }).id);
  });

  it('dead-letters an annotation whose name is too long for a Langfuse score config', async () => {
    await annotate({ name: 'n'.repeat(36), value: 1 });
    expect(await app.writeBacks.tick()).toBe(0);
    expect(annotations()).toEqual([]);
    const status = (
      await app.server.inject({ method: 'GET', url: `/v1alpha1/sources/${SOURCE}` })
    ).json().status;
    expect(status.lastDeadLetters).toEqual([
      expect.objectContaining({
        policy: '@human/anonymous',
        code: 'LANGFUSE_REQUEST_REFUSED',
        message: expect.stringContaining('at most 35'),
      }),
    ]);
  });
});
