import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DatabricksFake } from '../../test/fakes/databricks/server.js';
import { agentRun } from '../../test/fakes/langfuse/samples.js';
import { LangfuseFake } from '../../test/fakes/langfuse/server.js';
import { agentTrace, jsonBody, recordSpans } from '../../test/support/otel.js';
import { type App, createApp } from '../app/index.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { loadConfig } from '../config/index.js';
import { FakeClock, isTouchstoneError } from '../core/index.js';

/**
 * The `trace_feedback` sink against the Langfuse contract fake: a policy's scores of a pushed
 * trace (OTLP) land on the same trace in Langfuse, once per value (the write-back ledger), through
 * the app's own engine, queue and writer; a trace a source pulled is never written by a sink;
 * sinks are checked at apply as a source's connection is. Against the Databricks fake (MLflow on
 * Unity Catalog, whose trace ids are not `tr-<trace id>`): MLflow's own `mlflow.traceRequestId`
 * addresses the trace, and a trace the store does not hold is waited for, then skipped.
 */

const T0 = Date.parse('2026-11-22T10:00:00Z');
const MIN = 60_000;

/** An app with a short completion grace whose sources may reach the fakes on 127.0.0.1. */
function sinkApp(clock: FakeClock, dataDir: string, env: Record<string, string>): Promise<App> {
  const config = loadConfig({
    overrides: {
      data_dir: dataDir,
      log_level: 'silent',
      traces: { completion_grace: '2s' },
      sources: { allow_hosts: ['127.0.0.1'] },
      credentials: { grants: [{ env: Object.keys(env)[0] as string, projects: ['default'] }] },
    },
  });
  return createApp(config, {
    env,
    clock,
    processMetrics: false,
    logger: pino({ level: 'silent' }),
  });
}

/**
 * Pushes one agent trace (a failing tool call) over OTLP/JSON; `attributes`, made from its trace
 * id, go on its root span, or on every other span with `on: 'children'`. Returns the trace id.
 */
async function pushTrace(
  app: App,
  attributes: (traceId: string) => Record<string, string> = () => ({}),
  on: 'root' | 'children' = 'root',
): Promise<string> {
  let traceId = '';
  const spans = recordSpans({ 'service.name': 'agent' }, (tracer) => {
    traceId = agentTrace(tracer, { fail: true });
  });
  for (const span of spans) {
    const isRoot = span.parentSpanContext === undefined;
    if (isRoot === (on === 'root')) Object.assign(span.attributes, attributes(traceId));
  }
  const res = await app.server.inject({
    method: 'POST',
    url: '/v1/traces',
    payload: jsonBody(spans),
    headers: { 'content-type': 'application/json' },
  });
  expect(res.statusCode).toBe(200);
  return traceId;
}

/** Completes the pushed trace, scores it, and runs the writer once. */
async function scoreAndWrite(app: App, clock: FakeClock): Promise<void> {
  clock.advance(2500);
  await app.completer.tick();
  await app.engine.tick();
  await app.writeBacks.tick();
}

let fake: LangfuseFake;

beforeAll(async () => {
  fake = await LangfuseFake.start();
});
afterAll(async () => {
  await fake.close();
});

