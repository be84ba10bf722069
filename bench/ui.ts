/**
 * What the web UI costs: the REST reads it makes, timed on a real `touchstone serve` process
 * (from source, no auth, loopback HTTP with keep-alive), and the size of what it ships.
 *  1. BENCH_UI_TRACES (1M) completed traces written straight into the database in bulk (one
 *     INSERT … SELECT over a generated series: completing a million traces through OTLP would take
 *     hours here), each with one stored policy result; SQLite in a temp dir, then PostgreSQL when
 *     TOUCHSTONE_BENCH_PG or TOUCHSTONE_TEST_PG names a server (a fresh schema, dropped after).
 *  2. The traces list as the UI asks for it (`include=scores`, 50 a page): the first page, with
 *     a label, service, error and policy/outcome filter, a time window, and 20 pages deep by
 *     token; BENCH_UI_ROUNDS (100) of each after a warm-up. Budget: p95 ≤ 200 ms.
 *  3. A 2,000-span trace sent over OTLP (the OpenTelemetry SDK's protobuf) and completed by the
 *     server: the whole record, and what the UI reads (the record without its trajectory, then
 *     the trajectory in two pages of 1000). Budget: p95 ≤ 300 ms.
 *  4. The UI built by Vite: every script and style sheet, gzipped at level 9 as the server
 *     serves them. Budget: JavaScript ≤ 150 kB gzipped.
 *  5. With Debian's Chromium (TOUCHSTONE_CHROMIUM or /usr/bin/chromium): the 2,000-span trace's
 *     page, from navigation to its first steps on screen, 5 times. Budget: < 1 s.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { StoreConfig } from '../src/store/index.js';
import { ENTRY, freePort, type ServerProcess, serveArgs } from '../test/support/process.js';
import { freshPgSchema } from '../test/support/stores.js';
import { recordSpans, sendSpans, wideTrace } from '../test/ui/data.js';
import { bulkLoad } from './bulk-load.js';
import { fmt, percentile, timedGet } from './stats.js';

const TRACES = Number(process.env.BENCH_UI_TRACES ?? 1_000_000);
const ROUNDS = Number(process.env.BENCH_UI_ROUNDS ?? 100);
const PROJECT = 'bench';
const DAY = 24 * 3_600_000;
const NOW = Date.now();

const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

/**
 * The traces (and one result each) as one INSERT … SELECT: trace i starts (30 days / TRACES) × i
 * before now, in one of 10 services and 20 names, labels env (3 values) and tier (5), 5% with an
 * error. The SQL differs by dialect only in the series and text functions.
 */
function seedSql(dialect: 'sqlite' | 'postgres'): string[] {
  const step = Math.max(1, Math.floor((30 * DAY) / TRACES));
  const sqlite = dialect === 'sqlite';
  const series = sqlite
    ? `with recursive s(i) as (select 0 union all select i + 1 from s where i < ${TRACES - 1})`
    : '';
  // 64-bit arithmetic on PostgreSQL too (i × step passes 2^31).
  const from = sqlite ? 'from s' : `from generate_series(0::bigint, ${TRACES - 1}) as s(i)`;
  const hex = sqlite ? `printf('%032x', i)` : `lpad(to_hex(i), 32, '0')`;
  const mod = (n: number) => `(i % ${n})`;
  const pick = (values: string[], n: number) =>
    `(case ${mod(n)} ${values.map((v, k) => `when ${k} then '${v}'`).join(' ')} end)`;
  const start = `(${NOW} - i * ${step})`;
  return [
    `${series} insert into traces (project, trace_id, source, ingest_labels, first_seen_at, last_span_at,
       root_ended_at, completed_at, service, name, start_ms, duration_ms, steps, error, labels, digest,
       record, root, scored_at, usage)
     select '${PROJECT}', ${hex}, '', '{}', ${start}, ${start} + 2000, ${start} + 2000, ${start} + 2500,
       'svc-' || ${mod(10)}, 'agent-' || ${mod(20)}, ${start}, 1500 + ${mod(997)}, 3 + ${mod(9)},
       case when ${mod(20)} = 0 then 1 else 0 end,
       '{"env":"' || ${pick(['prod', 'staging', 'dev'], 3)} || '","tier":"' || ${pick(['gold', 'silver', 'bronze', 'free', 'trial'], 5)} || '"}',
       'digest', '{"id":"' || ${hex} || '","output":"ok"}', null, ${start} + 3000,
       '{"inputTokens":120,"outputTokens":30,"totalTokens":150}'
     ${from}`,
    `insert into results (project, trace_id, policy, digest, evaluator, position, outcome, result, scored_at)
     select project, trace_id, 'quality', 'digest', 'tool-errors', 0, 'OUTCOME_SCORED',
       '{"evaluator":"tool-errors","outcome":"OUTCOME_SCORED","scores":[{"name":"tool-errors","value":0}],"durationMs":0.1}',
       scored_at
     from traces where project = '${PROJECT}'`,
  ];
}

