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
 * window of a Langfuse store (the contract fake), with `sources.lease_timeout: 10s`:
 *
 * 1. process A evaluates the first window and is killed as soon as the window's run exists,
 *    mid-run; it is restarted (B);
 * 2. the store holds B's fetch of the next window unanswered, and B is killed mid-fetch; it is
 *    restarted (B'), alone, and evaluates that window once B's lease lapses;
 * 3. process C starts beside B' (two replicas on one database): the next window is fetched and
 *    evaluated by one of them only; the store then holds the following window's fetch, the
 *    replica fetching it is killed, and the other takes the source over from the stored cursor.
 *
 * Each process has its own Langfuse key (of one project), so the store tells which one fetches.
 * The variants run at once: each mostly waits for the minute to turn.
 *
 * Every window is evaluated exactly once (stable window ids), none is lost before its deadline
 * (the held ones included), the run A started finishes, and the status names the last window's
 * run.
 */

const MIN = 60_000;
const END_LABEL = 'touchstone.dev/window-end';
const PG_URL = process.env.TOUCHSTONE_TEST_PG;

interface RunListItem {
  id: string;
  status: string;
  labels: Record<string, string>;
  createdAt: string;
}

interface Variant {
  name: string;
  /**
   * Config lines selecting the store, and the data dirs of the restarted server (A, B, B') and of
   * the second replica (C).
   */
  setup(dir: string): Promise<{ store: string[]; dataDirs: [string, string] }>;
  dispose(): Promise<void>;
}

function sqliteVariant(): Variant {
  return {
    name: 'one SQLite file',
    async setup(dir) {
      // Every process opens the same data dir: SQLite in WAL mode takes writers from each.
      const data = join(dir, 'data');
      return { store: [], dataDirs: [data, data] };
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
        dataDirs: [join(dir, 'data-a'), join(dir, 'data-c')],
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

const OBSERVATIONS = '/api/public/v2/observations';
/** A start on a busy machine (two variants, each with two processes): well within a window. */
const START_TIMEOUT_MS = 90_000;

describe.concurrent.each(variants)('a scheduled source across kill -9 on $name', (variant) => {
  let dir = '';
  let configFile = '';
  let dataDirs: [string, string] = ['', ''];
  let fake: LangfuseFake;
  const running: (RunningServer & { publicKey: string })[] = [];

  /** A `touchstone serve` on `dataDir` whose Langfuse key has the public key `pk-lf-<name>`. */
  const launch = async (dataDir: string, name: string) => {
    const port = await freePort();
    const publicKey = `pk-lf-${name}`;
    const server = await startServer(
      serveArgs(dataDir, port, configFile),
      { LANGFUSE_KEY: fake.credentialOf(publicKey) },
      undefined,
      START_TIMEOUT_MS,
    );
    const r = { base: `http://127.0.0.1:${port}`, server, publicKey };
    running.push(r);
    return r;
  };
  const windowRuns = async (base: string): Promise<RunListItem[]> =>
    ((await callJson(base, 'GET', '/v1alpha1/runs?page_size=100')).runs as RunListItem[]).filter(
      (r) => r.labels[END_LABEL] !== undefined,
    );
  const endOf = (r: RunListItem) => Date.parse(r.labels[END_LABEL] as string);
  const windowEnds = (runs: RunListItem[]) => runs.map(endOf).sort((x, y) => x - y);
  /** Waits until the store holds `n` window runs; returns them. */
  const runsReach = (base: string, n: number, timeoutMs: number) =>
    eventually(async () => {
      const runs = await windowRuns(base);
      return runs.length >= n ? runs : undefined;
    }, timeoutMs);
  /** Holds the store's listings until a replica's fetch is held; returns the one fetching. */
  const holdNextFetch = async <R extends { publicKey: string }>(candidates: R[]) => {
    const held = fake.heldListings;
    fake.holdListings = true;
    await eventually(async () => (fake.heldListings > held ? true : undefined), 120_000);
    const fetching = candidates.find((c) => c.publicKey === fake.heldFrom[held]);
    if (fetching === undefined) throw new Error(`a listing held for ${fake.heldFrom[held]}`);
    return fetching;
  };

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
    // Two traces in every minute from now on (the test spans about eight minutes).
    const first = Math.floor(Date.now() / MIN) * MIN;
    for (let m = 0; m < 16; m++) {
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

  /**
   * What a failure reports beside its error: the step it was in and when, what each live server's
   * source status says, and what the servers logged (warnings and errors).
   */
  let step = 'start';
  let started = 0;
  const at = (name: string) => {
    step = `${name} (at ${Math.round((Date.now() - started) / 1000)} s)`;
  };
  const diagnosed = async (test: () => Promise<void>) => {
    started = Date.now();
    try {
      await test();
    } catch (err) {
      const live = running.filter(
        (r) => r.server.proc.exitCode === null && r.server.proc.signalCode === null,
      );
      const statuses = await Promise.all(
        live.map(async (r) => {
          const source = await callJson(r.base, 'GET', '/v1alpha1/sources/minutely').catch(String);
          return `${r.publicKey}: ${JSON.stringify(source?.status ?? source)}`;
        }),
      );
      for (const r of running) console.error(`${r.publicKey} logged:\n${r.server.output()}`);
      const message = err instanceof Error ? err.message : String(err);
      throw new Error(
        `${step}, failed at ${Math.round((Date.now() - started) / 1000)} s: ${message}; source status: ${statuses.join('; ')}`,
        { cause: err },
      );
    }
  };

  it(
    'evaluates each window once, through kills mid-run and mid-fetch, alone and beside a replica',
    () =>
      diagnosed(async () => {
        at('the first window');
        const a = await launch(dataDirs[0], 'a');
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
        const [first] = await runsReach(a.base, 1, 150_000);
        await kill9(a);

        // 1. Restarted after a kill mid-run (B), the server's fetch of the next window is held by
        // the store, and it is killed mid-fetch.
        at('the fetch by B (restarted after a kill mid-run)');
        const b = await launch(dataDirs[0], 'b');
        await holdNextFetch([b]);
        await kill9(b);
        fake.releaseListings();

        // 2. Restarted alone (B'), it takes the window over once B's lease lapses (and the next one
        // too when that is due by then: a start can be slow on a busy machine).
        at("B' alone, after B's kill mid-fetch");
        const b2 = await launch(dataDirs[0], 'b2');
        await runsReach(b2.base, 2, 120_000);

        // 3. A second replica (C) starts beside B': the next window is fetched by one of them.
        at('a window beside the replica C');
        const c = await launch(dataDirs[1], 'c');
        const listedBefore = fake.requestsTo(OBSERVATIONS).length;
        await runsReach(c.base, (await windowRuns(c.base)).length + 1, 120_000);
        const beside = fake.requestsTo(OBSERVATIONS).slice(listedBefore);
        expect(beside.length).toBeGreaterThan(0);
        // Each range listed by one replica only (on a slow machine two windows may come due while
        // this waits, one taken by each).
        const listedBy = new Map<string, Set<string | undefined>>();
        for (const r of beside) {
          const range = `${r.query.get('fromStartTime')}/${r.query.get('toStartTime')}`;
          listedBy.set(range, (listedBy.get(range) ?? new Set()).add(r.publicKey));
        }
        expect([...listedBy].filter(([, keys]) => keys.size > 1)).toEqual([]);

        // The replica fetching the window after is killed mid-fetch; the other takes it over once
        // the lease (sources.lease_timeout) lapses, and goes on past it.
        at('the fetch held beside a replica');
        const fetching = await holdNextFetch([b2, c]);
        const other = fetching === c ? b2 : c;
        const before = windowEnds(await windowRuns(other.base));
        await kill9(fetching);
        at('the takeover after the kill beside a replica');
        const killedAt = Date.now();
        fake.releaseListings();
        const runs = await eventually(async () => {
          const all = await windowRuns(other.base);
          const last = windowEnds(all).at(-1) ?? 0;
          return last >= Math.floor(killedAt / MIN) * MIN + MIN ? all : undefined;
        }, 300_000);
        const source = await callJson(other.base, 'GET', '/v1alpha1/sources/minutely');
        at('the checks');

        const ends = windowEnds(runs);
        // Once each, and consecutive from the first: no window twice, none lost (the held ones and
        // those due while a lease ran out were all evaluated before their deadlines).
        expect(new Set(ends).size).toBe(ends.length);
        expect(ends.map((e) => e - (ends[0] as number))).toEqual(ends.map((_, i) => i * MIN));
        expect(ends.length).toBeGreaterThan(before.length);
        for (const r of runs) expect(Date.parse(r.createdAt) - endOf(r)).toBeLessThan(5 * MIN);
        // The run the first process started finishes on another.
        const finished = await eventually(async () => {
          const run = await callJson(other.base, 'GET', `/v1alpha1/runs/${first?.id}`);
          return run.status === 'RUN_STATUS_SUCCEEDED' ? run : undefined;
        }, 60_000);
        expect(finished.progress.total).toBe(2);
        // The status names the last window's run, evaluated when it says, and no missed window.
        const last = runs.find((r) => endOf(r) === ends.at(-1)) as RunListItem;
        expect(source.status).toMatchObject({
          missedWindows: 0,
          lastRunId: last.id,
          lastScheduledAt: new Date(last.createdAt).toISOString(),
        });
        expect(fake.violations).toEqual([]);
      }),
    600_000,
  );
});
