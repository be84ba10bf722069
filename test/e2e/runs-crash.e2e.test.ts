import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SQLITE_FILE_NAME } from '../../src/store/sqlite/backend.js';
import { TestReceiver } from '../../src/webhooks/receiver.testkit.js';
import { OpenAiStub } from '../support/openai-stub.js';
import {
  callJson,
  eventually,
  kill9,
  launchServer,
  type RunningServer,
} from '../support/process.js';

/**
 * A run survives the death of the process executing it: two `touchstone serve` processes on one
 * store (a shared SQLite file, and one PostgreSQL schema when TOUCHSTONE_TEST_PG is set); the one
 * executing is killed with SIGKILL mid-run, the other adopts the run once its lease lapses and
 * finishes it. Every (record, trial, evaluator) has exactly one result, no output is generated
 * twice, and exactly one `run.finished` delivery is in the outbox.
 */

const PG_URL = process.env.TOUCHSTONE_TEST_PG;
const RECORDS = 30;
const TRIALS = 2;
const TOTAL = RECORDS * TRIALS;
const EVALUATORS = ['exact-match', 'contains'];

/** What the store holds for the run, read directly (not through the API). */
interface Facts {
  results: { record_index: number; trial: number; evaluator: string }[];
  outputs: number;
  finishedDeliveries: number;
}

const RESULTS_SQL = 'select record_index, trial, evaluator from run_results where run_id = $1';
const OUTPUTS_SQL = 'select count(*) as n from run_outputs where run_id = $1';
const DELIVERIES_SQL =
  "select count(*) as n from webhook_deliveries where event = 'run.finished' and payload like $1";

function sqliteFacts(dataDir: string, runId: string): Facts {
  const db = new Database(join(dataDir, SQLITE_FILE_NAME), { readonly: true });
  try {
    const q = (sql: string) => sql.replace(/\$1/g, '?');
    const results = db.prepare(q(RESULTS_SQL)).all(runId) as Facts['results'];
    const outputs = (db.prepare(q(OUTPUTS_SQL)).get(runId) as { n: number }).n;
    const deliveries = (db.prepare(q(DELIVERIES_SQL)).get(`%${runId}%`) as { n: number }).n;
    return { results, outputs, finishedDeliveries: deliveries };
  } finally {
    db.close();
  }
}

async function pgFacts(client: pg.Client, runId: string): Promise<Facts> {
  const results = (await client.query(RESULTS_SQL, [runId])).rows as Facts['results'];
  const outputs = Number((await client.query(OUTPUTS_SQL, [runId])).rows[0].n);
  const deliveries = Number((await client.query(DELIVERIES_SQL, [`%${runId}%`])).rows[0].n);
  return { results, outputs, finishedDeliveries: deliveries };
}

interface Variant {
  name: string;
  /** Config lines selecting the store, and the data dirs of the two processes. */
  setup(dir: string): Promise<{ store: string[]; dataDirs: [string, string] }>;
  facts(dataDir: string, runId: string): Promise<Facts>;
  dispose(): Promise<void>;
}

function sqliteVariant(): Variant {
  return {
    name: 'one SQLite file',
    async setup(dir) {
      // Both processes open the same data dir: SQLite in WAL mode takes writers from both.
      const data = join(dir, 'data');
      return { store: [], dataDirs: [data, data] };
    },
    async facts(dataDir, runId) {
      return sqliteFacts(dataDir, runId);
    },
    async dispose() {},
  };
}

