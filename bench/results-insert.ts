/**
 * What storing results costs SQLite with the results indexes in score time order (migration 19)
 * against the layout before it (the indexes by policy, evaluator and outcome ending with the trace
 * id). A store migrated by the server's own migrations, then batches of 64 one-result traces with
 * random trace ids (as OpenTelemetry SDKs make them), one multi-row insert and commit per batch as
 * the engine writes them (without the score rollup since migration 20 dropped SQLite's insert
 * trigger; the pieces below add it as the store does): BENCH_RESULTS_BEFORE (200,000) results
 * first, then BENCH_RESULTS (64,000) measured. Prints CPU µs per result of each layout (process
 * CPU time, checkpoints included), alternating, three rounds, with the load average.
 *
 * Measured with the trigger (2 cores, load average 1.0–1.4): 146–237 µs per result before, 55–63
 * after (after 100k, load average 3.5–5.9: 143–150 and 49–54);
 * docs/performance.md ("Results in time order").
 *
 * Then what a trace's results cost piece by piece, as the online bench's two policies score it
 * (five results of about 150 bytes each, 64 traces per statement and transaction, `returning`
 * their keys as the engine asks, then the store's statement adding them to the score rollup, after
 * BENCH_RESULTS_PIECES_BEFORE (20,000) traces; BENCH_RESULTS_PIECES (12,800) measured): as the
 * store writes them, then without the rollup, without the four secondary indexes, and with an
 * empty result text. CPU µs per trace, two rounds.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { systemClock } from '../src/core/index.js';
import { openStore, SQLITE_FILE_NAME } from '../src/store/index.js';
import { type RollupSource, sqliteRollupOf } from '../src/store/score-rollup.js';
import { fmt, load } from './stats.js';

const BEFORE = Number(process.env.BENCH_RESULTS_BEFORE ?? 200_000);
const MEASURED = Number(process.env.BENCH_RESULTS ?? 64_000);
const BATCH = 64;
const ROUNDS = 3;

/** The three indexes as migrations 14 and 16 made them (by trace id). */
const BY_TRACE = `
  drop index results_policy_idx; drop index results_evaluator_idx; drop index results_outcome_idx;
  create index results_policy_idx on results (project, policy, evaluator, trace_id);
  create index results_evaluator_idx on results (project, evaluator, trace_id);
  create index results_outcome_idx on results (project, outcome, policy, evaluator, trace_id);`;

/**
 * Runs `batch` (BATCH traces' results in a transaction) for `before` traces, checkpoints, then
 * for `measured` more: the process's CPU µs per trace of those, checkpoints included. Closes `db`.
 */
function cpuPerRow(
  db: Database.Database,
  batch: Database.Transaction<() => void>,
  before: number,
  measured: number,
): number {
  for (let n = 0; n < before; n += BATCH) batch.immediate();
  db.pragma('wal_checkpoint(TRUNCATE)');
  const cpu = process.cpuUsage();
  for (let n = 0; n < measured; n += BATCH) batch.immediate();
  const used = process.cpuUsage(cpu);
  db.close();
  return (used.user + used.system) / measured;
}

