import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentRun } from '../fakes/langfuse/samples.js';
import { LangfuseFake } from '../fakes/langfuse/server.js';
import {
  callJson,
  eventually,
  freePort,
  kill9,
  type RunningServer,
  serveArgs,
  startServer,
} from '../support/process.js';

/**
 * A scheduled source survives `kill -9`, with `touchstone serve` processes on one store (a shared
 * SQLite file, and one PostgreSQL schema when TOUCHSTONE_TEST_PG is set) evaluating a minutely
 * window of a Langfuse store (the contract fake):
 *
 * 1. process A evaluates the first window and is killed as soon as the window's run exists,
 *    mid-run;
 * 2. process B starts and evaluates the next window; the store then holds B's following window
 *    fetch unanswered; process C starts beside B (two replicas on one database), and B is killed
 *    while its fetch is held;
 * 3. C takes the source over from the cursor B stored, once B's lease lapses.
 *
 * The variants run at once: each mostly waits for the minute to turn.
 *
 * Every window is evaluated exactly once (stable window ids), none is lost before its deadline
 * (the held one included), and the run A started finishes.
 */

const MIN = 60_000;
const END_LABEL = 'touchstone.dev/window-end';
const PG_URL = process.env.TOUCHSTONE_TEST_PG;

interface RunListItem {
  id: string;
  status: string;
  labels: Record<string, string>;
}

interface Variant {
  name: string;
  /** Config lines selecting the store, and the data dirs of processes A, B and C. */
  setup(dir: string): Promise<{ store: string[]; dataDirs: [string, string, string] }>;
  dispose(): Promise<void>;
}

function sqliteVariant(): Variant {
  return {
    name: 'one SQLite file',
    async setup(dir) {
      // Every process opens the same data dir: SQLite in WAL mode takes writers from each.
      const data = join(dir, 'data');
      return { store: [], dataDirs: [data, data, data] };
    },
    async dispose() {},
  };
}

