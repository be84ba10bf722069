import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SQLITE_FILE_NAME } from '../../src/store/sqlite/backend.js';
import { TestReceiver } from '../../src/webhooks/receiver.testkit.js';
import { agentTrace, jsonBody, protobufBody, recordSpans } from '../support/otel.js';
import {
  callJson,
  eventually,
  kill9,
  launchServer,
  type RunningServer,
} from '../support/process.js';

/**
 * Online scoring on the real `touchstone serve` process: kill -9 while traces are being scored
 * and restart on the same data (SQLite), and two processes sharing one PostgreSQL schema. Either
 * way every trace version is scored exactly once per policy: one stored result set and one
 * `trace.scored` outbox row per (trace, policy), nothing left in the queue.
 */

const POLICIES = {
  quality: [{ ref: 'tool-errors' }, { ref: 'step-budget' }],
  steps: [{ ref: 'step-budget' }],
} as const;
const POLICY_NAMES = Object.keys(POLICIES).sort();

/** SIGTERM (a graceful stop), then SIGKILL if it has not exited after 15 s. */
async function stop(r: RunningServer | undefined): Promise<void> {
  if (r === undefined || r.server.proc.exitCode !== null || r.server.proc.signalCode !== null)
    return;
  r.server.proc.kill('SIGTERM');
  const timer = setTimeout(() => r.server.proc.kill('SIGKILL'), 15_000);
  await r.server.exited;
  clearTimeout(timer);
}

async function applyPolicies(base: string): Promise<void> {
  for (const [name, evaluators] of Object.entries(POLICIES)) {
    await callJson(base, 'POST', '/v1alpha1/policies', {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name },
      spec: { stages: [{ evaluators }] },
    });
  }
}

/** A webhook subscribed to trace.scored only; returns its secret. */
async function applyWebhook(base: string, url: string): Promise<string> {
  const hook = await callJson(base, 'POST', '/v1alpha1/webhooks', {
    name: 'scored',
    url,
    events: ['WEBHOOK_EVENT_TRACE_SCORED'],
  });
  return hook.secret as string;
}