/** The store's SQLite file, migrated by the server's migrations, opened for `measure`; removed after. */
async function onMigratedFile(measure: (db: Database.Database) => number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'touchstone-bench-results-'));
  try {
    await (await openStore({ driver: 'sqlite' }, { clock: systemClock, dataDir: dir })).close();
    const db = new Database(join(dir, SQLITE_FILE_NAME));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    return measure(db);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function cpuPerResult(layout: 'time order' | 'by trace'): Promise<number> {
  return onMigratedFile((db) => {
    if (layout === 'by trace') db.exec(BY_TRACE);
    const result = JSON.stringify({
      evaluator: 'tool-errors',
      outcome: 'OUTCOME_SCORED',
      scores: [{ name: 'tool-errors', value: 1 }],
      durationMs: 0.1,
    });
    const insert = db.prepare(
      `insert into results (project, trace_id, policy, digest, evaluator, position, outcome, result, scored_at)
       values ${Array.from({ length: BATCH }, () => '(?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}
       on conflict do nothing`,
    );
    let at = Date.now();
    const batch = db.transaction(() => {
      const args: unknown[] = [];
      for (let i = 0; i < BATCH; i++) {
        const outcome = i % 50 === 0 ? 'OUTCOME_ERROR' : 'OUTCOME_SCORED';
        const id = randomBytes(16).toString('hex');
        args.push('default', id, 'quality', 'd', 'tool-errors', 0, outcome, result, at++);
      }
      insert.run(...args);
    });
    return cpuPerRow(db, batch, BEFORE, MEASURED);
  });
}

const PIECES_BEFORE = Number(process.env.BENCH_RESULTS_PIECES_BEFORE ?? 20_000);
const PIECES_MEASURED = Number(process.env.BENCH_RESULTS_PIECES ?? 12_800);
const EVALUATORS = [
  ['agent-health', 'tool-errors'],
  ['agent-health', 'step-budget'],
  ['agent-health', 'latency'],
  ['travel-loops', 'loop-detection'],
  ['travel-loops', 'token-usage'],
] as const;
const PIECES = {
  'as the store': '',
  'no rollup': '',
  'no secondary index': `drop index results_policy_idx; drop index results_evaluator_idx;
    drop index results_outcome_idx; drop index results_project_scored_idx;`,
  'empty result text': '',
} as const;

function cpuPerTrace(piece: keyof typeof PIECES): Promise<number> {
  return onMigratedFile((db) => {
    db.exec(PIECES[piece]);
    const texts = EVALUATORS.map(([, evaluator]) =>
      piece === 'empty result text'
        ? '{}'
        : JSON.stringify({
            evaluator,
            outcome: 'OUTCOME_SCORED',
            scores: [{ name: evaluator, value: 0.73 }],
            reason: 'within the budget of 20 steps and 8 tool calls',
            durationMs: 0.1,
          }),
    );
    const insert = db.prepare(
      `insert into results (project, trace_id, policy, digest, evaluator, position, outcome, result, scored_at)
       values ${Array.from({ length: BATCH * EVALUATORS.length }, () => '(?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}
       on conflict do nothing returning project, trace_id, policy, digest, evaluator`,
    );
    let rollupStatement: Database.Statement | undefined;
    let at = Date.now();
    const batch = db.transaction(() => {
      const rows: (RollupSource & { trace_id: string; digest: string; position: number })[] = [];
      for (let i = 0; i < BATCH; i++) {
        const id = randomBytes(16).toString('hex');
        const scoredAt = at++;
        for (const [k, [policy, evaluator]] of EVALUATORS.entries()) {
          rows.push({
            project: 'default',
            trace_id: id,
            policy,
            digest: 'd',
            evaluator,
            position: k,
            outcome: 'OUTCOME_SCORED',
            result: texts[k] ?? '{}',
            scored_at: scoredAt,
          });
        }
      }
      insert.all(
        ...rows.flatMap((r) => [
          r.project,
          r.trace_id,
          r.policy,
          r.digest,
          r.evaluator,
          r.position,
          r.outcome,
          r.result,
          r.scored_at,
        ]),
      );
      const rollup = piece === 'no rollup' ? undefined : sqliteRollupOf(rows);
      // Compiled once, as the store's statement cache keeps it.
      if (rollup !== undefined) {
        rollupStatement ??= db.prepare(rollup.sql);
        rollupStatement.run(...rollup.parameters);
      }
    });
    return cpuPerRow(db, batch, PIECES_BEFORE, PIECES_MEASURED);
  });
}

export async function main(): Promise<void> {
  console.log(
    `results insert on SQLite: ${MEASURED.toLocaleString()} one-result traces (random ids, ${BATCH} per transaction) after ${BEFORE.toLocaleString()}`,
  );
  for (let round = 1; round <= ROUNDS; round++) {
    for (const layout of ['by trace', 'time order'] as const) {
      const us = await cpuPerResult(layout);
      console.log(
        `  round ${round}, indexes ${layout.padEnd(10)}: ${fmt(us, 1)} µs CPU per result; load average ${load()}`,
      );
    }
  }
  console.log(
    `a trace's five results, piece by piece: ${PIECES_MEASURED.toLocaleString()} traces (${BATCH} per transaction) after ${PIECES_BEFORE.toLocaleString()}`,
  );
  for (let round = 1; round <= 2; round++) {
    for (const piece of Object.keys(PIECES) as (keyof typeof PIECES)[]) {
      const us = await cpuPerTrace(piece);
      console.log(
        `  round ${round}, ${piece.padEnd(18)}: ${fmt(us, 1)} µs CPU per trace; load average ${load()}`,
      );
    }
  }
}
