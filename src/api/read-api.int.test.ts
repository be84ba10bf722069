import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { context, trace } from '@opentelemetry/api';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentTrace, jsonBody, recordSpans } from '../../test/support/otel.js';
import { storeVariants } from '../../test/support/stores.js';
import { type App, createApp } from '../app/index.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { loadConfig } from '../config/index.js';
import { FakeClock } from '../core/index.js';

/**
 * The read API the web UI is built on (and any script may call): the trace list's result
 * filters, `include=scores` and token usage; a trace without its trajectory and the trajectory
 * in pages; `whoami`; `scores:aggregate` with window means and alert transitions; a policy's
 * alert states; datasets and their records. On SQLite, and PostgreSQL when configured.
 */

const HOUR = 3_600_000;
const T0 = Date.parse('2026-11-22T10:00:00Z');

describe.each(storeVariants())('read API on $name', (variant) => {
  const clock = new FakeClock(T0);
  let app: App;
  let dataDir: string;
  let dispose: () => Promise<void>;
  let owner: string;
  let viewer: string;
  let ingest: string;
  let outsider: string;
  const ids: Record<string, string> = {};

  const call = (url: string, key = viewer, method: 'GET' | 'POST' = 'GET', body?: unknown) =>
    app.server.inject({
      method,
      url,
      ...(body === undefined ? {} : { payload: body as object }),
      headers: { authorization: `Bearer ${key}` },
    });

  /** Sends one agent trace, completes it and scores it; returns its id. */
  async function sendScored(service: string, fail: boolean, tier: string): Promise<string> {
    let traceId = '';
    const spans = recordSpans({ 'service.name': service, 'touchstone.label.tier': tier }, (tr) => {
      traceId = agentTrace(tr, { fail });
    });
    const res = await app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: jsonBody(spans),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ingest}` },
    });
    expect(res.statusCode).toBe(200);
    clock.advance(1500);
    await app.completer.tick();
    await app.engine.tick();
    return traceId;
  }

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'touchstone-read-api-'));
    const store = await variant.open();
    dispose = store.dispose;
    const config = loadConfig({
      overrides: {
        data_dir: dataDir,
        log_level: 'silent',
        auth: {},
        traces: { completion_grace: '1s' },
        ...store.overrides,
      },
    });
    app = await createApp(config, {
      env: {},
      clock,
      processMetrics: false,
      logger: pino({ level: 'silent' }),
    });
    const key = async (project: string, role: 'owner' | 'viewer' | 'ingest') =>
      (await app.keys.create(OPEN_PRINCIPAL, { project, roles: [role] })).secret;
    owner = await key('shop', 'owner');
    viewer = await key('shop', 'viewer');
    ingest = await key('shop', 'ingest');
    outsider = await key('other', 'owner');
    const policy = await call('/v1alpha1/policies', owner, 'POST', {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name: 'quality', labels: { 'touchstone.dev/project': 'shop' } },
      spec: {
        stages: [{ evaluators: [{ ref: 'tool-errors' }], window: '2h' }],
        // tool-errors is the failed share of tool calls: a healthy run of traces fires this.
        alerts: [{ metric: 'tool-errors', below: 0.5, minSamples: 2 }],
      },
    });
    expect(policy.statusCode).toBe(200);
    ids.first = await sendScored('checkout', false, 'gold');
    ids.second = await sendScored('checkout', false, 'free');
    clock.advance(HOUR);
    ids.third = await sendScored('search', true, 'gold');
    ids.fourth = await sendScored('search', true, 'gold');
  });
  afterAll(async () => {
    await app.close();
    await dispose();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('lists traces with their token usage and, with include=scores, each policy’s latest results', async () => {
    const res = await call('/v1alpha1/traces?include=scores');
    expect(res.statusCode).toBe(200);
    const { traces } = res.json();
    expect(traces.map((t: { traceId: string }) => t.traceId)).toEqual([
      ids.fourth,
      ids.third,
      ids.second,
      ids.first,
    ]);
    expect(traces[0]).toMatchObject({
      usage: { inputTokens: 42, outputTokens: 7 },
      scores: {
        quality: [
          {
            evaluator: 'tool-errors',
            outcome: 'OUTCOME_SCORED',
            scores: [{ name: 'tool-errors', value: 1 }],
          },
        ],
      },
    });
    expect((await call('/v1alpha1/traces')).json().traces[0]).not.toHaveProperty('scores');
  });

  it('filters traces by the policy, evaluator and outcome of their results', async () => {
    const listed = async (query: string) =>
      (await call(`/v1alpha1/traces?${query}`))
        .json()
        .traces.map((t: { traceId: string }) => t.traceId);
    expect(
      await listed('policy=quality&evaluator=tool-errors&outcome=OUTCOME_SCORED'),
    ).toHaveLength(4);
    expect(await listed('policy=quality&outcome=OUTCOME_ERROR')).toEqual([]);
    expect(await listed('evaluator=nothing')).toEqual([]);
    expect(await listed('policy=quality&labels=tier=free')).toEqual([ids.second]);
    const bad = await call('/v1alpha1/traces?outcome=FINE');
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details[0].path).toBe('outcome');
    expect((await call('/v1alpha1/traces?include=spans')).statusCode).toBe(400);
  });

  it('serves a trace without its trajectory, and the trajectory in pages', async () => {
    const full = (await call(`/v1alpha1/traces/${ids.third}`)).json();
    const basic = await call(`/v1alpha1/traces/${ids.third}?view=basic`);
    expect(basic.statusCode).toBe(200);
    expect(basic.json().record).not.toHaveProperty('trajectory');
    expect(basic.json().trajectorySteps).toBe(full.record.trajectory.length);
    expect(basic.json().trace).toEqual(full.trace);

    const steps: unknown[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const page = (
        await call(
          `/v1alpha1/traces/${ids.third}/trajectory?page_size=2${token === undefined ? '' : `&page_token=${token}`}`,
        )
      ).json();
      expect(page.total).toBe(full.record.trajectory.length);
      steps.push(...page.steps);
      token = page.next_page_token;
      pages++;
    } while (token !== undefined);
    expect(steps).toEqual(full.record.trajectory);
    expect(pages).toBe(Math.ceil(full.record.trajectory.length / 2));

    expect((await call(`/v1alpha1/traces/${ids.third}?view=tree`)).statusCode).toBe(400);
    const garbage = await call(`/v1alpha1/traces/${ids.third}/trajectory?page_token=xyz`);
    expect(garbage.statusCode).toBe(400);
    expect((await call(`/v1alpha1/traces/${'0'.repeat(31)}1/trajectory`)).statusCode).toBe(404);
  });

  it('refuses a trajectory page token once the trace has changed', async () => {
    const first = (await call(`/v1alpha1/traces/${ids.first}/trajectory?page_size=1`)).json();
    expect(first.next_page_token).toBeDefined();
    // A late span re-opens the trace; completed again, it is another version.
    const late = recordSpans({ 'service.name': 'checkout' }, (tr) => {
      const parent = trace.setSpanContext(context.active(), {
        traceId: ids.first as string,
        spanId: 'ab'.repeat(8),
        traceFlags: 1,
      });
      tr.startSpan(
        'execute_tool lookup',
        { attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'lookup' } },
        parent,
      ).end();
    });
    const res = await app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: jsonBody(late),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ingest}` },
    });
    expect(res.statusCode).toBe(200);
    clock.advance(40_000);
    await app.completer.tick();
    const stale = await call(
      `/v1alpha1/traces/${ids.first}/trajectory?page_size=1&page_token=${first.next_page_token}`,
    );
    expect(stale.statusCode).toBe(409);
    expect(stale.json().error.code).toBe('TRACE_CHANGED');
  });

  it('says who a key is and which projects it reads, never its secret', async () => {
    const res = await call('/v1alpha1/whoami');
    expect(res.statusCode).toBe(200);
    const me = res.json();
    expect(me).toMatchObject({
      kind: 'key',
      project: 'shop',
      roles: ['viewer'],
      projects: ['shop'],
    });
    expect(me.keyId).toMatch(/^key_/);
    expect(me.permissions).toContain('traces.read');
    expect(me.permissions).not.toContain('sources.read');
    expect(res.body).not.toContain(viewer);
    expect((await app.server.inject({ url: '/v1alpha1/whoami' })).statusCode).toBe(401);
  });

  it('aggregates each policy metric over time with its window mean, alert and transitions', async () => {
    const since = new Date(T0 - HOUR).toISOString();
    const until = new Date(clock.now() + 1).toISOString();
    const res = await call(
      `/v1alpha1/scores:aggregate?policy=quality&bucket=1h&since=${since}&until=${until}`,
    );
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ project: 'shop', bucket: '1h', since, until });
    expect(body.series).toHaveLength(1);
    const [series] = body.series;
    expect(series).toMatchObject({
      policy: 'quality',
      evaluator: 'tool-errors',
      metric: 'tool-errors',
      window: '2h',
      alert: { below: 0.5, minSamples: 2, firing: false, n: 4 },
    });
    expect(series.points.map((p: { n: number; mean: number }) => [p.n, p.mean])).toEqual([
      [2, 0],
      [2, 1],
    ]);
    // The 2h window holds both buckets at the second one.
    expect(series.points[1]).toMatchObject({ windowN: 4, windowMean: 0.5 });
    expect(body.transitions.map((t: { firing: boolean }) => t.firing)).toEqual([true, false]);
    expect(body.transitions[0]).toMatchObject({
      policy: 'quality',
      metric: 'tool-errors',
      below: 0.5,
      n: 2,
      mean: 0,
    });

    const prod = (
      await call(`/v1alpha1/scores:aggregate?labels=tier=free&since=${since}&until=${until}`)
    ).json();
    expect(prod.series[0].points.map((p: { n: number }) => p.n)).toEqual([1]);

    // A caller with a read scope aggregates only the traces it may read.
    const points = async (scope: { services?: string[]; labels?: Record<string, string> }) => {
      const key = await app.keys.create(OPEN_PRINCIPAL, {
        project: 'shop',
        roles: ['viewer'],
        scope,
      });
      const res = await call(
        `/v1alpha1/scores:aggregate?since=${since}&until=${until}`,
        key.secret,
      );
      return res.json().series[0].points.map((p: { n: number; mean: number }) => [p.n, p.mean]);
    };
    expect(await points({ services: ['search'] })).toEqual([[2, 1]]);
    expect(await points({ labels: { tier: 'free' } })).toEqual([[1, 0]]);

    const badBucket = await call('/v1alpha1/scores:aggregate?bucket=10s');
    expect(badBucket.statusCode).toBe(400);
    expect(badBucket.json().error.details[0].path).toBe('bucket');
    const tooMany = await call(
      `/v1alpha1/scores:aggregate?bucket=1m&since=2026-01-01T00:00:00Z&until=2026-02-01T00:00:00Z`,
    );
    expect(tooMany.statusCode).toBe(400);
    expect(tooMany.json().error.message).toMatch(/more than 1000 buckets/);
    expect((await call('/v1alpha1/scores:aggregate?project=shop', outsider)).statusCode).toBe(403);
    expect((await call('/v1alpha1/scores:aggregate', ingest)).statusCode).toBe(403);
  });

  it('shows a policy’s alert states, and what get shows applies again unchanged', async () => {
    const res = await call('/v1alpha1/policies/quality');
    expect(res.statusCode).toBe(200);
    const policy = res.json();
    expect(policy.status.alerts).toEqual([
      {
        metric: 'tool-errors',
        firing: false,
        mean: 0.5,
        n: 4,
        changedAt: expect.any(String),
      },
    ]);
    expect((await call('/v1alpha1/policies')).json().policies[0].status.alerts).toHaveLength(1);
    const again = await call('/v1alpha1/policies', owner, 'POST', policy);
    expect(again.statusCode).toBe(200);
    expect(again.json().metadata.generation).toBe(1);
  });

  it('lists each uploaded content of a dataset and pages its records', async () => {
    const rows = [
      { id: 'q1', input: 'Capital of France?', output: 'Paris' },
      { id: 'q2', input: 'Capital of Italy?', output: 'Rome' },
      { id: 'q3', input: 'Capital of Spain?', output: 'Madrid' },
    ];
    const upload = await app.server.inject({
      method: 'POST',
      url: '/v1alpha1/datasets/capitals/upload?format=jsonl',
      payload: rows.map((r) => JSON.stringify(r)).join('\n'),
      headers: { 'content-type': 'application/jsonl', authorization: `Bearer ${owner}` },
    });
    expect(upload.statusCode).toBe(200);
    const { path, sha256 } = upload.json();

    const list = await call('/v1alpha1/datasets');
    expect(list.statusCode).toBe(200);
    expect(list.json().datasets).toEqual([
      {
        name: 'capitals',
        path,
        sha256,
        records: 3,
        bytes: expect.any(Number),
        uploadedAt: expect.any(String),
      },
    ]);

    const first = (await call('/v1alpha1/datasets/capitals/records?page_size=2')).json();
    expect(first).toMatchObject({ path, total: 3 });
    expect(first.records.map((r: { id: string }) => r.id)).toEqual(['q1', 'q2']);
    const second = (
      await call(
        `/v1alpha1/datasets/capitals/records?sha256=${sha256}&page_size=2&page_token=${first.next_page_token}`,
      )
    ).json();
    expect(second.records.map((r: { output: string }) => r.output)).toEqual(['Madrid']);
    expect(second.next_page_token).toBeUndefined();

    expect((await call('/v1alpha1/datasets/nothing/records')).statusCode).toBe(404);
    expect(
      (await call(`/v1alpha1/datasets/capitals/records?sha256=${'0'.repeat(64)}`)).statusCode,
    ).toBe(404);
    expect((await call('/v1alpha1/datasets', ingest)).statusCode).toBe(403);
    expect((await call('/v1alpha1/datasets', outsider)).json().datasets).toEqual([]);
  });
});

describe('whoami without auth (loopback)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'touchstone-whoami-'));
  let app: App;

  beforeAll(async () => {
    app = await createApp(loadConfig({ overrides: { data_dir: dataDir, log_level: 'silent' } }), {
      env: {},
      processMetrics: false,
      logger: pino({ level: 'silent' }),
    });
  });
  afterAll(async () => {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('acts as the open principal, owner of every project, and offers the default project', async () => {
    const me = (await app.server.inject({ url: '/v1alpha1/whoami' })).json();
    expect(me).toMatchObject({ kind: 'open', roles: ['owner'], projects: ['default'] });
    expect(me).not.toHaveProperty('keyId');
    expect(me).not.toHaveProperty('project');
  });
});
