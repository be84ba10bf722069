/**
 * Reads at scale (`npm run bench -- reads`): N scored traces (default 1M; `--traces=200000` for
 * fewer) bulk-loaded into the store's tables (seed.ts), then the read API timed through a real
 * `touchstone serve` process on that store, loopback HTTP with keep-alive, `--rounds` (50) of each
 * request after a warm-up, p50/p95 printed with the load average, and beside them the server's
 * own p50/p95 (its `server-timing` header; the rest is the client, loopback and the wait for a
 * core on a loaded machine):
 * - `GET /v1alpha1/scores`: first page, page 50 by token, label / policy+evaluator / service /
 *   `since` filters, each also with values matching few traces and none;
 * - `GET /v1alpha1/traces`: first page, page 50, and each filter it supports likewise;
 * - one trace of 2,000 spans (sent over OTLP and completed by the server);
 * - `GET /v1alpha1/scores:aggregate` as the UI's scores page asks for it (24h, 7d, 30d; filters).
 * Budgets: lists p95 ≤ 50 ms, the trace ≤ 100 ms, aggregates ≤ 200 ms. Database size per trace.
 * SQLite, then PostgreSQL when `--pg=URL`, TOUCHSTONE_BENCH_PG or TOUCHSTONE_TEST_PG names a
 * server (a fresh schema, dropped after); `--db=sqlite` or `--db=postgres` runs one.
 * Indexes and query plans: bench/reads/README.md.
 */
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { SQLITE_FILE_NAME, type StoreConfig } from '../../src/store/index.js';
import { kill9, launchServer } from '../../test/support/process.js';
import { freshPgSchema } from '../../test/support/stores.js';
import { recordSpans, sendSpans, wideTrace } from '../../test/ui/data.js';
import { bulkLoad } from '../bulk-load.js';
import { fmt, percentile, timedGet } from '../stats.js';
import { DAY, PROJECT, seedStatements } from './seed.js';