async function serve(args: string[]): Promise<ServerProcess> {
  const proc = spawn(process.execPath, [...ENTRY, 'serve', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout?.on('data', (d) => {
    out += d;
  });
  proc.stderr?.on('data', (d) => {
    out += d;
  });
  const exited = new Promise<number | null>((done) => proc.on('exit', (code) => done(code)));
  const deadline = Date.now() + 120_000;
  while (!out.includes('listening on')) {
    if (Date.now() > deadline || proc.exitCode !== null)
      throw new Error(`server did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { proc, output: () => out, exited };
}

/** Times `rounds` requests after `warm` unmeasured ones; prints p50/p95/max. */
async function measure(
  label: string,
  url: () => string,
  rounds = ROUNDS,
  warm = 5,
): Promise<number[]> {
  for (let i = 0; i < warm; i++) await timedGet(url());
  const times: number[] = [];
  for (let i = 0; i < rounds; i++) times.push((await timedGet(url())).ms);
  console.log(
    `  ${label.padEnd(46)} p50 ${fmt(percentile(times, 50), 1).padStart(7)} ms  p95 ${fmt(percentile(times, 95), 1).padStart(7)} ms  max ${fmt(Math.max(...times), 1).padStart(7)} ms`,
  );
  return times;
}

async function listFigures(base: string): Promise<number[]> {
  const list = `${base}/v1alpha1/traces?project=${PROJECT}&include=scores&page_size=50`;
  const all: number[] = [];
  all.push(...(await measure('first page (the UI’s default view)', () => list)));
  all.push(...(await measure('labels=env=prod', () => `${list}&labels=env%3Dprod`)));
  all.push(
    ...(await measure(
      'labels=env=dev&labels=tier=trial',
      () => `${list}&labels=env%3Ddev&labels=tier%3Dtrial`,
    )),
  );
  all.push(...(await measure('service=svc-3', () => `${list}&service=svc-3`)));
  all.push(...(await measure('error=true', () => `${list}&error=true`)));
  all.push(
    ...(await measure(
      'policy=quality&outcome=OUTCOME_SCORED',
      () => `${list}&policy=quality&outcome=OUTCOME_SCORED`,
    )),
  );
  const since = new Date(NOW - 15 * DAY).toISOString();
  const until = new Date(NOW - 14 * DAY).toISOString();
  all.push(
    ...(await measure(
      'a one-day window 14 days back',
      () => `${list}&since=${since}&until=${until}`,
    )),
  );
  // Twenty pages deep by token, as infinite scroll goes.
  const deep: number[] = [];
  for (let r = 0; r < Math.max(1, Math.floor(ROUNDS / 20)); r++) {
    let token: string | undefined;
    for (let p = 0; p < 20; p++) {
      const { ms, body } = await timedGet(
        token === undefined ? list : `${list}&page_token=${token}`,
      );
      deep.push(ms);
      token = body.next_page_token as string | undefined;
    }
  }
  console.log(
    `  ${'pages 1–20 by token'.padEnd(46)} p50 ${fmt(percentile(deep, 50), 1).padStart(7)} ms  p95 ${fmt(percentile(deep, 95), 1).padStart(7)} ms  max ${fmt(Math.max(...deep), 1).padStart(7)} ms`,
  );
  all.push(...deep);
  return all;
}

async function traceFigures(base: string): Promise<{ traceId: string; p95: number }> {
  let traceId = '';
  await sendSpans(
    base,
    undefined,
    recordSpans({ 'service.name': 'wide' }, (tracer) => {
      traceId = wideTrace(tracer, 2000);
    }),
  );
  const deadline = Date.now() + 120_000;
  while (
    (await fetch(`${base}/v1alpha1/traces/${traceId}?view=basic&project=default`)).status !== 200
  ) {
    if (Date.now() > deadline)
      throw new Error('the 2,000-span trace did not complete in 2 minutes');
    await new Promise((r) => setTimeout(r, 200));
  }
  const one = `${base}/v1alpha1/traces/${traceId}?project=default`;
  const full = await measure('whole record (2,000 steps)', () => one, 50);
  await measure('record without trajectory (view=basic)', () => `${one}&view=basic`, 50);
  await measure(
    'trajectory page 1 of 2 (1000 steps)',
    () => `${base}/v1alpha1/traces/${traceId}/trajectory?project=default&page_size=1000`,
    50,
  );
  await measure(
    'scores of the trace',
    () => `${base}/v1alpha1/traces/${traceId}/scores?project=default`,
    50,
  );
  return { traceId, p95: percentile(full, 95) };
}

async function run(
  label: string,
  uiDir: string,
  storeConfig: StoreConfig,
  pgUrl?: string,
): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'touchstone-bench-ui-'));
  const config = join(dataDir, 'config.yaml');
  writeFileSync(
    config,
    [
      'log_level: warn',
      'traces: {completion_grace: 200ms}',
      `ui: {assets_dir: ${JSON.stringify(uiDir)}}`,
      ...(pgUrl === undefined ? [] : [`store: {driver: postgres, url: ${JSON.stringify(pgUrl)}}`]),
      '',
    ].join('\n'),
  );
  console.log(
    `${label}: writing ${TRACES.toLocaleString()} traces and results (load average ${load()})`,
  );
  const seeded = await bulkLoad(dataDir, storeConfig, pgUrl, seedSql);
  console.log(`${label}: seeded in ${fmt(seeded / 1000, 1)} s`);
  const port = await freePort();
  const server = await serve(serveArgs(dataDir, port, config));
  const base = `http://127.0.0.1:${port}`;
  try {
    console.log(
      `${label}: traces list at ${TRACES.toLocaleString()} traces (load average ${load()})`,
    );
    const list = percentile(await listFigures(base), 95);
    console.log(`${label}: trace view, a 2,000-span trace (load average ${load()})`);
    const trace = await traceFigures(base);
    console.log(
      `${label} budgets: traces list p95 ≤ 200 ms: ${list <= 200 ? 'met' : 'NOT met'} (p95 over every query ${fmt(list, 1)} ms); ` +
        `trace view p95 ≤ 300 ms: ${trace.p95 <= 300 ? 'met' : 'NOT met'} (whole record ${fmt(trace.p95, 1)} ms)`,
    );
    if (pgUrl === undefined) await browserFigures(base, trace.traceId);
  } finally {
    server.proc.kill('SIGKILL');
    await server.exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function uiSize(): Promise<string> {
  const { build } = await import('vite');
  const outDir = mkdtempSync(join(tmpdir(), 'touchstone-bench-ui-dist-'));
  await build({
    configFile: resolve('ui', 'vite.config.ts'),
    build: { outDir, emptyOutDir: true },
    logLevel: 'error',
  });
  let js = 0;
  let jsRaw = 0;
  let css = 0;
  for (const name of readdirSync(join(outDir, 'assets'))) {
    const body = readFileSync(join(outDir, 'assets', name));
    const gz = gzipSync(body, { level: 9 }).length;
    if (name.endsWith('.js')) {
      js += gz;
      jsRaw += body.length;
    } else if (name.endsWith('.css')) css += gz;
  }
  console.log(
    `UI size: JavaScript ${fmt(js / 1024, 1)} kB gzipped (${fmt(jsRaw / 1024, 1)} kB raw), CSS ${fmt(css / 1024, 1)} kB gzipped; ` +
      `budget JavaScript ≤ 150 kB gzipped: ${js <= 150 * 1024 ? 'met' : 'NOT met'}`,
  );
  return outDir;
}

async function browserFigures(base: string, traceId: string): Promise<void> {
  const chromiumPath = process.env.TOUCHSTONE_CHROMIUM ?? '/usr/bin/chromium';
  if (!existsSync(chromiumPath)) {
    console.log(`browser: skipped (no Chromium at ${chromiumPath})`);
    return;
  }
  const { openBrowser } = await import('../test/ui/browser.js');
  const browser = await openBrowser();
  try {
    const page = await browser.context.newPage();
    const times: number[] = [];
    for (let i = 0; i < 6; i++) {
      const started = performance.now();
      await page.goto(`${base}/ui/traces/${traceId}?project=default`);
      await page.getByRole('heading', { name: /Trajectory \(2000 steps\)/ }).waitFor();
      await page
        .getByRole('listbox', { name: /Steps of the trace/ })
        .getByRole('option')
        .first()
        .waitFor();
      if (i > 0) times.push(performance.now() - started);
    }
    console.log(
      `browser: a 2,000-span trace's page, navigation to its steps on screen: p50 ${fmt(percentile(times, 50), 0)} ms, max ${fmt(Math.max(...times), 0)} ms (budget < 1 s: ${percentile(times, 50) < 1000 ? 'met' : 'NOT met'} at p50)`,
    );
  } finally {
    await browser.close();
  }
}

export async function main(): Promise<void> {
  const uiDir = await uiSize();
  try {
    await run('SQLite', uiDir, { driver: 'sqlite' });
    const url = process.env.TOUCHSTONE_BENCH_PG ?? process.env.TOUCHSTONE_TEST_PG;
    if (url === undefined || url === '') {
      console.log('PostgreSQL: skipped (set TOUCHSTONE_BENCH_PG to a PostgreSQL connection URL)');
      return;
    }
    const schema = await freshPgSchema(url);
    try {
      await run(
        'PostgreSQL',
        uiDir,
        { driver: 'postgres', url: schema.url, pool_size: 4 },
        schema.url,
      );
    } finally {
      await schema.drop();
    }
  } finally {
    rmSync(uiDir, { recursive: true, force: true });
  }
}
