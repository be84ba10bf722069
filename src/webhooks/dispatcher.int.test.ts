import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { FakeClock } from '../core/index.js';
import { openStore, type Store } from '../store/index.js';
import {
  type AttemptResult,
  createWebhooks,
  LEASE_TTL_MS,
  RETRY_DELAYS_MS,
  type WebhookEvent,
  type Webhooks,
} from './index.js';
import { TestReceiver } from './receiver.testkit.js';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const HOUR = 3_600_000;

interface Setup {
  clock: FakeClock;
  store: Store;
  receiver: TestReceiver;
  logs: string[];
  observed: AttemptResult[];
  build(config?: Partial<Config>): Webhooks;
  webhooks: Webhooks;
  cleanup(): Promise<void>;
}

interface Config {
  max_attempts: number;
  timeout: number;
  retention: number;
  allow_hosts: string[];
}

async function setup(config: Partial<Config> = {}): Promise<Setup> {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-webhooks-'));
  const clock = new FakeClock(T0);
  const store = await openStore({ driver: 'sqlite' }, { clock, dataDir: dir });
  const receiver = await TestReceiver.start(() => clock.now());
  const logs: string[] = [];
  const observed: AttemptResult[] = [];
  const logger = {
    info: (obj: object, msg: string) => logs.push(JSON.stringify({ ...obj, msg })),
    warn: (obj: object, msg: string) => logs.push(JSON.stringify({ ...obj, msg })),
  };
  const built: Webhooks[] = [];
  const build = (overrides: Partial<Config> = {}) => {
    const w = createWebhooks({
      config: {
        max_attempts: 6,
        timeout: 2_000,
        retention: 168 * HOUR,
        allow_hosts: ['127.0.0.1'],
        ...config,
        ...overrides,
      },
      store,
      clock,
      logger,
      observer: { onWebhookAttempt: (o) => observed.push(o) },
    });
    built.push(w);
    return w;
  };
  return {
    clock,
    store,
    receiver,
    logs,
    observed,
    build,
    webhooks: build(),
    async cleanup() {
      for (const w of built) await w.close();
      await receiver.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const RUN = {
  id: 'run_123',
  name: 'nightly',
  status: 'RUN_STATUS_FAILED',
  gates: [{ gate: { metric: 'exact-match', min: 0.9 }, passed: false, value: 0.5 }],
  spec: { evaluators: [{ ref: 'exact-match' }], secretish: 'not in payloads' },
};

const TRACE_SCORED: WebhookEvent = {
  type: 'trace.scored',
  project: 'default',
  policy: 'support-quality',
  trace: {
    traceId: '0af7651916cd43dd8448eb211c80319c',
    project: 'default',
    service: 'support-bot',
    name: 'answer',
    startTime: '2026-01-01T00:00:00.000Z',
    duration: '1.2s',
    durationMs: 1200,
    steps: 3,
    error: false,
    labels: { team: 'support' },
  },
  results: [
    {
      evaluator: 'exact-match',
      outcome: 'OUTCOME_SCORED',
      scores: [{ name: 'exact-match', passed: true }],
      durationMs: 0.1,
    },
  ],
};

describe('webhook dispatcher', () => {
  let s: Setup;
  beforeEach(async () => {
    s = await setup();
  });
  afterEach(() => s.cleanup());

  async function apply(body: Record<string, unknown>) {
    const applied = await s.webhooks.service.apply(OPEN_PRINCIPAL, {
      name: 'ci',
      url: s.receiver.url,
      ...body,
    });
    if (applied.secret !== undefined) s.receiver.secret = applied.secret;
    return applied;
  }

  const emit = (event: WebhookEvent) =>
    s.store.withTransaction((tx) => s.webhooks.emitter.emitEvent(tx, event));

  const deliveries = async (name = 'ci') =>
    (await s.webhooks.service.deliveries(OPEN_PRINCIPAL, 'default', name, { pageSize: 100 })).items;

  it('delivers a signed event with the documented headers and envelope', async () => {
    await apply({});
    const [id] = await s.store.withTransaction((tx) =>
      s.webhooks.emitter.emitRunFinished(tx, 'default', RUN),
    );
    await s.webhooks.dispatcher.tick();
    const [first, second] = s.receiver.received;
    expect(first).toMatchObject({
      id,
      event: 'run.finished',
      contentType: 'application/json',
      verified: true,
    });
    expect(first?.signature).toMatch(new RegExp(`^t=${T0 / 1000},v1=[0-9a-f]{64}$`));
    const { spec: _spec, ...runWithoutSpec } = RUN;
    expect(JSON.parse(first?.body ?? '')).toStrictEqual({
      id,
      type: 'run.finished',
      created_at: '2026-01-01T00:00:00.000Z',
      project: 'default',
      run: runWithoutSpec,
    });
    // run.gate_failed follows run.finished for a run that failed a gate.
    expect(second).toMatchObject({ event: 'run.gate_failed', verified: true });
    expect(JSON.parse(second?.body ?? '').type).toBe('run.gate_failed');
    expect(second?.body).not.toContain('not in payloads');
    expect(
      (await deliveries()).map((d) => [d.event, d.state, d.attempts, d.lastStatus, d.runId]),
    ).toEqual([
      ['run.gate_failed', 'DELIVERED', 1, 204, 'run_123'],
      ['run.finished', 'DELIVERED', 1, 204, 'run_123'],
    ]);
    expect(s.observed).toEqual(['delivered', 'delivered']);
  });

  it('freezes the payload at enqueue and signs each attempt with the current secret', async () => {
    await apply({ events: ['WEBHOOK_EVENT_TRACE_SCORED'] });
    const event = structuredClone(TRACE_SCORED) as Extract<WebhookEvent, { type: 'trace.scored' }>;
    const [id] = await emit(event);
    event.trace.labels.team = 'changed-after-enqueue';
    s.receiver.respond = (_req, res, n) => {
      res.writeHead(n === 1 ? 503 : 200);
      res.end();
    };
    await s.webhooks.dispatcher.tick();
    // Rotate the secret between attempts: the retry is signed with the new one.
    const rotated = 'whsec_rotated-secret-0123456789';
    await apply({ events: ['trace.scored'], secret: rotated });
    s.receiver.secret = rotated;
    s.clock.advance(5_000);
    await s.webhooks.dispatcher.tick();
    const [a, b] = s.receiver.received;
    expect(a?.id).toBe(id);
    expect(b?.id).toBe(id);
    expect(b?.body).toBe(a?.body);
    expect(b?.verified).toBe(true);
    expect(JSON.parse(a?.body ?? '')).toMatchObject({
      type: 'trace.scored',
      policy: 'support-quality',
      trace: { traceId: TRACE_SCORED.trace.traceId, labels: { team: 'support' } },
      results: [{ evaluator: 'exact-match', outcome: 'OUTCOME_SCORED' }],
    });
    expect(b?.signature).not.toBe(a?.signature);
    expect(b?.signature.startsWith(`t=${T0 / 1000 + 5},`)).toBe(true);
    expect((await deliveries())[0]).toMatchObject({
      traceId: TRACE_SCORED.trace.traceId,
      policy: 'support-quality',
      state: 'DELIVERED',
      attempts: 2,
    });
  });

  it('matches events: empty list = all but trace.scored; a list = exactly those', async () => {
    await apply({ name: 'all' });
    await apply({ name: 'scores', events: ['trace.scored'] });
    await apply({ name: 'alerts', events: ['alert.fired', 'WEBHOOK_EVENT_ALERT_RESOLVED'] });
    const alert = {
      policy: 'support-quality',
      metric: 'exact-match',
      firing: true,
      mean: 0.4,
      n: 50,
      below: 0.8,
      at: '2026-01-01T00:00:00.000Z',
    };
    await emit(TRACE_SCORED);
    await emit({ type: 'alert.fired', project: 'default', policy: 'support-quality', alert });
    await emit({
      type: 'run.finished',
      project: 'default',
      run: { id: 'r1', status: 'RUN_STATUS_SUCCEEDED' },
    });
    await emit({
      type: 'run.finished',
      project: 'other',
      run: { id: 'r2', status: 'RUN_STATUS_SUCCEEDED' },
    });
    expect((await deliveries('all')).map((d) => d.event).sort()).toEqual([
      'alert.fired',
      'run.finished',
    ]);
    expect((await deliveries('scores')).map((d) => d.event)).toEqual(['trace.scored']);
    expect((await deliveries('alerts')).map((d) => d.event)).toEqual(['alert.fired']);
    await s.webhooks.dispatcher.tick();
    const fired = s.receiver.received.find((r) => r.event === 'alert.fired');
    expect(JSON.parse(fired?.body ?? '')).toMatchObject({
      type: 'alert.fired',
      policy: 'support-quality',
      alert,
    });
    expect(s.receiver.received).toHaveLength(4);
  });

  it('retries after 5 s, 30 s, 3 min, 15 min and 1 h, then fails after 6 attempts', async () => {
    expect(RETRY_DELAYS_MS).toEqual([5_000, 30_000, 180_000, 900_000, 3_600_000]);
    await apply({});
    s.receiver.respond = (_req, res) => {
      res.writeHead(500);
      res.end('database on fire: internal details that should not be stored whole '.repeat(50));
    };
    const [id] = await emit({
      type: 'run.finished',
      project: 'default',
      run: { id: 'r', status: 'RUN_STATUS_ERROR' },
    });
    await s.webhooks.dispatcher.tick();
    expect(s.receiver.received).toHaveLength(1);
    for (const [i, delay] of RETRY_DELAYS_MS.entries()) {
      const [d] = await deliveries();
      expect(d).toMatchObject({ state: 'RETRYING', attempts: i + 1, lastStatus: 500 });
      expect(d?.nextAttemptAt).toBe(new Date(s.clock.now() + delay).toISOString());
      expect(d?.lastError?.startsWith('HTTP 500: database on fire')).toBe(true);
      expect(d?.lastError?.length).toBeLessThan(260);
      s.clock.advance(delay - 1);
      await s.webhooks.dispatcher.tick();
      expect(s.receiver.received).toHaveLength(i + 1);
      s.clock.advance(1);
      await s.webhooks.dispatcher.tick();
      expect(s.receiver.received).toHaveLength(i + 2);
    }
    const [d] = await deliveries();
    expect(d).toMatchObject({ state: 'FAILED', attempts: 6, lastStatus: 500 });
    expect(d?.finishedAt).toBe(new Date(s.clock.now()).toISOString());
    s.clock.advance(10 * HOUR);
    await s.webhooks.dispatcher.tick();
    expect(s.receiver.received).toHaveLength(6);
    // Same delivery id on every attempt, a fresh timestamp each time, every one verifiable.
    expect(new Set(s.receiver.received.map((r) => r.id))).toEqual(new Set([id]));
    expect(new Set(s.receiver.received.map((r) => r.signature.split(',')[0])).size).toBe(6);
    expect(s.receiver.received.every((r) => r.verified)).toBe(true);
    expect(s.observed).toEqual(['retry', 'retry', 'retry', 'retry', 'retry', 'failed']);
  });

  it('does not follow a redirect to an internal address: a failed attempt, nothing fetched there', async () => {
    const internal: string[] = [];
    const target: Server = createServer((req, res) => {
      internal.push(req.url ?? '');
      res.end('secret metadata');
    });
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    try {
      const port = (target.address() as AddressInfo).port;
      await apply({});
      s.receiver.respond = (_req, res) => {
        res.writeHead(301, { location: `http://127.0.0.1:${port}/latest/meta-data/` });
        res.end();
      };
      await emit({
        type: 'run.finished',
        project: 'default',
        run: { id: 'r', status: 'RUN_STATUS_SUCCEEDED' },
      });
      await s.webhooks.dispatcher.tick();
      expect(internal).toEqual([]);
      expect((await deliveries())[0]).toMatchObject({
        state: 'RETRYING',
        lastStatus: 301,
        lastError: 'HTTP 301 (redirects are not followed)',
      });
    } finally {
      await new Promise<void>((resolve) => target.close(() => resolve()));
    }
  });

  it('gives up on a receiver that hangs after webhooks.timeout', async () => {
    await s.webhooks.close();
    s.webhooks = s.build({ timeout: 300 });
    await apply({});
    s.receiver.respond = () => {
      // Never answers.
    };
    await emit({
      type: 'run.finished',
      project: 'default',
      run: { id: 'r', status: 'RUN_STATUS_SUCCEEDED' },
    });
    const started = Date.now();
    await s.webhooks.dispatcher.tick();
    expect(Date.now() - started).toBeLessThan(3_000);
    const [d] = await deliveries();
    expect(d).toMatchObject({ state: 'RETRYING', attempts: 1 });
    expect(d?.lastError).toMatch(/^OUTBOUND_TIMEOUT: POST 127\.0\.0\.1:\d+ timed out/);
    expect(d?.lastStatus).toBeUndefined();
  });

  it('lets other webhooks through while one receiver hangs', async () => {
    await s.webhooks.close();
    s.webhooks = s.build({ timeout: 1_500 });
    const other = await TestReceiver.start(() => s.clock.now());
    try {
      await apply({ name: 'stuck' });
      const fine = await s.webhooks.service.apply(OPEN_PRINCIPAL, { name: 'fine', url: other.url });
      other.secret = fine.secret as string;
      s.receiver.respond = () => {
        // Never answers.
      };
      const started = Date.now();
      for (let i = 0; i < 20; i++) {
        await emit({
          type: 'run.finished',
          project: 'default',
          run: { id: `r${i}`, status: 'RUN_STATUS_SUCCEEDED' },
        });
      }
      const pass = s.webhooks.dispatcher.tick();
      await other.waitFor(20);
      expect(Date.now() - started).toBeLessThan(1_500);
      await pass;
      expect(other.received.every((r) => r.verified)).toBe(true);
      expect((await deliveries('fine')).every((d) => d.state === 'DELIVERED')).toBe(true);
    } finally {
      await other.close();
    }
  });

  it('reads at most a small cap of a 1 GB answer, declared or streamed, and fails the attempt', async () => {
    await apply({});
    let written = 0;
    s.receiver.respond = (_req, res, n) => {
      const chunk = Buffer.alloc(64 * 1024, 'x');
      // First a declared 1 GB, then an undeclared (chunked) stream that would never end.
      res.writeHead(200, n === 1 ? { 'content-length': String(1024 ** 3) } : {});
      const pump = () => {
        while (!res.destroyed && written < 1024 ** 3) {
          written += chunk.length;
          if (!res.write(chunk)) {
            res.once('drain', pump);
            return;
          }
        }
      };
      res.on('close', () => res.removeAllListeners('drain'));
      pump();
    };
    await emit({
      type: 'run.finished',
      project: 'default',
      run: { id: 'r', status: 'RUN_STATUS_SUCCEEDED' },
    });
    await s.webhooks.dispatcher.tick();
    let [d] = await deliveries();
    expect(d).toMatchObject({
      state: 'RETRYING',
      lastError: expect.stringMatching(/^OUTBOUND_RESPONSE_TOO_LARGE/),
    });
    s.clock.advance(5_000);
    await s.webhooks.dispatcher.tick();
    [d] = await deliveries();
    expect(d).toMatchObject({
      state: 'RETRYING',
      attempts: 2,
      lastError: expect.stringMatching(/^OUTBOUND_RESPONSE_TOO_LARGE/),
    });
    // The sender stopped reading long before a gigabyte (socket buffers hold a few MB at most).
    expect(written).toBeLessThan(64 * 1024 ** 2);
  });

  it('sends nothing for a disabled webhook; disabling or deleting before delivery fails it', async () => {
    await apply({ disabled: true });
    expect(await emit(TRACE_SCORED)).toEqual([]);
    expect(
      await emit({
        type: 'run.finished',
        project: 'default',
        run: { id: 'r', status: 'RUN_STATUS_SUCCEEDED' },
      }),
    ).toEqual([]);

    await apply({ disabled: false });
    await emit({
      type: 'run.finished',
      project: 'default',
      run: { id: 'r1', status: 'RUN_STATUS_SUCCEEDED' },
    });
    await apply({ disabled: true });
    await s.webhooks.dispatcher.tick();
    expect(s.receiver.received).toEqual([]);
    expect((await deliveries())[0]).toMatchObject({
      state: 'FAILED',
      lastError: 'the webhook is disabled before delivery',
    });

    await apply({ disabled: false });
    await emit({
      type: 'run.finished',
      project: 'default',
      run: { id: 'r2', status: 'RUN_STATUS_SUCCEEDED' },
    });
    const oldId = (await s.store.webhooks.get('default', 'ci'))?.id ?? '';
    await s.webhooks.service.delete(OPEN_PRINCIPAL, 'default', 'ci');
    await s.webhooks.dispatcher.tick();
    expect(s.receiver.received).toEqual([]);
    // Re-created under the same name: the old deliveries are not its deliveries.
    await apply({});
    expect(await deliveries()).toEqual([]);
    const rows = await s.store.webhooks.listDeliveries(oldId, {
      pageSize: 10,
    });
    expect(rows.items.map((d) => [d.runId, d.state, d.lastError])).toEqual([
      ['r2', 'FAILED', 'the webhook was deleted before delivery'],
      ['r1', 'FAILED', 'the webhook is disabled before delivery'],
    ]);
  });

  it('checks where each request really goes: an address refused at send time is a failed attempt', async () => {
    await apply({});
    // Another replica's configuration no longer allows the host.
    await s.webhooks.close();
    s.webhooks = s.build({ allow_hosts: [] });
    await emit({
      type: 'run.finished',
      project: 'default',
      run: { id: 'r', status: 'RUN_STATUS_SUCCEEDED' },
    });
    await s.webhooks.dispatcher.tick();
    expect(s.receiver.received).toEqual([]);
    expect((await deliveries())[0]?.lastError).toMatch(
      /^OUTBOUND_TARGET_REFUSED: 127\.0\.0\.1 is refused/,
    );
  });

  it('lets one dispatcher send while it holds the lease; another takes over when it lapses', async () => {
    await apply({});
    const other = s.build();
    await s.webhooks.dispatcher.tick();
    await emit({
      type: 'run.finished',
      project: 'default',
      run: { id: 'r1', status: 'RUN_STATUS_SUCCEEDED' },
    });
    await other.dispatcher.tick();
    expect(s.receiver.received).toHaveLength(0);
    await s.webhooks.dispatcher.tick();
    expect(s.receiver.received).toHaveLength(1);

    // The leader stops renewing (crashed); after the TTL the other one sends.
    await emit({
      type: 'run.finished',
      project: 'default',
      run: { id: 'r2', status: 'RUN_STATUS_SUCCEEDED' },
    });
    s.clock.advance(LEASE_TTL_MS);
    await other.dispatcher.tick();
    expect(s.receiver.received).toHaveLength(2);
  });

  it('resends a delivery whose sender died mid-attempt, with the same id', async () => {
    await apply({});
    const [id] = await emit({
      type: 'run.finished',
      project: 'default',
      run: { id: 'r', status: 'RUN_STATUS_SUCCEEDED' },
    });
    // A sender claims the attempt and dies before recording anything.
    const [lost] = await s.store.webhooks.claimDue(
      s.clock.now(),
      10,
      6,
      s.clock.now() + 2_000 + 5_000,
    );
    expect(lost?.id).toBe(id);
    await s.webhooks.dispatcher.tick();
    expect(s.receiver.received).toHaveLength(0);
    s.clock.advance(7_000);
    await s.webhooks.dispatcher.tick();
    expect(s.receiver.received.map((r) => r.id)).toEqual([id]);
    expect((await deliveries())[0]).toMatchObject({ state: 'DELIVERED', attempts: 2 });
    // The dead sender's late outcome changes nothing.
    expect(
      await s.store.webhooks.finishAttempt(
        id as string,
        1,
        { state: 'FAILED', error: 'late' },
        s.clock.now(),
      ),
    ).toBe(false);
  });

  it('records an attempt interrupted by shutdown as due again, and gives the lease up', async () => {
    await apply({});
    s.receiver.respond = () => {
      // Never answers.
    };
    await emit({
      type: 'run.finished',
      project: 'default',
      run: { id: 'r', status: 'RUN_STATUS_SUCCEEDED' },
    });
    const pass = s.webhooks.dispatcher.tick();
    await s.receiver.waitFor(1);
    await s.webhooks.close();
    await pass;
    expect((await deliveries())[0]).toMatchObject({
      state: 'RETRYING',
      attempts: 1,
      lastError: 'interrupted by shutdown',
      nextAttemptAt: new Date(s.clock.now()).toISOString(),
    });
    expect(await s.store.leases.get('webhooks-dispatcher')).toBeUndefined();
    s.receiver.respond = (_req, res) => res.end();
    const next = s.build();
    await next.dispatcher.tick();
    expect(s.receiver.received).toHaveLength(2);
    expect((await deliveries())[0]).toMatchObject({ state: 'DELIVERED', attempts: 2 });
  });

  it('prunes finished deliveries after webhooks.retention and reports the queue', async () => {
    await apply({});
    await emit({
      type: 'run.finished',
      project: 'default',
      run: { id: 'r1', status: 'RUN_STATUS_SUCCEEDED' },
    });
    expect(await s.webhooks.service.queueStats()).toEqual({ depth: 1, oldestAgeSeconds: 0 });
    s.clock.advance(90_000);
    expect(await s.webhooks.service.queueStats()).toEqual({ depth: 1, oldestAgeSeconds: 90 });
    await s.webhooks.dispatcher.tick();
    expect(await s.webhooks.service.queueStats()).toEqual({ depth: 0, oldestAgeSeconds: 0 });
    s.clock.advance(168 * HOUR - 1);
    await s.webhooks.dispatcher.tick();
    expect(await deliveries()).toHaveLength(1);
    // Pruning runs once a minute.
    s.clock.advance(60_000);
    await s.webhooks.dispatcher.tick();
    expect(await deliveries()).toHaveLength(0);
  });

  it('never logs the secret, the payload or the URL path', async () => {
    const applied = await apply({});
    s.receiver.respond = (_req, res) => {
      res.writeHead(500);
      res.end();
    };
    await emit(TRACE_SCORED);
    await emit({
      type: 'run.finished',
      project: 'default',
      run: { id: 'r', status: 'RUN_STATUS_ERROR' },
    });
    await s.webhooks.dispatcher.tick();
    const logs = s.logs.join('\n');
    expect(logs).toContain('webhook attempt failed');
    expect(logs).toContain('"audit"');
    expect(logs).not.toContain(applied.secret);
    expect(logs).not.toContain('/hooks/touchstone');
    expect(logs).not.toContain('RUN_STATUS_ERROR');
  });
});