/** Sends `count` agent traces in one OTLP/HTTP request (protobuf or JSON); returns their ids. */
async function sendTraces(
  base: string,
  count: number,
  encoding: 'json' | 'protobuf',
): Promise<string[]> {
  const ids: string[] = [];
  const spans = recordSpans({ 'service.name': 'weather' }, (tracer) => {
    for (let i = 0; i < count; i++) ids.push(agentTrace(tracer, { fail: i % 3 === 0 }));
  });
  const res = await fetch(`${base}/v1/traces`, {
    method: 'POST',
    body: encoding === 'json' ? jsonBody(spans) : protobufBody(spans),
    headers: {
      'content-type': encoding === 'json' ? 'application/json' : 'application/x-protobuf',
    },
  });
  if (res.status !== 200) throw new Error(`OTLP export: HTTP ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
  return ids;
}

/** `/metrics` as name{labels} → value. */
async function metrics(base: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/** (trace, policy) result sets this process stored, from its own counter. */
function scoredHere(m: Map<string, number>): number {
  let n = 0;
  for (const [k, v] of m) if (k.startsWith('touchstone_policy_traces_scored_total{')) n += v;
  return n;
}

/** Every scores entry, paged; only meaningful once scoring is quiet (the order is scored_at). */
async function allScores(
  base: string,
): Promise<{ trace: { traceId: string }; results: Record<string, { evaluator: string }[]> }[]> {
  const out = [];
  let token: string | undefined;
  do {
    const page = await callJson(
      base,
      'GET',
      `/v1alpha1/scores?page_size=1000${token === undefined ? '' : `&page_token=${encodeURIComponent(token)}`}`,
    );
    out.push(...page.entries);
    token = page.next_page_token;
  } while (token !== undefined);
  return out;
}

/** Waits until no trace is open, the online queue is empty and every id has a scores entry. */
async function drained(bases: string[], ids: readonly string[], timeoutMs: number) {
  return eventually(async () => {
    for (const base of bases) {
      const m = await metrics(base);
      if (m.get('touchstone_open_traces') !== 0) return undefined;
      if (m.get('touchstone_online_queue_depth') !== 0) return undefined;
    }
    const entries = await allScores(bases[0] as string);
    const complete = entries.filter((e) => POLICY_NAMES.every((p) => e.results[p] !== undefined));
    return complete.length === ids.length ? entries : undefined;
  }, timeoutMs);
}

/** (trace, policy) pairs, as `trace/policy`, every id with every policy. */
function expectedPairs(ids: readonly string[]): string[] {
  return ids.flatMap((id) => POLICY_NAMES.map((p) => `${id}/${p}`)).sort();
}

/** Asserts what the API shows: every trace scored by both policies, with their evaluators. */
function checkEntries(
  entries: Awaited<ReturnType<typeof allScores>>,
  ids: readonly string[],
): void {
  expect(entries.map((e) => e.trace.traceId).sort()).toEqual([...ids].sort());
  for (const e of entries) {
    expect(Object.keys(e.results).sort()).toEqual(POLICY_NAMES);
    for (const [policy, evaluators] of Object.entries(POLICIES)) {
      expect(e.results[policy]?.map((r) => r.evaluator)).toEqual(evaluators.map((x) => x.ref));
    }
  }
}

interface DbFacts {
  /** (project, trace, policy, digest) groups whose rows carry more than one scored_at. */
  mixedResultSets: unknown[];
  /** trace/policy → distinct digests, rows. */
  resultSets: Map<string, { digests: number; rows: number }>;
  /** trace/policy → trace.scored outbox rows. */
  deliveries: Map<string, number>;
  workItems: number;
  completedTraces: number;
  traces: number;
}

const SQL = {
  mixed: `select project, trace_id, policy, digest, count(distinct scored_at) as n
          from results group by project, trace_id, policy, digest
          having count(distinct scored_at) > 1`,
  sets: `select trace_id, policy, count(distinct digest) as digests, count(*) as n
         from results group by trace_id, policy`,
  deliveries: `select trace_id, policy, count(*) as n from webhook_deliveries
               where event = 'trace.scored' group by trace_id, policy`,
  work: 'select count(*) as n from work_items',
  traces: 'select count(*) as n, count(completed_at) as completed from traces',
};

function facts(
  mixed: unknown[],
  sets: { trace_id: string; policy: string; digests: unknown; n: unknown }[],
  deliveries: { trace_id: string; policy: string; n: unknown }[],
  work: unknown,
  traces: { n: unknown; completed: unknown },
): DbFacts {
  return {
    mixedResultSets: mixed,
    resultSets: new Map(
      sets.map((r) => [
        `${r.trace_id}/${r.policy}`,
        { digests: Number(r.digests), rows: Number(r.n) },
      ]),
    ),
    deliveries: new Map(deliveries.map((r) => [`${r.trace_id}/${r.policy}`, Number(r.n)])),
    workItems: Number(work),
    traces: Number(traces.n),
    completedTraces: Number(traces.completed),
  };
}

function sqliteFacts(dataDir: string): DbFacts {
  const db = new Database(join(dataDir, SQLITE_FILE_NAME), { readonly: true });
  try {
    return facts(
      db.prepare(SQL.mixed).all(),
      db.prepare(SQL.sets).all() as never,
      db.prepare(SQL.deliveries).all() as never,
      (db.prepare(SQL.work).get() as { n: number }).n,
      db.prepare(SQL.traces).get() as never,
    );
  } finally {
    db.close();
  }
}

async function pgFacts(client: pg.Client): Promise<DbFacts> {
  const q = async (text: string) => (await client.query(text)).rows;
  return facts(
    await q(SQL.mixed),
    (await q(SQL.sets)) as never,
    (await q(SQL.deliveries)) as never,
    (await q(SQL.work))[0]?.n,
    (await q(SQL.traces))[0] as never,
  );
}

/** One result set and one trace.scored outbox row per (trace, policy); nothing else. */
function checkDb(f: DbFacts, ids: readonly string[]): void {
  const pairs = expectedPairs(ids);
  expect(f.mixedResultSets).toEqual([]);
  expect([...f.resultSets.keys()].sort()).toEqual(pairs);
  for (const [pair, set] of f.resultSets) {
    const policy = pair.split('/')[1] as keyof typeof POLICIES;
    expect({ pair, ...set }).toEqual({ pair, digests: 1, rows: POLICIES[policy].length });
  }
  expect([...f.deliveries.keys()].sort()).toEqual(pairs);
  const twice = [...f.deliveries].filter(([, n]) => n !== 1);
  expect(twice).toEqual([]);
  expect(f.workItems).toBe(0);
  expect(f.traces).toBe(ids.length);
  expect(f.completedTraces).toBe(ids.length);
}

/**
 * What the receiver got: every (trace, policy) under exactly one delivery id (an attempt cut by
 * kill -9 is sent again under the same id), every signature valid.
 */
function checkReceived(receiver: TestReceiver, ids: readonly string[]): void {
  const idsOf = new Map<string, Set<string>>();
  for (const r of receiver.received) {
    expect(r.event).toBe('trace.scored');
    expect(r.verified).toBe(true);
    const body = JSON.parse(r.body) as { policy: string; trace: { traceId: string } };
    const pair = `${body.trace.traceId}/${body.policy}`;
    idsOf.set(pair, (idsOf.get(pair) ?? new Set()).add(r.id));
  }
  expect([...idsOf.keys()].sort()).toEqual(expectedPairs(ids));
  expect([...idsOf].filter(([, s]) => s.size !== 1)).toEqual([]);
}

/**
 * Read straight from the SQLite file: distinct (trace, policy) pairs with results, and work items
 * hidden by a claim (or a postponement) right now.
 */
function progress(dataDir: string): { pairs: number; hidden: number } {
  const db = new Database(join(dataDir, SQLITE_FILE_NAME), { readonly: true, fileMustExist: true });
  try {
    const pairs = db
      .prepare('select count(*) as n from (select distinct trace_id, policy from results)')
      .get() as { n: number };
    const hidden = db
      .prepare('select count(*) as n from work_items where visible_at > ?')
      .get(Date.now()) as { n: number };
    return { pairs: pairs.n, hidden: hidden.n };
  } finally {
    db.close();
  }
}

/** `eventually`, polling every 10 ms (scoring 300 traces takes a couple of seconds). */
async function watch<T>(check: () => T | undefined, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Distinct delivery ids received so far. */
const deliveredIds = (receiver: TestReceiver) => new Set(receiver.received.map((r) => r.id)).size;

const log = (msg: string) => process.stdout.write(`[online e2e] ${msg}\n`);

describe('online scoring survives kill -9 of the real process (SQLite)', () => {
  let dir = '';
  let dataDir = '';
  let configFile = '';
  let receiver: TestReceiver;
  let running: RunningServer | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'touchstone-online-e2e-'));
    dataDir = join(dir, 'data');
    configFile = join(dir, 'config.yaml');
    receiver = await TestReceiver.start();
    writeFileSync(
      configFile,
      [
        'log_level: warn',
        'traces:',
        '  completion_grace: 200ms',
        'online:',
        '  visibility_timeout: 3s',
        '  poll_interval: 100ms',
        '  batch_size: 32',
        'webhooks:',
        '  timeout: 2s',
        "  allow_hosts: ['127.0.0.1']",
        '',
      ].join('\n'),
    );
  });
  afterAll(async () => {
    await kill9(running);
    await receiver?.close();
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('scores every trace exactly once per policy across kills mid-ingest and mid-scoring', async () => {
    const started = Date.now();
    const ids: string[] = [];
    running = await launchServer(dataDir, configFile);
    await applyPolicies(running.base);
    receiver.secret = await applyWebhook(running.base, receiver.url);

    // Kill 1: right after the OTLP acks, before the completion grace has passed for most.
    for (let i = 0; i < 3; i++) {
      ids.push(...(await sendTraces(running.base, 50, i % 2 === 0 ? 'protobuf' : 'json')));
    }
    await kill9(running);
    const first = progress(dataDir);
    log(
      `kill 1 right after ${ids.length} acked traces: ${first.pairs} (trace, policy) results, ` +
        `${first.hidden} work items claimed (${Date.now() - started} ms)`,
    );

    // Kills 2 and 3: while this process is scoring: it stored some results and not all. The
    // database is watched from here (WAL readers block no one): the server's own /metrics waits
    // for its single SQLite connection behind the scoring transactions, too late to tell.
    const midway: boolean[] = [];
    for (let kill = 2; kill <= 3; kill++) {
      running = await launchServer(dataDir, configFile);
      if (kill === 2) {
        for (let i = 0; i < 3; i++) {
          ids.push(...(await sendTraces(running.base, 50, i % 2 === 0 ? 'json' : 'protobuf')));
        }
      }
      const total = POLICY_NAMES.length * ids.length;
      const before = progress(dataDir).pairs;
      // Well into its passes and, likely, part way through a claimed batch (32 traces = 64
      // pairs), so the dead process leaves claimed items behind (logged, not asserted).
      const from = kill === 2 ? Math.floor(total / 4) : before + Math.ceil((total - before) / 4);
      const at = await watch(() => {
        const p = progress(dataDir);
        return p.pairs >= from || p.pairs === total ? p : undefined;
      }, 40_000);
      await kill9(running);
      midway.push(at.pairs < total);
      log(
        `kill ${kill} ${at.pairs < total ? 'mid-scoring' : 'after scoring'}: ` +
          `${at.pairs - before} (trace, policy) results stored by this process, ${at.pairs} of ` +
          `${total} in all, ${at.hidden} work items claimed (${Date.now() - started} ms)`,
      );
    }
    // The second process has all 300 traces to score: it is caught mid-way.
    expect(midway[0]).toBe(true);

    // The last process: the dead ones' claims become visible again after visibility_timeout.
    running = await launchServer(dataDir, configFile);
    const base = running.base;
    const entries = await drained([base], ids, 60_000);
    log(`queue drained (${Date.now() - started} ms)`);
    checkEntries(entries, ids);
    const one = ids[0] as string;
    const single = await callJson(base, 'GET', `/v1alpha1/traces/${one}/scores`);
    expect(Object.keys(single.results).sort()).toEqual(POLICY_NAMES);

    // Deliveries cut by a kill are sent again after the dead dispatcher's lease lapses.
    await eventually(async () => {
      const m = await metrics(base);
      return m.get('touchstone_webhook_queue_depth') === 0 &&
        deliveredIds(receiver) >= 2 * ids.length
        ? true
        : undefined;
    }, 45_000);
    log(`webhooks delivered (${Date.now() - started} ms)`);
    await stop(running);

    checkDb(sqliteFacts(dataDir), ids);
    checkReceived(receiver, ids);
    log(`done in ${Date.now() - started} ms`);
  }, 180_000);
});

const PG_URL = process.env.TOUCHSTONE_TEST_PG;

describe.skipIf(PG_URL === undefined || PG_URL === '')(
  'online scoring by two processes on one PostgreSQL',
  () => {
    let dir = '';
    let configFile = '';
    /** The same, scoring in the worker thread (`online.worker`, the default): one process scores so. */
    let workerConfigFile = '';
    const schema = `ts_e2e_${randomBytes(6).toString('hex')}`;
    let admin: pg.Client;
    let receiver: TestReceiver;
    const servers: RunningServer[] = [];

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'touchstone-online-pg-e2e-'));
      configFile = join(dir, 'config.yaml');
      admin = new pg.Client({ connectionString: PG_URL });
      await admin.connect();
      await admin.query(`create schema ${schema}`);
      const url = new URL(PG_URL as string);
      url.searchParams.set('options', `-c search_path=${schema}`);
      receiver = await TestReceiver.start();
      const lines = (worker: boolean) =>
        [
          'log_level: warn',
          'store:',
          '  driver: postgres',
          `  url: ${JSON.stringify(url.toString())}`,
          '  pool_size: 4',
          'traces:',
          '  completion_grace: 200ms',
          'online:',
          '  visibility_timeout: 3s',
          '  poll_interval: 100ms',
          '  batch_size: 8',
          `  worker: ${worker}`,
          'webhooks:',
          '  timeout: 2s',
          "  allow_hosts: ['127.0.0.1']",
          '',
        ].join('\n');
      writeFileSync(configFile, lines(false));
      workerConfigFile = join(dir, 'config-worker.yaml');
      writeFileSync(workerConfigFile, lines(true));
    });
    afterAll(async () => {
      for (const s of servers) await kill9(s);
      await receiver?.close();
      await admin?.query(`drop schema if exists ${schema} cascade`);
      await admin?.end();
      if (dir !== '') rmSync(dir, { recursive: true, force: true });
    });

    it('scores every trace exactly once per policy with both processes claiming', async () => {
      const started = Date.now();
      // Both at once: the migrations are applied by one of them, under the migration lock. The
      // second scores in its worker thread (`online.worker`), the first on its main thread.
      servers.push(
        ...(await Promise.all([
          launchServer(join(dir, 'data-a'), configFile),
          launchServer(join(dir, 'data-b'), workerConfigFile),
        ])),
      );
      const [a, b] = servers as [RunningServer, RunningServer];
      log(`two processes up (${Date.now() - started} ms)`);
      await applyPolicies(a.base);
      receiver.secret = await applyWebhook(a.base, receiver.url);
      // The other process's engine re-reads policies every second: traces it scores before that
      // would not be scored by them at all (by design), so give it time to see them.
      await eventually(async () => {
        const list = await callJson(b.base, 'GET', '/v1alpha1/policies');
        return JSON.stringify(list).includes('"steps"') ? true : undefined;
      });
      await new Promise((r) => setTimeout(r, 2_000));

      const ids: string[] = [];
      const sends = [];
      for (let i = 0; i < 6; i++) {
        const target = i % 2 === 0 ? a : b;
        sends.push(sendTraces(target.base, 50, i % 3 === 0 ? 'json' : 'protobuf'));
      }
      for (const batch of await Promise.all(sends)) ids.push(...batch);

      const entries = await drained([a.base, b.base], ids, 60_000);
      log(`both queues drained (${Date.now() - started} ms)`);
      checkEntries(entries, ids);
      // Each process counts the (trace, policy) results it stored (after its commit): together
      // exactly one per pair. Which process took how many is up to the claims.
      const [byA, byB] = await eventually(async () => {
        const counts = [scoredHere(await metrics(a.base)), scoredHere(await metrics(b.base))];
        return (counts[0] ?? 0) + (counts[1] ?? 0) >= 2 * ids.length ? counts : undefined;
      });
      log(`policy results stored: ${byA} by one process, ${byB} by the other`);
      expect((byA ?? 0) + (byB ?? 0)).toBe(2 * ids.length);

      await eventually(async () => {
        const ma = await metrics(a.base);
        return ma.get('touchstone_webhook_queue_depth') === 0 &&
          deliveredIds(receiver) >= 2 * ids.length
          ? true
          : undefined;
      }, 45_000);
      await Promise.all(servers.map((s) => stop(s)));

      await admin.query(`set search_path to ${schema}`);
      checkDb(await pgFacts(admin), ids);
      checkReceived(receiver, ids);
      log(`done in ${Date.now() - started} ms`);
    }, 180_000);
  },
);
