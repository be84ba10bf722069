import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
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
 * sinks are checked at apply as a source's connection is.
 */

const T0 = Date.parse('2026-11-22T10:00:00Z');
const MIN = 60_000;

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
    const config = loadConfig({
      overrides: {
        data_dir: dataDir,
        log_level: 'silent',
        traces: { completion_grace: '2s' },
        sources: { allow_hosts: ['127.0.0.1'] },
        credentials: { grants: [{ env: 'LANGFUSE_KEYS', projects: ['default'] }] },
      },
    });
    app = await createApp(config, {
      env: { LANGFUSE_KEYS: fake.credential, OTHER_KEYS: fake.credential },
      clock,
      processMetrics: false,
      logger: pino({ level: 'silent' }),
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
    let traceId = '';
    const spans = recordSpans({ 'service.name': 'agent' }, (tracer) => {
      traceId = agentTrace(tracer, { fail: true });
    });
    const res = await app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: jsonBody(spans),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(200);
    // The same trace in Langfuse: the OpenTelemetry trace id is Langfuse's trace id.
    fake.add(...agentRun(9, T0 - MIN).map((o) => ({ ...o, traceId })));
    return traceId;
  }

  async function settle(): Promise<void> {
    clock.advance(2500);
    await app.completer.tick();
    await app.engine.tick();
    await app.writeBacks.tick();
  }

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