function postgresVariant(url: string): Variant {
  const schema = `ts_sched_e2e_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  return {
    name: 'one PostgreSQL schema',
    async setup(dir) {
      await admin.connect();
      await admin.query(`create schema ${schema}`);
      const scoped = new URL(url);
      scoped.searchParams.set('options', `-c search_path=${schema}`);
      return {
        store: [
          'store:',
          '  driver: postgres',
          `  url: ${JSON.stringify(scoped.toString())}`,
          '  pool_size: 4',
        ],
        dataDirs: [join(dir, 'data-a'), join(dir, 'data-b'), join(dir, 'data-c')],
      };
    },
    async dispose() {
      await admin.query(`drop schema if exists ${schema} cascade`);
      await admin.end();
    },
  };
}

const variants: Variant[] = [sqliteVariant()];
if (PG_URL !== undefined && PG_URL !== '') variants.push(postgresVariant(PG_URL));

describe.concurrent.each(variants)('a scheduled source across kill -9 on $name', (variant) => {
  let dir = '';
  let configFile = '';
  let dataDirs: [string, string, string] = ['', '', ''];
  let fake: LangfuseFake;
  const running: RunningServer[] = [];

  const launch = async (dataDir: string): Promise<RunningServer> => {
    const port = await freePort();
    const server = await startServer(serveArgs(dataDir, port, configFile), {
      LANGFUSE_KEY: fake.credential,
    });
    const r = { base: `http://127.0.0.1:${port}`, server };
    running.push(r);
    return r;
  };
  const windowRuns = async (base: string): Promise<RunListItem[]> =>
    ((await callJson(base, 'GET', '/v1alpha1/runs?page_size=100')).runs as RunListItem[]).filter(
      (r) => r.labels[END_LABEL] !== undefined,
    );
  const windowEnds = (runs: RunListItem[]) =>
    runs.map((r) => Date.parse(r.labels[END_LABEL] as string)).sort((x, y) => x - y);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'touchstone-scheduled-crash-'));
    configFile = join(dir, 'config.yaml');
    const setup = await variant.setup(dir);
    dataDirs = setup.dataDirs;
    writeFileSync(
      configFile,
      [
        'log_level: warn',
        ...setup.store,
        'sources:',
        "  allow_hosts: ['127.0.0.1']",
        '  lease_timeout: 10s',
        'credentials:',
        '  grants:',
        "    - {env: LANGFUSE_KEY, projects: [default], hosts: ['127.0.0.1']}",
        'runs:',
        '  lease_timeout: 2s',
        '',
      ].join('\n'),
    );
    fake = await LangfuseFake.start();
    // Two traces in every minute from now on (the test spans about seven minutes).
    const first = Math.floor(Date.now() / MIN) * MIN;
    for (let m = 0; m < 14; m++) {
      fake.add(...agentRun(2 * m + 1, first + m * MIN + 10_000));
      fake.add(...agentRun(2 * m + 2, first + m * MIN + 20_000));
    }
  });
  afterAll(async () => {
    for (const r of running) await kill9(r);
    fake?.releaseListings();
    await fake?.close();
    await variant.dispose();
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('evaluates each window once, through a kill mid-run and a kill mid-fetch', async () => {
    const a = await launch(dataDirs[0]);
    await callJson(a.base, 'POST', '/v1alpha1/sources', {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'TraceSource',
      metadata: { name: 'minutely' },
      spec: {
        connector: 'langfuse',
        endpoint: fake.url,
        locations: ['production'],
        credentials: { env: 'LANGFUSE_KEY' },
        schedule: { cron: '* * * * *', window: '1m', startingDeadline: '5m' },
        runSpec: { evaluators: [{ ref: 'tool-errors' }] },
      },
    });
    const [first] = await eventually(async () => {
      const runs = await windowRuns(a.base);
      return runs.length > 0 ? runs : undefined;
    }, 120_000);
    await kill9(a);

    // B evaluates a window, then its next fetch is held by the store; C runs beside B; B dies
    // mid-fetch.
    const b = await launch(dataDirs[1]);
    const byA = (await windowRuns(b.base)).length;
    await eventually(
      async () => ((await windowRuns(b.base)).length > byA ? true : undefined),
      240_000,
    );
    fake.holdListings = true;
    await eventually(async () => (fake.heldListings > 0 ? true : undefined), 120_000);
    const c = await launch(dataDirs[2]);
    await kill9(b);
    const killedAt = Date.now();
    const before = windowEnds(await windowRuns(c.base));
    fake.releaseListings();

    // C takes over once B's lease (sources.lease_timeout) lapses, and goes on past the held window.
    const runs = await eventually(async () => {
      const all = await windowRuns(c.base);
      const last = windowEnds(all).at(-1) ?? 0;
      return last >= Math.floor(killedAt / MIN) * MIN + MIN ? all : undefined;
    }, 300_000);
    const ends = windowEnds(runs);
    // Once each, and consecutive from the first: no window twice, none lost (the held one and
    // those due while B's lease ran out were all still before their deadlines).
    expect(new Set(ends).size).toBe(ends.length);
    expect(ends.map((e) => e - (ends[0] as number))).toEqual(ends.map((_, i) => i * MIN));
    expect(ends.length).toBeGreaterThan(before.length);
    // The run the first process started finishes on another.
    const finished = await eventually(async () => {
      const run = await callJson(c.base, 'GET', `/v1alpha1/runs/${first?.id}`);
      return run.status === 'RUN_STATUS_SUCCEEDED' ? run : undefined;
    }, 60_000);
    expect(finished.progress.total).toBe(2);
    const source = await callJson(c.base, 'GET', '/v1alpha1/sources/minutely');
    expect(source.status).toMatchObject({ missedWindows: 0 });
    expect(fake.violations).toEqual([]);
  }, 600_000);
});
