import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, createApp } from '../app/index.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { loadConfig } from '../config/index.js';
import type { WebhookEvent } from './index.js';
import { TestReceiver } from './receiver.testkit.js';

/**
 * Two replicas (two apps, each with its dispatcher running) on one PostgreSQL database: the lease
 * makes one of them the sender, and every delivery reaches the receiver exactly once.
 */

const PG_URL = process.env.TOUCHSTONE_TEST_PG;

describe.skipIf(PG_URL === undefined || PG_URL === '')(
  'webhooks on two replicas (PostgreSQL)',
  () => {
    const schema = `ts_wh_${randomBytes(6).toString('hex')}`;
    let admin: pg.Client;
    let receiver: TestReceiver;
    let a: App;
    let b: App;

    async function replica(url: string): Promise<App> {
      const config = loadConfig({
        env: {},
        overrides: {
          listen: '127.0.0.1:0',
          log_level: 'silent',
          store: { driver: 'postgres', url, pool_size: 4 },
          webhooks: { allow_hosts: ['127.0.0.1'] },
        },
      });
      const app = await createApp(config, {
        env: {},
        processMetrics: false,
        logger: pino({ level: 'silent' }),
      });
      await app.listen();
      return app;
    }

    beforeAll(async () => {
      admin = new pg.Client({ connectionString: PG_URL });
      await admin.connect();
      await admin.query(`create schema ${schema}`);
      const url = new URL(PG_URL as string);
      url.searchParams.set('options', `-c search_path=${schema}`);
      receiver = await TestReceiver.start();
      [a, b] = await Promise.all([replica(url.toString()), replica(url.toString())]);
    });

    afterAll(async () => {
      await Promise.allSettled([a?.close(), b?.close()]);
      await receiver?.close();
      await admin.query(`drop schema ${schema} cascade`);
      await admin.end();
    });

    const run = (i: number): WebhookEvent => ({
      type: 'run.finished',
      project: 'default',
      run: { id: `run_${i}`, status: 'RUN_STATUS_SUCCEEDED' },
    });

    async function emitOn(app: App, from: number, count: number): Promise<string[]> {
      const ids: string[] = [];
      for (let i = from; i < from + count; i += 10) {
        const batch = await app.store.withTransaction(async (tx) => {
          const out: string[] = [];
          for (let j = i; j < Math.min(i + 10, from + count); j++) {
            out.push(...(await app.webhooks.emitter.emitEvent(tx, run(j))));
          }
          return out;
        });
        ids.push(...batch);
      }
      return ids;
    }

    it('sends each delivery once, from one sender, whichever replica enqueued it', async () => {
      const applied = await a.webhooks.service.apply(OPEN_PRINCIPAL, {
        name: 'ci',
        url: receiver.url,
      });
      receiver.secret = applied.secret as string;
      const ids = (await Promise.all([emitOn(a, 0, 150), emitOn(b, 150, 150)])).flat();
      expect(new Set(ids).size).toBe(300);
      await receiver.waitFor(300, 30_000);
      // Give a would-be second sender time to show itself.
      await new Promise((r) => setTimeout(r, 2_500));
      const received = receiver.received.map((r) => r.id);
      expect(received).toHaveLength(300);
      expect(new Set(received)).toEqual(new Set(ids));
      expect(receiver.received.every((r) => r.verified)).toBe(true);
      // One replica did all the sending.
      const delivered = async (app: App) => {
        const text = (await app.server.inject({ method: 'GET', url: '/metrics' })).body;
        const m = /^touchstone_webhook_attempts_total\{outcome="delivered"\} (\d+)/m.exec(text);
        return Number(m?.[1]);
      };
      expect([await delivered(a), await delivered(b)].sort((x, y) => x - y)).toEqual([0, 300]);
    }, 60_000);

    it('applies a webhook on one replica and sees it used for events of the other', async () => {
      receiver.received.length = 0;
      const applied = await b.webhooks.service.apply(OPEN_PRINCIPAL, {
        name: 'scores',
        url: receiver.url,
        events: ['trace.scored'],
      });
      receiver.secret = applied.secret as string;
      const [id] = await a.store.withTransaction((tx) =>
        a.webhooks.emitter.emitEvent(tx, {
          type: 'trace.scored',
          project: 'default',
          policy: 'p',
          trace: {
            traceId: 't1',
            service: 's',
            name: 'n',
            startTime: '2026-01-01T00:00:00.000Z',
            durationMs: 1,
            steps: 1,
            error: false,
            labels: {},
          },
          results: [],
        }),
      );
      const [got] = await receiver.waitFor(1);
      expect(got).toMatchObject({ id, event: 'trace.scored', verified: true });
    });

    it('keeps sending when the sending replica shuts down', async () => {
      receiver.received.length = 0;
      await a.webhooks.service.delete(OPEN_PRINCIPAL, 'default', 'scores');
      const secret = (await a.store.webhooks.get('default', 'ci'))?.secret as string;
      receiver.secret = secret;
      await a.close();
      const ids = await emitOn(b, 1000, 50);
      await receiver.waitFor(50, 30_000);
      expect(new Set(receiver.received.map((r) => r.id))).toEqual(new Set(ids));
    }, 60_000);
  },
);
