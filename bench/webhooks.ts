/**
 * Webhook delivery: 10k `trace.scored` events, each enqueued in its own transaction (as the policy
 * engine does), delivered to a local receiver that answers 204.
 *  1. burst: all 10k enqueued as fast as possible while the dispatcher sends; deliveries/s from the
 *     first enqueue to the last receipt, and enqueue-to-delivery latency (commit → receipt);
 *  2. steady: 2k events at 200/s; enqueue-to-delivery p50/p95 when the queue is not backed up.
 * The server runs in this process on SQLite in a temp dir (and on PostgreSQL too when
 * TOUCHSTONE_TEST_PG is set); the receiver is a plain node:http server on 127.0.0.1.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { type App, createApp } from '../src/app/index.js';
import { OPEN_PRINCIPAL } from '../src/auth/index.js';
import { loadConfig } from '../src/config/index.js';
import type { WebhookEvent } from '../src/webhooks/index.js';
import { freshPgSchema } from '../test/support/stores.js';
import { fmt, percentile } from './stats.js';

const BURST = 10_000;
const STEADY = 2_000;
const STEADY_RATE = 200;

function event(i: number): WebhookEvent {
  return {
    type: 'trace.scored',
    project: 'default',
    policy: 'support-quality',
    trace: {
      traceId: randomBytes(16).toString('hex'),
      project: 'default',
      service: 'support-bot',
      name: 'answer',
      startTime: new Date().toISOString(),
      duration: '1.2s',
      durationMs: 1200,
      steps: 3 + (i % 5),
      error: i % 10 === 0,
      labels: { team: 'support', version: 'v2' },
    },
    results: [
      {
        evaluator: 'tool-errors',
        outcome: 'OUTCOME_SCORED',
        scores: [{ name: 'tool-errors', value: i % 10 === 0 ? 1 : 0 }],
        durationMs: 0.05,
      },
      {
        evaluator: 'exact-match',
        outcome: 'OUTCOME_SCORED',
        scores: [{ name: 'exact-match', passed: i % 3 !== 0 }],
        durationMs: 0.02,
      },
    ],
  };
}

interface Receiver {
  url: string;
  arrivals: Map<string, number>;
  waitFor(n: number): Promise<void>;
  close(): Promise<void>;
}

async function receiver(): Promise<Receiver> {
  const arrivals = new Map<string, number>();
  let wake: () => void = () => {};
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      arrivals.set(String(req.headers['touchstone-delivery']), performance.now());
      res.writeHead(204).end();
      wake();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    arrivals,
    async waitFor(n) {
      while (arrivals.size < n)
        await new Promise<void>((r) => {
          wake = r;
          setTimeout(r, 200);
        });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function emit(app: App, i: number, enqueued: Map<string, number>): Promise<void> {
  const ids = await app.store.withTransaction((tx) => app.webhooks.emitter.emitEvent(tx, event(i)));
  const at = performance.now();
  for (const id of ids) enqueued.set(id, at);
}

function latencies(enqueued: Map<string, number>, arrivals: Map<string, number>): number[] {
  return [...enqueued].map(([id, at]) => (arrivals.get(id) ?? Number.NaN) - at);
}

async function runOn(label: string, store: Record<string, unknown>, dataDir: string) {
  const config = loadConfig({
    overrides: {
      data_dir: dataDir,
      listen: '127.0.0.1:0',
      log_level: 'silent',
      store,
      webhooks: { allow_hosts: ['127.0.0.1'] },
    },
  });
  const app = await createApp(config, {
    env: {},
    processMetrics: false,
    logger: pino({ level: 'silent' }),
  });
  const rx = await receiver();
  try {
    await app.listen();
    await app.webhooks.service.apply(OPEN_PRINCIPAL, {
      name: 'bench',
      url: rx.url,
      events: ['trace.scored'],
    });

    // 1. Burst.
    const burst = new Map<string, number>();
    const started = performance.now();
    for (let i = 0; i < BURST; i++) await emit(app, i, burst);
    const enqueueEnd = performance.now();
    const enqueuedIn = enqueueEnd - started;
    const pendingAtEnd = BURST - [...burst.keys()].filter((id) => rx.arrivals.has(id)).length;
    await rx.waitFor(BURST);
    const lastArrival = Math.max(...[...burst.keys()].map((id) => rx.arrivals.get(id) ?? 0));
    const elapsed = lastArrival - started;
    const burstLat = latencies(burst, rx.arrivals);

    // 2. Steady rate.
    const steady = new Map<string, number>();
    const t0 = performance.now();
    for (let i = 0; i < STEADY; i++) {
      const due = t0 + (i * 1000) / STEADY_RATE;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await emit(app, i, steady);
    }
    await rx.waitFor(BURST + STEADY);
    const steadyLat = latencies(steady, rx.arrivals);

    console.log(
      `[${label}] burst: ${BURST} events enqueued in ${fmt(enqueuedIn / 1000, 2)} s ` +
        `(${fmt(BURST / (enqueuedIn / 1000), 0)}/s), ${pendingAtEnd} not yet delivered then; ` +
        `those drained at ${fmt(pendingAtEnd / ((lastArrival - enqueueEnd) / 1000), 0)} deliveries/s`,
    );
    console.log(
      `[${label}] burst: ${fmt(BURST / (elapsed / 1000), 0)} deliveries/s ` +
        `(first enqueue → last receipt ${fmt(elapsed / 1000, 2)} s); enqueue→delivery ` +
        `p50 ${fmt(percentile(burstLat, 50), 0)} ms, p95 ${fmt(percentile(burstLat, 95), 0)} ms`,
    );
    console.log(
      `[${label}] steady ${STEADY_RATE}/s: enqueue→delivery p50 ${fmt(percentile(steadyLat, 50), 1)} ms, ` +
        `p95 ${fmt(percentile(steadyLat, 95), 1)} ms, p99 ${fmt(percentile(steadyLat, 99), 1)} ms`,
    );
    const duplicates = rx.arrivals.size - (BURST + STEADY);
    if (duplicates !== 0) console.log(`[${label}] WARNING: ${duplicates} unexpected deliveries`);
  } finally {
    await app.close();
    await rx.close();
  }
}

export async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'touchstone-bench-webhooks-'));
  try {
    await runOn('sqlite', { driver: 'sqlite' }, dataDir);
    const pgUrl = process.env.TOUCHSTONE_TEST_PG;
    if (pgUrl !== undefined && pgUrl !== '') {
      const schema = await freshPgSchema(pgUrl);
      try {
        await runOn('postgres', { driver: 'postgres', url: schema.url }, dataDir);
      } finally {
        await schema.drop();
      }
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}
