/**
 * The SQLite binding's hot paths as the store uses them (WAL, synchronous=NORMAL, statements
 * prepared once): span-chunk inserts of 512 rows per transaction with one multi-row statement, the
 * trace-row upsert per trace, point reads by primary key and a newest-first page scan. Prints
 * operations per second for each, the best of three passes by process CPU time (steadier than wall
 * time on a busy host).
 *
 * `BENCH_SQLITE_MODULE=/path/to/node_modules/better-sqlite3` measures another copy of the binding
 * (another version) on the same Node.js, for a before/after comparison in one sitting.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

type Statement = {
  run(...params: unknown[]): unknown;
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
};
type Database = {
  pragma(text: string): unknown;
  exec(text: string): void;
  prepare(text: string): Statement;
  transaction<T>(fn: () => T): () => T;
  close(): void;
};

const TRACES = 50_000;
const BATCH = 512;
const PASSES = 3;
const CHUNK = JSON.stringify({ spans: Array.from({ length: 8 }, (_, i) => ({ name: `s${i}` })) });

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

function open(Binding: new (file: string) => Database, dir: string): Database {
  const db = new Binding(join(dir, 'bench.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(`
    create table traces (trace_id text primary key, start_ms integer, name text, spans integer);
    create index traces_start on traces (start_ms desc);
    create table span_chunks (trace_id text, seq integer, body text, primary key (trace_id, seq));
  `);
  return db;
}

function traceId(i: number): string {
  return (i * 2654435761).toString(16).padStart(32, '0').slice(-32);
}

function pass(Binding: new (file: string) => Database): Record<string, number> {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-bench-sqlite-'));
  const db = open(Binding, dir);
  try {
    const placeholders = Array.from({ length: BATCH }, () => '(?, ?, ?)').join(', ');
    const insertChunks = db.prepare(`insert into span_chunks values ${placeholders}`);
    const upsertTrace = db.prepare(
      `insert into traces values (?, ?, ?, ?) on conflict (trace_id) do update
       set spans = spans + excluded.spans, start_ms = min(start_ms, excluded.start_ms)`,
    );
    const figures: Record<string, number> = {};

    let started = cpuMs();
    for (let base = 0; base < TRACES; base += BATCH) {
      db.transaction(() => {
        const params: unknown[] = [];
        for (let i = base; i < base + BATCH; i++) params.push(traceId(i), 0, CHUNK);
        insertChunks.run(...params);
        for (let i = base; i < base + BATCH; i++) upsertTrace.run(traceId(i), i, 'agent', 8);
      })();
    }
    const rows = Math.ceil(TRACES / BATCH) * BATCH;
    figures['chunk + trace writes/s'] = rows / ((cpuMs() - started) / 1000);

    const byId = db.prepare('select * from traces where trace_id = ?');
    started = cpuMs();
    for (let i = 0; i < TRACES; i++) byId.get(traceId(i));
    figures['point reads/s'] = TRACES / ((cpuMs() - started) / 1000);

    const page = db.prepare(
      'select * from traces where start_ms < ? order by start_ms desc limit 50',
    );
    const pages = 5_000;
    started = cpuMs();
    for (let i = 0; i < pages; i++) page.all(TRACES - (i % (TRACES - 50)));
    figures['50-row pages/s'] = pages / ((cpuMs() - started) / 1000);
    return figures;
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function main(): Promise<void> {
  const require = createRequire(import.meta.url);
  const from = process.env.BENCH_SQLITE_MODULE ?? 'better-sqlite3';
  const Binding = require(from) as new (file: string) => Database;
  const version = (require(`${from}/package.json`) as { version: string }).version;
  const best: Record<string, number> = {};
  for (let i = 0; i < PASSES; i++) {
    for (const [name, value] of Object.entries(pass(Binding))) {
      best[name] = Math.max(best[name] ?? 0, value);
    }
  }
  console.log(`better-sqlite3 ${version} on Node.js ${process.versions.node}, best of ${PASSES}:`);
  for (const [name, value] of Object.entries(best)) {
    console.log(`  ${name.padEnd(24)} ${Math.round(value).toLocaleString('en-US')}`);
  }
}
