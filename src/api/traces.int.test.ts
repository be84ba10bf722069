import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentTrace, protobufBody, recordSpans } from '../../test/support/otel.js';
import { createApp } from '../app/index.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { loadConfig } from '../config/index.js';
import { FakeClock } from '../core/index.js';

const PB = { 'content-type': 'application/x-protobuf' };

describe('trace completion, durability and the traces API', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'touchstone-traces-'));
  const clock = new FakeClock(Date.parse('2026-11-21T10:00:00Z'));
  const config = loadConfig({
    overrides: {
      data_dir: dataDir,
      log_level: 'silent',
      auth: {},
      traces: {
        completion_grace: '2s',
        idle_timeout: '30s',
        max_age: '5m',
        complete_on_arrival: true,
      },
    },
  });
  const open = () =>
    createApp(config, { env: {}, clock, processMetrics: false, logger: pino({ level: 'silent' }) });
  let app: Awaited<ReturnType<typeof open>>;
  let ingestKey: string;
  let viewer: string;

  beforeAll(async () => {
    app = await open();
    ingestKey = (
      await app.keys.create(OPEN_PRINCIPAL, {
        project: 'shop',
        roles: ['ingest'],
        labels: { env: 'prod' },
      })
    ).secret;
    viewer = (await app.keys.create(OPEN_PRINCIPAL, { project: 'shop', roles: ['viewer'] })).secret;
  });
  afterAll(async () => {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const send = (spans: ReturnType<typeof recordSpans>) =>
    app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: protobufBody(spans),
      headers: { ...PB, authorization: `Bearer ${ingestKey}` },
    });
  const get = (url: string, key = viewer) =>
    app.server.inject({ url, headers: { authorization: `Bearer ${key}` } });

  it('completes a whole trace on arrival; spans arriving apart complete after the grace period following the root, also across a restart', async () => {
    let traceId = '';
    const spans = recordSpans(
      { 'service.name': 'checkout', 'touchstone.label.workflow': 'refund' },
      (tr) => {
        traceId = agentTrace(tr, { fail: true });
      },
    );
    expect((await send(spans)).statusCode).toBe(200);
    const res = await get(`/v1alpha1/traces/${traceId}`);
    expect(res.statusCode).toBe(200);
    const { trace, record } = res.json();
    expect(trace).toMatchObject({
      service: 'checkout',
      error: true,
      labels: { workflow: 'refund', env: 'prod' },
    });
    expect(record.trajectory.find((s: { type: string }) => s.type === 'tool').error).toMatch(
      /timed out/,
    );
    // The whole record is sent as stored: the same JSON the store reads, the summary as the
    // basic view's, an answer of type JSON.
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(record).toEqual((await app.store.traces.get('shop', traceId))?.record);
    const basic = (await get(`/v1alpha1/traces/${traceId}?view=basic`)).json();
    expect(trace).toEqual(basic.trace);
    expect(basic.trajectorySteps).toBe(record.trajectory.length);
    expect(await app.completer.tick()).toBe(0);

    // The children first, then the root alone: whole by itself, but its trace has spans already,
    // so it waits for the grace period like any trace whose spans came apart.
    let apart = '';
    const parts = recordSpans({ 'service.name': 'checkout' }, (tr) => {
      apart = agentTrace(tr);
    });
    expect((await send(parts.filter((s) => s.parentSpanContext !== undefined))).statusCode).toBe(
      200,
    );
    expect((await send(parts.filter((s) => s.parentSpanContext === undefined))).statusCode).toBe(
      200,
    );
    expect(await app.completer.tick()).toBe(0);
    expect((await get(`/v1alpha1/traces/${apart}`)).statusCode).toBe(404);

    // Restart before completion: the open trace is re-found from the database.
    await app.close();
    app = await open();
    clock.advance(2500);
    expect(await app.completer.tick()).toBe(1);
    const whole = (await get(`/v1alpha1/traces/${apart}`)).json();
    expect(whole.trace).toMatchObject({ name: 'invoke_agent weather', steps: 3 });
  });

  it('completes a trace without a root after the idle timeout, and re-completes it when late spans arrive', async () => {
    let traceId = '';
    const all = recordSpans({ 'service.name': 'late' }, (tr) => {
      traceId = agentTrace(tr);
    });
    const children = all.filter((s) => s.parentSpanContext !== undefined);
    expect((await send(children)).statusCode).toBe(200);
    clock.advance(10_000);
    expect(await app.completer.tick()).toBe(0);
    clock.advance(21_000);
    expect(await app.completer.tick()).toBe(1);
    const first = await app.store.traces.get('shop', traceId);
    expect(first?.trace.name).not.toBe('invoke_agent weather');

    // The root arrives late: the trace is reopened, and completes again with a new digest.
    expect((await send(all.filter((s) => s.parentSpanContext === undefined))).statusCode).toBe(200);
    expect(await app.store.traces.get('shop', traceId)).toBeUndefined();
    clock.advance(3000);
    expect(await app.completer.tick()).toBe(1);
    const second = await app.store.traces.get('shop', traceId);
    expect(second?.trace.name).toBe('invoke_agent weather');
    expect(second?.trace.digest).not.toBe(first?.trace.digest);
  });

  it('lists traces newest first with filters and paging', async () => {
    for (const service of ['alpha', 'beta', 'beta']) {
      await send(
        recordSpans(
          {
            'service.name': service,
            'touchstone.label.tier': service === 'alpha' ? 'gold' : 'free',
          },
          (tr) => agentTrace(tr),
        ),
      );
      clock.advance(10);
    }
    clock.advance(3000);
    await app.completer.tick();
    const beta = (await get('/v1alpha1/traces?service=beta')).json();
    expect(beta.traces).toHaveLength(2);
    expect(beta.traces[0]).toMatchObject({
      service: 'beta',
      project: 'shop',
      labels: { tier: 'free', env: 'prod' },
    });
    expect(Object.keys(beta.traces[0])).toEqual(
      expect.arrayContaining([
        'traceId',
        'service',
        'name',
        'startTime',
        'duration',
        'steps',
        'project',
        'labels',
      ]),
    );
    const gold = (await get('/v1alpha1/traces?labels=tier=gold')).json();
    expect(gold.traces.map((t: { service: string }) => t.service)).toEqual(['alpha']);
    const page1 = (await get('/v1alpha1/traces?page_size=2')).json();
    expect(page1.traces).toHaveLength(2);
    const page2 = (
      await get(`/v1alpha1/traces?page_size=2&page_token=${page1.next_page_token}`)
    ).json();
    const ids = [...page1.traces, ...page2.traces].map((t: { traceId: string }) => t.traceId);
    expect(new Set(ids).size).toBe(ids.length);
    const starts = [...page1.traces, ...page2.traces].map(
      (t: { startTime: string }) => t.startTime,
    );
    expect([...starts].sort().reverse()).toEqual(starts);
    expect(
      (await get('/v1alpha1/traces?error=true'))
        .json()
        .traces.every((t: { error: boolean }) => t.error),
    ).toBe(true);
    expect((await get('/v1alpha1/traces?labels=nokey')).statusCode).toBe(400);
    expect((await get('/v1alpha1/traces?bogus=1')).statusCode).toBe(400);
  });

  it('a key scoped to a service or labels sees only those traces (404, not 403, for the rest)', async () => {
    const scoped = (
      await app.keys.create(OPEN_PRINCIPAL, {
        project: 'shop',
        roles: ['viewer'],
        scope: { services: ['alpha'] },
      })
    ).secret;
    const list = (await get('/v1alpha1/traces', scoped)).json();
    expect(list.traces.length).toBeGreaterThan(0);
    expect(list.traces.every((t: { service: string }) => t.service === 'alpha')).toBe(true);
    const other = (await get('/v1alpha1/traces?service=beta')).json().traces[0].traceId;
    const res = await get(`/v1alpha1/traces/${other}`, scoped);
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('TRACE_NOT_FOUND');

    const byLabel = (
      await app.keys.create(OPEN_PRINCIPAL, {
        project: 'shop',
        roles: ['viewer'],
        scope: { labels: { tier: 'free' } },
      })
    ).secret;
    const free = (await get('/v1alpha1/traces', byLabel)).json().traces;
    expect(free.length).toBe(2);
    expect((await get('/v1alpha1/traces?labels=tier=gold', byLabel)).json().traces).toEqual([]);

    const ingestOnly = await get('/v1alpha1/traces', ingestKey);
    expect(ingestOnly.statusCode).toBe(403);
  });

  it('reports ingest metrics', async () => {
    // /metrics needs metrics.read (admin and up).
    const admin = (await app.keys.create(OPEN_PRINCIPAL, { project: 'shop', roles: ['admin'] }))
      .secret;
    const text = (await get('/metrics', admin)).body;
    expect(text).toMatch(/touchstone_spans_received_total \d+/);
    expect(text).toMatch(/touchstone_spans_stored_total [1-9]/);
    expect(text).toMatch(/touchstone_traces_completed_total [1-9]/);
    expect(text).toMatch(/touchstone_open_traces \d+/);
    expect(text).toContain('touchstone_ingest_store_duration_seconds_bucket');
  });
});
