import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { context, trace } from '@opentelemetry/api';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { agentTrace, jsonBody, recordSpans } from '../../test/support/otel.js';
import { storeVariants } from '../../test/support/stores.js';
import { type App, createApp } from '../app/index.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { loadConfig } from '../config/index.js';
import { FakeClock } from '../core/index.js';
import { completion, FakeOpenAi } from '../evaluators/judge/fake-openai.testkit.js';
import { WebhookOutbox } from '../webhooks/index.js';
import { TestReceiver } from '../webhooks/receiver.testkit.js';
import { PolicyEngine } from './engine.js';

/**
 * The online engine end to end inside one app (SQLite, and PostgreSQL when configured): OTLP in,
 * completion, work items, policies, results, windows, alerts and their outbox rows, the scores
 * API. Time is a FakeClock; the completer, engine and dispatcher are driven by `tick()`.
 */

function policy(name: string, spec: Record<string, unknown>) {
  return {
    apiVersion: 'touchstone.dev/v1alpha1',
    kind: 'OnlineEvalPolicy',
    metadata: { name },
    spec,
  };
}

describe.each(storeVariants())('online engine on $name', (variant) => {
  const clock = new FakeClock(Date.parse('2026-11-22T10:00:00Z'));
  const judge = new FakeOpenAi();
  let hooks: TestReceiver;
  let app: App;
  let dataDir: string;
  let dispose: () => Promise<void>;
  const logLines: string[] = [];

  beforeAll(async () => {
    await judge.start();
    hooks = await TestReceiver.start(() => clock.now());
  });
  afterAll(async () => {
    await judge.stop();
    await hooks.close();
  });

  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'touchstone-online-'));
    const store = await variant.open();
    dispose = store.dispose;
    const config = loadConfig({
      overrides: {
        data_dir: dataDir,
        log_level: 'silent',
        traces: { completion_grace: '2s' },
        webhooks: { allow_hosts: ['127.0.0.1'] },
        judges: { fake: { endpoint: judge.endpoint, model: 'judge-model', max_retries: 0 } },
        default_judge: 'fake',
        ...store.overrides,
      },
    });
    logLines.length = 0;
    app = await createApp(config, {
      env: {},
      clock,
      processMetrics: false,
      logger: pino({ level: 'warn' }, { write: (line: string) => logLines.push(line) }),
    });
    judge.reset();
    hooks.received.length = 0;
  });
  afterEach(async () => {
    await app.close();
    await dispose();
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** Sends one agent trace over OTLP/JSON; returns its id. */
  async function send(
    service: string,
    opts: { fail?: boolean; labels?: Record<string, string>; input?: string } = {},
  ): Promise<string> {
    let traceId = '';
    const resource: Record<string, string> = { 'service.name': service };
    for (const [k, v] of Object.entries(opts.labels ?? {})) resource[`touchstone.label.${k}`] = v;
    const spans = recordSpans(resource, (tr) => {
      traceId = agentTrace(tr, {
        fail: opts.fail === true,
        extra: {
          'input.value': opts.input ?? 'Weather in Paris?',
          'output.value': 'Sunny, 21 °C.',
        },
      });
    });
    await post(spans);
    return traceId;
  }

  async function post(spans: ReturnType<typeof recordSpans>): Promise<void> {
    const res = await app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: jsonBody(spans),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(200);
  }

  /** Completes due traces and scores the queue. */
  async function settle(): Promise<void> {
    clock.advance(2500);
    await app.completer.tick();
    await app.engine.tick();
  }

  const apply = (name: string, spec: Record<string, unknown>) =>
    app.policies.apply(OPEN_PRINCIPAL, policy(name, spec));

  async function scoresOf(traceId: string) {
    const res = await app.server.inject({ url: `/v1alpha1/traces/${traceId}/scores` });
    expect(res.statusCode).toBe(200);
    return res.json() as {
      results: Record<
        string,
        {
          evaluator: string;
          outcome: string;
          reason?: string;
          scores: { name: string; value?: number }[];
        }[]
      >;
    };
  }

  async function metric(name: string): Promise<string[]> {
    const text = (await app.server.inject({ url: '/metrics' })).body;
    return text.split('\n').filter((l) => l.startsWith(name));
  }

  it('scores a trace with every policy that selects it; a failing selector selects nothing and is counted', async () => {
    await apply('weather', {
      selector: 'service == "weather"',
      stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
    });
    await apply('other', {
      selector: 'service == "billing"',
      stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
    });
    await apply('broken', {
      selector: 'labels["missing"] == "x"',
      stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
    });
    const id = await send('weather', { fail: true });
    await settle();
    const scores = await scoresOf(id);
    expect(Object.keys(scores.results)).toEqual(['weather']);
    expect(scores.results.weather).toEqual([
      expect.objectContaining({
        evaluator: 'tool-errors',
        outcome: 'OUTCOME_SCORED',
        scores: [expect.objectContaining({ name: 'tool-errors', value: 1 })],
      }),
    ]);
    expect(await metric('touchstone_policy_expression_errors_total')).toEqual([
      'touchstone_policy_expression_errors_total{project="default",policy="broken",field="selector",reason="error"} 1',
    ]);
    expect(await metric('touchstone_policy_traces_scored_total')).toEqual([
      'touchstone_policy_traces_scored_total{project="default",policy="weather"} 1',
    ]);
  });

  it('a selector that runs out of its cost budget selects nothing, is counted and logged without trace content', async () => {
    // Accepted at apply (12 comparisons per tool call of a trace of the assumed 1,000 tool calls
    // fit the budget), but over budget on a trace of 4,000 tool calls.
    const names = Array.from({ length: 12 }, (_, i) => `t == "refund-${i}"`).join(' || ');
    await apply('many-tools', {
      selector: `tools.exists(t, ${names})`,
      stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
    });
    await apply('all', { stages: [{ evaluators: [{ ref: 'step-budget' }] }] });
    let traceId = '';
    const spans = recordSpans({ 'service.name': 'weather' }, (tr) => {
      tr.startActiveSpan('invoke_agent secret-plan', (root) => {
        traceId = root.spanContext().traceId;
        const parent = trace.setSpan(context.active(), root);
        for (let i = 0; i < 4000; i++) {
          const name = `secret-tool-${i}`;
          tr.startSpan(
            `execute_tool ${name}`,
            { attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': name } },
            parent,
          ).end();
        }
        root.end();
      });
    });
    await post(spans);
    await settle();
    expect(Object.keys((await scoresOf(traceId)).results)).toEqual(['all']);
    expect(await metric('touchstone_policy_expression_errors_total')).toEqual([
      'touchstone_policy_expression_errors_total{project="default",policy="many-tools",field="selector",reason="cost"} 1',
    ]);
    const warned = logLines.filter((l) => l.includes('cost budget'));
    expect(warned).toHaveLength(1);
    expect(JSON.parse(warned[0] as string)).toMatchObject({
      policy: 'many-tools',
      field: 'selector',
      reason: 'cost',
    });
    expect(warned[0]).not.toContain('secret');
  });

  it('scores each trace version once per policy, and again when late spans change it', async () => {
    await apply('p', {
      stages: [{ evaluators: [{ ref: 'tool-errors' }, { ref: 'step-budget' }] }],
    });
    const id = await send('weather');
    await settle();
    await settle();
    const first = await scoresOf(id);
    expect(first.results.p?.map((r) => r.outcome)).toEqual(['OUTCOME_SCORED', 'OUTCOME_SCORED']);
    const rows = await app.store.results.forTrace('default', id);
    expect(rows?.policies).toHaveLength(1);
    expect(await metric('touchstone_policy_traces_scored_total')).toEqual([
      'touchstone_policy_traces_scored_total{project="default",policy="p"} 1',
    ]);

    // A late failing tool span: a new digest, scored again; the entry shows the newest results.
    const before = (await app.store.traces.get('default', id))?.trace.digest;
    const root = (await app.store.traces.spans('default', id)).find((s) => s.parentSpanId === '');
    const at = `${BigInt(clock.now()) * 1_000_000n}`;
    const late = {
      resourceSpans: [
        {
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'weather' } }] },
          scopeSpans: [
            {
              spans: [
                {
                  traceId: id,
                  spanId: '00000000000000aa',
                  parentSpanId: root?.spanId,
                  name: 'execute_tool late_tool',
                  kind: 1,
                  startTimeUnixNano: at,
                  endTimeUnixNano: at,
                  attributes: [
                    { key: 'gen_ai.operation.name', value: { stringValue: 'execute_tool' } },
                    { key: 'gen_ai.tool.name', value: { stringValue: 'late_tool' } },
                  ],
                  status: { code: 2, message: 'timeout' },
                },
              ],
            },
          ],
        },
      ],
    };
    const res = await app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: late,
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(200);
    await settle();
    expect((await app.store.traces.get('default', id))?.trace.digest).not.toBe(before);
    const second = await scoresOf(id);
    expect(second.results.p?.[0]?.scores).toEqual([
      expect.objectContaining({ name: 'tool-errors', value: 0.5 }),
    ]);
    expect(await metric('touchstone_policy_traces_scored_total')).toEqual([
      'touchstone_policy_traces_scored_total{project="default",policy="p"} 2',
    ]);
    expect(await app.store.work.stats()).toEqual({ depth: 0 });
  });

  it('queues nothing for a project without policies; a policy applied later scores the traces completed after it', async () => {
    const before = await send('weather');
    clock.advance(2500);
    await app.completer.tick();
    expect(await app.store.traces.get('default', before)).toBeDefined();
    expect(await app.store.work.stats()).toEqual({ depth: 0 });

    await apply('p', { stages: [{ evaluators: [{ ref: 'step-budget' }] }] });
    const after = await send('weather');
    clock.advance(2500);
    await app.completer.tick();
    expect(await app.store.work.stats()).toMatchObject({ depth: 1 });
    await app.engine.tick();
    expect((await scoresOf(after)).results.p?.map((r) => r.outcome)).toEqual(['OUTCOME_SCORED']);
    expect((await scoresOf(before)).results).toEqual({});
  });

  it('samples deterministically per (trace, policy); `always: [error]` bypasses sampling', async () => {
    await apply('half', {
      sampling: { rate: 0.5, always: ['error'] },
      stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
    });
    const ok: string[] = [];
    for (let i = 0; i < 40; i++) ok.push(await send('weather'));
    const failed: string[] = [];
    for (let i = 0; i < 5; i++) failed.push(await send('weather', { fail: true }));
    await settle();
    const { samplePoint } = await import('./engine.js');
    for (const id of ok) {
      const scored = (await scoresOf(id)).results.half !== undefined;
      expect(scored).toBe(samplePoint(id, 'half') < 0.5);
    }
    for (const id of failed) expect((await scoresOf(id)).results.half).toBeDefined();
  });

  it('runs a judge stage only when the cheap stage passed (cascade); skipped evaluators say why', async () => {
    judge.setDefault(completion('{"reasoning":"fine","score":5}'));
    await apply('cascade', {
      stages: [
        { evaluators: [{ ref: 'tool-errors' }] },
        {
          when: 'scores["tool-errors"] == 0.0',
          evaluators: [{ ref: 'llm-judge', name: 'quality', params: { rubric: 'helpfulness' } }],
        },
      ],
    });
    const good = await send('weather');
    const bad = await send('weather', { fail: true });
    await settle();
    expect(judge.requests).toHaveLength(1);
    const goodResults = (await scoresOf(good)).results.cascade ?? [];
    expect(goodResults.map((r) => [r.evaluator, r.outcome])).toEqual([
      ['tool-errors', 'OUTCOME_SCORED'],
      ['quality', 'OUTCOME_SCORED'],
    ]);
    const badResults = (await scoresOf(bad)).results.cascade ?? [];
    expect(badResults.map((r) => [r.evaluator, r.outcome, r.reason])).toEqual([
      ['tool-errors', 'OUTCOME_SCORED', undefined],
      ['quality', 'OUTCOME_SKIPPED', 'stage 1 condition is false'],
    ]);
  });

  it('delays (does not fail) a trace whose judge is rate limited, then scores it', async () => {
    judge.reply({ status: 429, headers: { 'retry-after': '1' }, body: { error: 'slow down' } });
    await apply('judged', {
      stages: [{ evaluators: [{ ref: 'llm-judge', params: { rubric: 'helpfulness' } }] }],
    });
    const id = await send('weather');
    await settle();
    expect((await scoresOf(id)).results.judged).toBeUndefined();
    expect(await app.store.work.stats()).toMatchObject({ depth: 1 });
    expect(await metric('touchstone_online_postponed_total')).toEqual([
      'touchstone_online_postponed_total{reason="rate_limited"} 1',
    ]);
    clock.advance(6000);
    await app.engine.tick();
    expect((await scoresOf(id)).results.judged?.[0]?.outcome).toBe('OUTCOME_SCORED');
    expect(await app.store.work.stats()).toEqual({ depth: 0 });
  });

  it('skips judge stages with reason `budget` once the daily judge-token budget is spent', async () => {
    judge.setDefault(
      completion('{"reasoning":"fine","score":4}', { prompt_tokens: 60, completion_tokens: 40 }),
    );
    await apply('thrifty', {
      dailyJudgeTokens: 150,
      stages: [{ evaluators: [{ ref: 'llm-judge', params: { rubric: 'helpfulness' } }] }],
    });
    // One trace per pass, so each judge call is counted before the next trace is looked at.
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      // Distinct questions: a cached verdict spends no tokens.
      ids.push(await send('weather', { input: `Weather in city ${i}?` }));
      await settle();
    }
    const outcomes = [];
    for (const id of ids) outcomes.push((await scoresOf(id)).results.thrifty?.[0]);
    expect(outcomes.map((r) => r?.outcome)).toEqual([
      'OUTCOME_SCORED',
      'OUTCOME_SCORED',
      'OUTCOME_SKIPPED',
    ]);
    expect(outcomes[2]?.reason).toBe('budget');
  });

  it('fires an alert when the window mean drops below the threshold and resolves it when it rises back', async () => {
    const hook = await app.webhooks.service.apply(OPEN_PRINCIPAL, { name: 'ops', url: hooks.url });
    hooks.secret = hook.secret ?? '';
    await apply('errors', {
      stages: [{ evaluators: [{ ref: 'tool-errors' }], window: '1h' }],
      alerts: [
        { metric: 'tool-errors', below: 0.5, minSamples: 3, webhook: `${hooks.url}/policy-alert` },
      ],
    });
    const sendAndScore = async (fail: boolean) => {
      await send('weather', { fail });
      await settle();
    };
    await sendAndScore(false);
    await sendAndScore(false);
    expect((await app.store.alerts.states())[0]?.firing ?? false).toBe(false);
    await sendAndScore(false);
    const fired = await app.store.alerts.states();
    expect(fired).toEqual([expect.objectContaining({ firing: true, mean: 0, n: 3 })]);
    const firedAt = new Date(clock.now()).toISOString();
    await app.webhooks.dispatcher.tick();
    expect(hooks.received.map((r) => [r.event, r.verified])).toEqual([
      ['alert.fired', true],
      ['alert.fired', false],
    ]);
    const signed = JSON.parse(hooks.received[0]?.body ?? '{}');
    expect(signed).toMatchObject({
      type: 'alert.fired',
      project: 'default',
      policy: 'errors',
      alert: {
        policy: 'errors',
        metric: 'tool-errors',
        firing: true,
        mean: 0,
        n: 3,
        below: 0.5,
        at: firedAt,
      },
    });
    expect(hooks.received[1]?.signature).toBe('');
    expect(JSON.parse(hooks.received[1]?.body ?? '{}').alert).toEqual(signed.alert);

    for (let i = 0; i < 2; i++) await sendAndScore(true);
    expect((await app.store.alerts.states())[0]?.firing).toBe(true);
    await sendAndScore(true); // mean 3/6 = 0.5: no longer below
    expect((await app.store.alerts.states())[0]).toMatchObject({ firing: false, mean: 0.5, n: 6 });
    await app.webhooks.dispatcher.tick();
    const resolved = hooks.received.filter((r) => r.event === 'alert.resolved');
    expect(resolved).toHaveLength(2);
    expect(JSON.parse(resolved[0]?.body ?? '{}').alert).toMatchObject({
      firing: false,
      mean: 0.5,
      n: 6,
    });
    expect(await metric('touchstone_policy_alert_firing')).toEqual([
      'touchstone_policy_alert_firing{project="default",policy="errors",metric="tool-errors"} 0',
    ]);
  });

  it('keeps skipped and errored results out of the window', async () => {
    await apply('win', {
      stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
      alerts: [{ metric: 'tool-errors', below: 0.5, minSamples: 1 }],
    });
    // A trace without tool calls: tool-errors is SKIPPED, which must not count as a zero.
    const spans = recordSpans({ 'service.name': 'plain' }, (tr) => {
      tr.startSpan('plain request').end();
    });
    await app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: jsonBody(spans),
      headers: { 'content-type': 'application/json' },
    });
    await settle();
    expect(await app.store.alerts.states()).toEqual([]);
    await send('weather', { fail: true });
    await settle();
    expect(await app.store.alerts.states()).toEqual([
      expect.objectContaining({ firing: false, mean: 1, n: 1 }),
    ]);
  });

  it('re-queues older traces with `rescore` and replaces their results', async () => {
    const id = await send('weather');
    await settle();
    expect((await scoresOf(id)).results).toEqual({});
    await apply('late', { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] });
    await settle();
    // Policy changes apply to traces stored after the change.
    expect((await scoresOf(id)).results).toEqual({});
    const res = await app.server.inject({
      method: 'POST',
      url: '/v1alpha1/policies/late:rescore',
      payload: { since: '2026-11-22T00:00:00Z' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ policy: 'late', queued: 1 });
    await app.engine.tick();
    expect((await scoresOf(id)).results.late?.[0]?.outcome).toBe('OUTCOME_SCORED');
  });

  /** A late span of a stored trace (a failing tool call): it opens the trace again. */
  async function lateSpan(id: string, spanId: string): Promise<void> {
    const root = (await app.store.traces.spans('default', id)).find((s) => s.parentSpanId === '');
    const at = `${BigInt(clock.now()) * 1_000_000n}`;
    const res = await app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: {
        resourceSpans: [
          {
            resource: {
              attributes: [{ key: 'service.name', value: { stringValue: 'weather' } }],
            },
            scopeSpans: [
              {
                spans: [
                  {
                    traceId: id,
                    spanId,
                    parentSpanId: root?.spanId,
                    name: 'execute_tool late_tool',
                    kind: 1,
                    startTimeUnixNano: at,
                    endTimeUnixNano: at,
                    attributes: [
                      { key: 'gen_ai.operation.name', value: { stringValue: 'execute_tool' } },
                      { key: 'gen_ai.tool.name', value: { stringValue: 'late_tool' } },
                    ],
                    status: { code: 2, message: 'timeout' },
                  },
                ],
              },
            ],
          },
        ],
      },
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(200);
  }

  async function until(condition: () => boolean, what: string): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  it('stores a claimed batch in one transaction; an item whose claim was lost meanwhile is left to its new holder', async () => {
    judge.setDefault({ ...completion('{"reasoning":"fine","score":5}'), delayMs: 300 });
    await apply('cheap', { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] });
    await apply('judged', {
      stages: [{ evaluators: [{ ref: 'llm-judge', params: { rubric: 'helpfulness' } }] }],
    });
    const ids = [await send('weather'), await send('weather'), await send('weather')];
    clock.advance(2500);
    await app.completer.tick();
    const transactions = vi.spyOn(app.store, 'withTransaction');
    const ticking = app.engine.tick();
    // Every item of the batch is claimed and waits on its judge: another replica takes one over
    // (its visibility timeout passed there).
    await until(() => judge.requests.length === 3, 'the judge requests');
    const [taken] = await app.store.work.claim(
      clock.now() + 120_000,
      1,
      clock.now() + 180_000,
      'other',
    );
    expect(taken).toBeDefined();
    await ticking;
    expect(transactions).toHaveBeenCalledTimes(1);
    transactions.mockRestore();
    for (const id of ids) {
      const { results } = await scoresOf(id);
      if (id === taken?.traceId) expect(results).toEqual({});
      else expect(Object.keys(results).sort()).toEqual(['cheap', 'judged']);
    }
    expect(await metric('touchstone_policy_traces_scored_total')).toEqual([
      'touchstone_policy_traces_scored_total{project="default",policy="cheap"} 2',
      'touchstone_policy_traces_scored_total{project="default",policy="judged"} 2',
    ]);
    // The item is still the other replica's to finish.
    expect(await app.store.work.stats()).toMatchObject({ depth: 1 });
    expect(await app.store.work.complete(taken?.id ?? '', 'other')).toBe(true);
  });

  it('scores a batch mixing a stale version, an open trace and a rate-limited judge: each as alone, in one transaction', async () => {
    await apply('cheap', { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] });
    await apply('judged', {
      selector: 'labels["judge"] == "yes"',
      stages: [{ evaluators: [{ ref: 'llm-judge', params: { rubric: 'helpfulness' } }] }],
    });
    // Rate limited until lifted below (every request: one reply scripted for the next request
    // could be taken by a request another test's app sent late, on a loaded machine).
    const slowDown = { status: 429, headers: { 'retry-after': '1' }, body: { error: 'slow down' } };
    judge.setDefault(slowDown);
    const changed = await send('weather');
    const reopened = await send('weather');
    const limited = await send('weather', { labels: { judge: 'yes' } });
    const plain = await send('weather');
    clock.advance(2500);
    await app.completer.tick();
    // A new version of one (its first item is now stale), and one open again, before scoring.
    await lateSpan(changed, '00000000000000aa');
    clock.advance(2500);
    await app.completer.tick();
    await lateSpan(reopened, '00000000000000bb');
    expect(await app.store.work.stats()).toMatchObject({ depth: 5 });

    const transactions = vi.spyOn(app.store, 'withTransaction');
    await app.engine.tick();
    expect(transactions).toHaveBeenCalledTimes(1);
    transactions.mockRestore();
    const digest = async (id: string) => (await app.store.traces.get('default', id))?.trace.digest;
    const stored = await app.store.results.forTrace('default', changed);
    expect(stored?.policies.map((p) => [p.policy, p.digest])).toEqual([
      ['cheap', await digest(changed)],
    ]);
    expect(stored?.policies[0]?.results[0]?.scores).toEqual([
      expect.objectContaining({ name: 'tool-errors', value: 0.5 }),
    ]);
    expect(await app.store.results.latestOf([{ project: 'default', traceId: reopened }])).toEqual([
      [],
    ]);
    expect(Object.keys((await scoresOf(limited)).results)).toEqual(['cheap']);
    expect(Object.keys((await scoresOf(plain)).results)).toEqual(['cheap']);
    expect((await metric('touchstone_online_postponed_total')).sort()).toEqual([
      'touchstone_online_postponed_total{reason="rate_limited"} 1',
      'touchstone_online_postponed_total{reason="trace_open"} 1',
    ]);
    // The open trace's and the rate-limited one's items wait.
    expect(await app.store.work.stats()).toMatchObject({ depth: 2 });

    judge.setDefault(completion('{"reasoning":"fine","score":4}'));
    clock.advance(6000);
    await app.completer.tick();
    await app.engine.tick();
    expect(Object.keys((await scoresOf(limited)).results).sort()).toEqual(['cheap', 'judged']);
    expect(Object.keys((await scoresOf(reopened)).results)).toEqual(['cheap']);
    expect(await metric('touchstone_policy_traces_scored_total')).toEqual([
      'touchstone_policy_traces_scored_total{project="default",policy="cheap"} 4',
      'touchstone_policy_traces_scored_total{project="default",policy="judged"} 1',
    ]);
    // Four traces, each scored once by `cheap`: the stale version was not.
    expect(await app.store.work.stats()).toEqual({ depth: 0 });
  });

  it('never stores a version twice when two engines race for the same items', async () => {
    await apply('cheap', {
      stages: [{ evaluators: [{ ref: 'tool-errors' }] }],
      // Every stored result adds a point to the window: a second store would count twice.
      alerts: [{ metric: 'tool-errors', below: 0.5, minSamples: 1000 }],
    });
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) ids.push(await send('weather', { fail: i % 2 === 0 }));
    clock.advance(2500);
    await app.completer.tick();
    const scored = new Map<string, number>();
    const engine = (visibilityMs: number) =>
      new PolicyEngine({
        store: app.store,
        clock,
        registry: app.evaluation.registry,
        judge: () => undefined,
        events: new WebhookOutbox({ clock }),
        observer: {
          onSelected: () => {},
          onSampledOut: () => {},
          onExpressionError: () => {},
          onFreshness: () => {},
          onPostponed: () => {},
          onScored: (_project, policy) => scored.set(policy, (scored.get(policy) ?? 0) + 1),
        },
        options: { visibilityMs, batchSize: 8, concurrency: 2 },
      });
    // The items `a` claims stay visible (as if its visibility timeout had passed at once): `b`
    // claims them from under it while `a` scores them, and both store what they hold.
    const [a, b] = [engine(0), engine(60_000)];
    await Promise.all([a.tick(), b.tick()]);
    expect(await app.store.work.stats()).toEqual({ depth: 0 });
    expect(scored.get('cheap')).toBe(ids.length);
    const latest = await app.store.results.latestOf(
      ids.map((traceId) => ({ project: 'default', traceId })),
    );
    expect(latest.map((p) => p.length)).toEqual(ids.map(() => 1));
    const state = await app.store.alerts.window('default', 'cheap', 'tool-errors', 0);
    expect(state.n).toBe(ids.length);
  });
});