function postgresVariant(url: string): Variant {
  const schema = `ts_runs_e2e_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  let reader: pg.Client | undefined;
  return {
    name: 'one PostgreSQL schema',
    async setup(dir) {
      await admin.connect();
      await admin.query(`create schema ${schema}`);
      const scoped = new URL(url);
      scoped.searchParams.set('options', `-c search_path=${schema}`);
      reader = new pg.Client({ connectionString: scoped.toString() });
      await reader.connect();
      return {
        store: [
          'store:',
          '  driver: postgres',
          `  url: ${JSON.stringify(scoped.toString())}`,
          '  pool_size: 4',
        ],
        dataDirs: [join(dir, 'data-a'), join(dir, 'data-b')],
      };
    },
    async facts(_dataDir, runId) {
      return pgFacts(reader as pg.Client, runId);
    },
    async dispose() {
      await reader?.end();
      await admin.query(`drop schema if exists ${schema} cascade`);
      await admin.end();
    },
  };
}

const variants: Variant[] = [sqliteVariant()];
if (PG_URL !== undefined && PG_URL !== '') variants.push(postgresVariant(PG_URL));

describe.each(variants)('a run adopted after kill -9, two processes on $name', (variant) => {
  let dir = '';
  let configFile = '';
  let dataDirs: [string, string] = ['', ''];
  const stub = new OpenAiStub();
  let stubUrl = '';
  let receiver: TestReceiver;
  const running: RunningServer[] = [];
  /** While set, the stub holds every answer this long (the executing process looks busy). */
  let holdMs = 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'touchstone-runs-crash-e2e-'));
    configFile = join(dir, 'config.yaml');
    stub.answer = (question) => ({ content: `A-${question}`, delayMs: holdMs || 40 });
    stubUrl = await stub.start();
    receiver = await TestReceiver.start();
    const setup = await variant.setup(dir);
    dataDirs = setup.dataDirs;
    writeFileSync(
      configFile,
      [
        'log_level: warn',
        ...setup.store,
        'runs:',
        '  lease_timeout: 2s',
        "  allow_hosts: ['127.0.0.1']",
        'webhooks:',
        '  timeout: 2s',
        "  allow_hosts: ['127.0.0.1']",
        '',
      ].join('\n'),
    );
  });
  afterAll(async () => {
    for (const r of running) await kill9(r);
    await stub.stop();
    await receiver?.close();
    await variant.dispose();
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('finishes the run on the other process with one result per item and evaluator', async () => {
    const a = await launchServer(dataDirs[0], configFile);
    running.push(a);
    const hook = await callJson(a.base, 'POST', '/v1alpha1/webhooks', {
      name: 'runs',
      url: receiver.url,
      events: ['WEBHOOK_EVENT_RUN_FINISHED'],
    });
    receiver.secret = hook.secret;

    const spec = {
      name: 'crash-me',
      dataset: {
        records: Array.from({ length: RECORDS }, (_, i) => ({
          id: `r${i}`,
          input: `q${i}`,
          reference: `A-q${i}`,
        })),
      },
      target: { kind: 'openai-compatible', baseUrl: stubUrl, model: 'm', concurrency: 2 },
      evaluators: EVALUATORS.map((ref) => ({ ref })),
      trials: TRIALS,
      gates: ['exact-match >= 1'],
    };
    const created = await callJson(a.base, 'POST', '/v1alpha1/runs', spec);
    const id = created.id as string;

    // Let process A store part of the run, then hold the target so it cannot finish.
    await eventually(async () => {
      const run = await callJson(a.base, 'GET', `/v1alpha1/runs/${id}`);
      return run.progress.done >= 12 ? true : undefined;
    }, 30_000);
    holdMs = 60_000;
    // Whatever A generated before the hold is stored by its next batch write (every 250 ms).
    await new Promise((r) => setTimeout(r, 1_500));
    const answeredByA = stub.answered;

    const b = await launchServer(dataDirs[1], configFile);
    running.push(b);
    const before = await callJson(b.base, 'GET', `/v1alpha1/runs/${id}`);
    expect(before.status).toBe('RUN_STATUS_RUNNING');
    const doneAtKill = before.progress.done as number;
    expect(doneAtKill).toBeGreaterThanOrEqual(12);
    expect(doneAtKill).toBeLessThan(TOTAL);
    expect(answeredByA).toBeLessThan(TOTAL);

    await kill9(a);
    holdMs = 0;
    const final = await eventually(async () => {
      const run = await callJson(b.base, 'GET', `/v1alpha1/runs/${id}`);
      return run.status === 'RUN_STATUS_RUNNING' || run.status === 'RUN_STATUS_PENDING'
        ? undefined
        : run;
    }, 60_000);
    expect(final.status).toBe('RUN_STATUS_SUCCEEDED');
    expect(final.progress).toEqual({ total: TOTAL, done: TOTAL });
    const summaries = final.summaries as { metric: string; n: number; mean: number }[];
    expect(summaries.map((s) => [s.metric, s.n, s.mean])).toEqual(
      EVALUATORS.map((m) => [m, TOTAL, 1]),
    );

    // B generated only what A had not stored: no output was produced twice.
    expect(stub.answered - answeredByA).toBe(TOTAL - doneAtKill);

    const facts = await variant.facts(dataDirs[1], id);
    expect(facts.results).toHaveLength(TOTAL * EVALUATORS.length);
    const keys = new Set(facts.results.map((r) => `${r.record_index}/${r.trial}/${r.evaluator}`));
    expect(keys.size).toBe(TOTAL * EVALUATORS.length);
    for (let i = 0; i < RECORDS; i++) {
      for (let t = 0; t < TRIALS; t++) {
        for (const e of EVALUATORS) expect(keys.has(`${i}/${t}/${e}`)).toBe(true);
      }
    }
    expect(facts.outputs).toBe(TOTAL);
    expect(facts.finishedDeliveries).toBe(1);

    // The API agrees, and the one run.finished event reaches the receiver, signed.
    const listed = await callJson(b.base, 'GET', `/v1alpha1/runs/${id}/results?page_size=1000`);
    expect(listed.results).toHaveLength(TOTAL);
    await eventually(async () =>
      receiver.received.some((d) => d.event === 'run.finished') ? true : undefined,
    );
    const finished = receiver.received.filter((d) => d.event === 'run.finished');
    expect(new Set(finished.map((d) => d.id)).size).toBe(1);
    expect(finished[0]?.verified).toBe(true);
    expect(JSON.parse(finished[0]?.body ?? '{}').run?.id).toBe(id);
  }, 180_000);
});