function flag(name: string): string | undefined {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`) || a === `--${name}`);
  if (arg === undefined) return undefined;
  return arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : '';
}

const TRACES = Number(flag('traces') ?? 1_000_000);
const ROUNDS = Number(flag('rounds') ?? 50);
const NOW = Date.now();
const LIST_BUDGET = 50;
const TRACE_BUDGET = 100;
const AGGREGATE_BUDGET = 200;

const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

interface Figure {
  label: string;
  p95: number;
  budget: number;
}

/** Times ROUNDS requests after 3 unmeasured ones; prints p50/p95/max and how many items. */
async function measure(label: string, url: string, budget: number): Promise<Figure> {
  let first: Record<string, unknown> = {};
  for (let i = 0; i < 3; i++) first = (await timedGet(url)).body;
  const times: number[] = [];
  const server: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const { ms, serverMs } = await timedGet(url);
    times.push(ms);
    server.push(serverMs);
  }
  const items = (first.entries ?? first.traces ?? first.series) as unknown[] | undefined;
  const p95 = percentile(times, 95);
  console.log(
    `  ${label.padEnd(52)} p50 ${fmt(percentile(times, 50), 1).padStart(7)} ms  p95 ${fmt(p95, 1).padStart(7)} ms  (server ${fmt(percentile(server, 50), 1)} / ${fmt(percentile(server, 95), 1)})  ${items === undefined ? '' : `${String(items.length).padStart(4)} items`}${p95 > budget ? '  OVER' : ''}`,
  );
  return { label, p95, budget };
}

/** The token of page `n` (1-based), walking the pages before it once. */
async function tokenOfPage(url: string, n: number): Promise<string> {
  let token = '';
  for (let p = 1; p < n; p++) {
    const { body } = await timedGet(token === '' ? url : `${url}&page_token=${token}`);
    token = String(body.next_page_token ?? '');
    if (token === '') throw new Error(`${url}: fewer than ${n} pages`);
  }
  return token;
}

const label = (pair: string) => `labels=${encodeURIComponent(pair)}`;

async function scoresFigures(base: string): Promise<Figure[]> {
  const list = `${base}/v1alpha1/scores?project=${PROJECT}&page_size=50`;
  const day = new Date(NOW - DAY).toISOString();
  const future = new Date(NOW + DAY).toISOString();
  const cases: [string, string][] = [
    ['first page', list],
    ['page 50 by token', `${list}&page_token=${await tokenOfPage(list, 50)}`],
    ['labels env=prod (70%)', `${list}&${label('env=prod')}`],
    ['labels env=dev&tier=trial (1%)', `${list}&${label('env=dev')}&${label('tier=trial')}`],
    ['labels customer=c-7 (0.05%)', `${list}&${label('customer=c-7')}`],
    ['labels canary=true (0.01%)', `${list}&${label('canary=true')}`],
    ['labels env=nowhere (none)', `${list}&${label('env=nowhere')}`],
    ['policy=quality&evaluator=latency (all)', `${list}&policy=quality&evaluator=latency`],
    ['policy=safety&evaluator=pii (22%)', `${list}&policy=safety&evaluator=pii`],
    ['policy=experiment&evaluator=judge (0.01%)', `${list}&policy=experiment&evaluator=judge`],
    ['evaluator=nowhere (none)', `${list}&evaluator=nowhere`],
    ['service=svc-3 (10%)', `${list}&service=svc-3`],
    ['service=nowhere (none)', `${list}&service=nowhere`],
    ['since a day ago', `${list}&since=${day}`],
    ['since tomorrow (none)', `${list}&since=${future}`],
  ];
  const out: Figure[] = [];
  for (const [name, url] of cases) out.push(await measure(name, url, LIST_BUDGET));
  return out;
}

async function tracesFigures(base: string): Promise<Figure[]> {
  const list = `${base}/v1alpha1/traces?project=${PROJECT}&page_size=50`;
  const since = new Date(NOW - 15 * DAY).toISOString();
  const until = new Date(NOW - 14 * DAY).toISOString();
  const cases: [string, string][] = [
    ['first page', list],
    ['first page, include=scores (the UI)', `${list}&include=scores`],
    ['page 50 by token', `${list}&page_token=${await tokenOfPage(list, 50)}`],
    ['service=svc-3 (10%)', `${list}&service=svc-3`],
    ['service=nowhere (none)', `${list}&service=nowhere`],
    ['name=agent-5 (5%)', `${list}&name=agent-5`],
    ['source=nowhere (none)', `${list}&source=nowhere`],
    ['error=true (5%)', `${list}&error=true`],
    ['a one-day window 14 days back', `${list}&since=${since}&until=${until}`],
    ['labels env=prod (70%)', `${list}&${label('env=prod')}`],
    ['labels customer=c-7 (0.05%)', `${list}&${label('customer=c-7')}`],
    ['labels canary=true (0.01%)', `${list}&${label('canary=true')}`],
    ['labels env=nowhere (none)', `${list}&${label('env=nowhere')}`],
    ['labels env=dev&tier=trial (1%)', `${list}&${label('env=dev')}&${label('tier=trial')}`],
    [
      'labels customer=c-7&env=dev (~0.003%)',
      `${list}&${label('customer=c-7')}&${label('env=dev')}`,
    ],
    [
      'policy=quality&outcome=OUTCOME_SCORED (all)',
      `${list}&policy=quality&outcome=OUTCOME_SCORED`,
    ],
    ['policy=quality&outcome=OUTCOME_ERROR (1%)', `${list}&policy=quality&outcome=OUTCOME_ERROR`],
    ['policy=experiment (0.01%)', `${list}&policy=experiment`],
    ['evaluator=nowhere (none)', `${list}&evaluator=nowhere`],
    ['outcome=OUTCOME_ERROR (1%)', `${list}&outcome=OUTCOME_ERROR`],
    ['outcome=OUTCOME_SKIPPED (none)', `${list}&outcome=OUTCOME_SKIPPED`],
    ['policy=safety&outcome=OUTCOME_ERROR (none)', `${list}&policy=safety&outcome=OUTCOME_ERROR`],
  ];
  const out: Figure[] = [];
  for (const [name, url] of cases) out.push(await measure(name, url, LIST_BUDGET));
  return out;
}

async function aggregateFigures(base: string): Promise<Figure[]> {
  const at = (range: number, bucket: string, extra = '') => {
    const since = new Date(NOW - range).toISOString();
    return `${base}/v1alpha1/scores:aggregate?project=${PROJECT}&since=${since}&until=${new Date(NOW).toISOString()}&bucket=${bucket}${extra}`;
  };
  const cases: [string, string][] = [
    ['24h, 15m buckets (the UI’s default)', at(DAY, '15m')],
    ['24h, policy=quality&evaluator=latency', at(DAY, '15m', '&policy=quality&evaluator=latency')],
    ['24h, labels customer=c-7', at(DAY, '15m', `&${label('customer=c-7')}`)],
    ['7d, 15m buckets (not the UI’s: minute rows)', at(7 * DAY, '15m')],
    ['7d, 1h buckets', at(7 * DAY, '1h')],
    ['30d, 6h buckets', at(30 * DAY, '6h')],
  ];
  const out: Figure[] = [];
  for (const [name, url] of cases) out.push(await measure(name, url, AGGREGATE_BUDGET));
  return out;
}

/** One 2,000-span trace over OTLP, completed by the server; the record as the UI reads it. */
async function traceFigures(base: string): Promise<Figure[]> {
  let traceId = '';
  await sendSpans(
    base,
    undefined,
    recordSpans({ 'service.name': 'wide' }, (tracer) => {
      traceId = wideTrace(tracer, 2000);
    }),
  );
  const one = `${base}/v1alpha1/traces/${traceId}?project=default`;
  const deadline = Date.now() + 120_000;
  while ((await fetch(`${one}&view=basic`)).status !== 200) {
    if (Date.now() > deadline) throw new Error('the 2,000-span trace did not complete in 2 min');
    await new Promise((r) => setTimeout(r, 200));
  }
  return [
    await measure('one trace, 2,000 spans (whole record)', one, TRACE_BUDGET),
    await measure(
      'its trajectory, first 1000 steps',
      `${base}/v1alpha1/traces/${traceId}/trajectory?project=default&page_size=1000`,
      TRACE_BUDGET,
    ),
  ];
}

async function databaseBytes(dataDir: string, pgUrl?: string): Promise<number> {
  if (pgUrl === undefined) {
    const file = join(dataDir, SQLITE_FILE_NAME);
    const size = (path: string) => {
      try {
        return statSync(path).size;
      } catch {
        return 0;
      }
    };
    return size(file) + size(`${file}-wal`);
  }
  const client = new pg.Client({ connectionString: pgUrl });
  await client.connect();
  const { rows } = await client.query<{ bytes: string }>(
    `select sum(pg_total_relation_size(c.oid)) as bytes from pg_class c
       join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = current_schema() and c.relkind = 'r'`,
  );
  await client.end();
  return Number(rows[0]?.bytes ?? 0);
}

function verdict(name: string, figures: Figure[]): void {
  const over = figures.filter((f) => f.p95 > f.budget);
  console.log(
    `${name} budgets (lists ≤ ${LIST_BUDGET} ms, trace ≤ ${TRACE_BUDGET} ms, aggregates ≤ ${AGGREGATE_BUDGET} ms at p95): ` +
      (over.length === 0
        ? 'all met'
        : `NOT met by ${over.map((f) => `${f.label} (${fmt(f.p95, 1)} ms)`).join('; ')}`),
  );
}

async function run(name: string, storeConfig: StoreConfig, pgUrl?: string): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'touchstone-bench-reads-'));
  const config = join(dataDir, 'config.yaml');
  writeFileSync(
    config,
    [
      'log_level: warn',
      'traces: {completion_grace: 200ms}',
      ...(pgUrl === undefined ? [] : [`store: {driver: postgres, url: ${JSON.stringify(pgUrl)}}`]),
      '',
    ].join('\n'),
  );
  try {
    console.log(
      `${name}: loading ${TRACES.toLocaleString()} scored traces (load average ${load()})`,
    );
    const seeded = await bulkLoad(dataDir, storeConfig, pgUrl, (d) =>
      seedStatements(d, TRACES, NOW),
    );
    const bytes = await databaseBytes(dataDir, pgUrl);
    console.log(
      `${name}: loaded in ${fmt(seeded / 1000, 1)} s; database ${fmt(bytes / 2 ** 20, 0)} MiB, ${fmt(bytes / TRACES, 0)} bytes per trace (with its results)`,
    );
    const server = await launchServer(dataDir, config);
    try {
      const base = server.base;
      const figures: Figure[] = [];
      console.log(`${name}: GET /v1alpha1/scores (load average ${load()})`);
      figures.push(...(await scoresFigures(base)));
      console.log(`${name}: GET /v1alpha1/traces (load average ${load()})`);
      figures.push(...(await tracesFigures(base)));
      console.log(`${name}: one trace (load average ${load()})`);
      figures.push(...(await traceFigures(base)));
      console.log(`${name}: GET /v1alpha1/scores:aggregate (load average ${load()})`);
      figures.push(...(await aggregateFigures(base)));
      verdict(`${name} at ${TRACES.toLocaleString()} traces`, figures);
    } finally {
      await kill9(server);
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function main(): Promise<void> {
  const which = flag('db') ?? 'both';
  if (which !== 'postgres') await run('SQLite', { driver: 'sqlite' });
  if (which === 'sqlite') return;
  const url = flag('pg') ?? process.env.TOUCHSTONE_BENCH_PG ?? process.env.TOUCHSTONE_TEST_PG;
  if (url === undefined || url === '') {
    console.log('PostgreSQL: skipped (--pg=URL or TOUCHSTONE_BENCH_PG names a server)');
    return;
  }
  const schema = await freshPgSchema(url);
  try {
    await run('PostgreSQL', { driver: 'postgres', url: schema.url, pool_size: 4 }, schema.url);
  } finally {
    await schema.drop();
  }
}