describe('the trace_feedback sink, Langfuse', () => {
  let clock: FakeClock;
  let app: App;
  let dataDir: string;

  beforeEach(async () => {
    fake.observations.length = 0;
    fake.scores.clear();
    fake.violations.length = 0;
    clock = new FakeClock(T0);
    fake.now = () => clock.now();
    dataDir = mkdtempSync(join(tmpdir(), 'touchstone-feedback-'));
    app = await sinkApp(clock, dataDir, {
      LANGFUSE_KEYS: fake.credential,
      OTHER_KEYS: fake.credential,
    });
  });
  afterEach(async () => {
    expect(fake.violations).toEqual([]);
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const sink = (extra: Record<string, unknown> = {}) => ({
    type: 'trace_feedback',
    connector: 'langfuse',
    endpoint: fake.url,
    credentials: { env: 'LANGFUSE_KEYS' },
    ...extra,
  });
  const applyPolicy = (sinks: unknown[]) =>
    app.policies.apply(OPEN_PRINCIPAL, {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name: 'tools' },
      spec: { stages: [{ evaluators: [{ ref: 'tool-errors' }] }], sinks },
    });

  /** One agent trace (a failing tool call) over OTLP/JSON, also exported to Langfuse. */
  async function push(): Promise<string> {
    const traceId = await pushTrace(app);
    // The same trace in Langfuse: the OpenTelemetry trace id is Langfuse's trace id.
    fake.add(...agentRun(9, T0 - MIN).map((o) => ({ ...o, traceId })));
    return traceId;
  }

  const settle = () => scoreAndWrite(app, clock);

  it("writes a pushed trace's scores to the trace in Langfuse, once per value", async () => {
    await applyPolicy([sink()]);
    const traceId = await push();
    await settle();
    const written = [...fake.scores.values()];
    expect(written).toEqual([
      expect.objectContaining({
        traceId,
        name: 'tool-errors',
        value: 1,
        comment: '1 of 1 tool calls failed: get_weather',
        source: 'API',
        dataType: 'NUMERIC',
      }),
    ]);
    // Scored again with the same value (a rescore): the ledger skips it.
    await app.policies.rescore(
      OPEN_PRINCIPAL,
      undefined,
      'tools',
      new Date(T0 - 60 * MIN).toISOString(),
    );
    await settle();
    expect([...fake.scores.values()].map((s) => s.writes)).toEqual([1]);
  });

  it('writes at once the scores of a trace Langfuse does not hold yet: it does not check', async () => {
    await applyPolicy([sink()]);
    const traceId = await pushTrace(app);
    await settle();
    expect([...fake.scores.values()].map((s) => [s.traceId, s.name])).toEqual([
      [traceId, 'tool-errors'],
    ]);
    expect(await app.store.sources.deadLetters('default', '@sink/tools/0', 10)).toEqual([]);
  });

  it('never writes the scores of a trace a source pulled', async () => {
    await applyPolicy([sink()]);
    await app.sources.apply(OPEN_PRINCIPAL, {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'TraceSource',
      metadata: { name: 'pulled' },
      spec: {
        connector: 'langfuse',
        endpoint: fake.url,
        credentials: { env: 'LANGFUSE_KEYS' },
        backfill: { since: '2h' },
        policies: ['tools'],
      },
    });
    fake.add(...agentRun(1, T0 - 20 * MIN, { error: true }));
    await app.sourceManager.tick();
    await app.engine.tick();
    await app.writeBacks.tick();
    const scored = await app.server.inject({ url: '/v1alpha1/scores' });
    expect(JSON.stringify(scored.json())).toContain('tool-errors');
    expect([...fake.scores.values()]).toEqual([]);
  });

  it('checks sinks at apply as a source connection is, naming the field', async () => {
    const cases: [Record<string, unknown>, string, string][] = [
      [{ connector: 'nope' }, 'SOURCE_INVALID', 'spec.sinks[0].connector'],
      [{ endpoint: 'http://10.1.2.3:3000' }, 'SOURCE_ENDPOINT_REFUSED', 'spec.sinks[0].endpoint'],
      [{ credentials: { env: 'OTHER_KEYS' } }, 'CREDENTIAL_NOT_GRANTED', ''],
      [{ locations: ['a', 'b'] }, 'SOURCE_INVALID', 'spec.sinks[0].locations'],
      [{ type: 'webhook' }, 'POLICY_INVALID', 'spec.sinks[0].type'],
    ];
    for (const [extra, code, path] of cases) {
      let caught: unknown;
      try {
        await applyPolicy([sink(extra)]);
      } catch (err) {
        caught = err;
      }
      if (!isTouchstoneError(caught)) throw new Error(`accepted: ${JSON.stringify(extra)}`);
      expect({ extra, code: caught.code }).toEqual({ extra, code });
      if (path !== '') expect(caught.details.map((d) => d.path)).toContain(path);
    }
  });
});

describe('the trace_feedback sink, MLflow on Databricks (Unity Catalog)', () => {
  const SCHEMA = 'main.agents';
  let clock: FakeClock;
  let app: App;
  let dataDir: string;
  let workspace: DatabricksFake;

  beforeEach(async () => {
    clock = new FakeClock(T0);
    dataDir = mkdtempSync(join(tmpdir(), 'touchstone-feedback-uc-'));
    workspace = await DatabricksFake.start({ now: () => clock.now() });
    app = await sinkApp(clock, dataDir, { DATABRICKS_TOKEN: workspace.pat });
    await app.policies.apply(OPEN_PRINCIPAL, {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name: 'tools' },
      spec: {
        stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
        sinks: [
          {
            type: 'trace_feedback',
            connector: 'mlflow',
            variant: 'databricks',
            endpoint: workspace.url,
            locations: [SCHEMA],
            credentials: { env: 'DATABRICKS_TOKEN' },
            auth: { databricks: { sqlWarehouseId: workspace.sqlWarehouseId } },
          },
        ],
      },
    });
  });
  afterEach(async () => {
    await app.close();
    expect(workspace.violations).toEqual([]);
    await workspace.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  /**
   * A trace logged by MLflow's instrumentation: its spans name MLflow's id, JSON-quoted (the root
   * span, or with `on: 'children'` the spans under a root span of other instrumentation).
   */
  const mlflowTraced = (on: 'root' | 'children' = 'root') =>
    pushTrace(
      app,
      (traceId) => ({
        'mlflow.traceRequestId': JSON.stringify(`trace:/${SCHEMA}/${traceId}`),
        ...(on === 'root' ? { 'mlflow.spanType': '"AGENT"' } : {}),
      }),
      on,
    );
  /** The store's copy of a pushed trace, under MLflow's own id. */
  const inStore = (traceId: string) =>
    workspace.store.add(SCHEMA, T0 - MIN, {
      hex: traceId,
      traceId: `trace:/${SCHEMA}/${traceId}`,
    });
  const infoReads = () => workspace.seen.filter((s) => s.endsWith('/info')).length;
  const skippedMetric = async () => {
    const text = (await app.server.inject({ url: '/metrics' })).body;
    return /touchstone_source_scores_skipped_total\{[^}]*reason="trace_not_in_store"[^}]*\} (\d+)/.exec(
      text,
    )?.[1];
  };

  it("writes to the trace MLflow's own mlflow.traceRequestId names", async () => {
    const traceId = await mlflowTraced();
    const stored = inStore(traceId);
    await scoreAndWrite(app, clock);
    expect(stored.assessments).toEqual([
      expect.objectContaining({
        assessment_name: 'tool-errors',
        trace_id: `trace:/${SCHEMA}/${traceId}`,
        source: { source_type: 'CODE', source_id: 'touchstone/tools' },
        feedback: { value: 1 },
      }),
    ]);
  });

  it('finds that id on spans under a root span that does not carry it', async () => {
    const traceId = await mlflowTraced('children');
    const stored = inStore(traceId);
    await scoreAndWrite(app, clock);
    expect(stored.assessments.map((a) => [a.trace_id, a.assessment_name])).toEqual([
      [`trace:/${SCHEMA}/${traceId}`, 'tool-errors'],
    ]);
  });

  it('waits for a trace that reaches the store after it was scored', async () => {
    const traceId = await mlflowTraced();
    await scoreAndWrite(app, clock);
    expect(infoReads()).toBe(1);
    // Not a dead letter: looked for again within half a minute.
    expect(await app.store.sources.deadLetters('default', '@sink/tools/0', 10)).toEqual([]);
    const stored = inStore(traceId);
    clock.advance(30_000);
    await app.writeBacks.tick();
    expect(stored.assessments.map((a) => a.assessment_name)).toEqual(['tool-errors']);
  });

  it('skips a trace the store never receives after 10 minutes: counted, not a dead letter', async () => {
    await mlflowTraced();
    await scoreAndWrite(app, clock);
    for (let m = 0; m < 12; m++) {
      clock.advance(MIN);
      await app.writeBacks.tick();
    }
    const reads = infoReads();
    expect(reads).toBeGreaterThan(2);
    expect(reads).toBeLessThan(12);
    expect(await skippedMetric()).toBe('1');
    expect(await app.store.sources.deadLetters('default', '@sink/tools/0', 10)).toEqual([]);
    // Out of the queue: never tried again.
    clock.advance(60 * MIN);
    await app.writeBacks.tick();
    expect(infoReads()).toBe(reads);
  });
});
