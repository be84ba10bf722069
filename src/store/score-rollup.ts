import { CompiledQuery } from 'kysely';
import { ROLLUP_SPANS_MS } from './migrations/0015-score-rollup.js';
import type { ScoreRollupTable } from './schema.js';

/** The columns of a stored result that its rollup rows come from. */
export interface RollupSource {
  project: string;
  policy: string;
  evaluator: string;
  outcome: string;
  /** The result as stored: JSON with its `scores`. */
  result: string;
  scored_at: number;
}

/** A `score_rollup` row's key with the count and sum to add to it. */
type RollupRow = ScoreRollupTable;

/** A score's number as migration 15's `scoreNumber` reads it: its value, else 1 or 0 for passed. */
function numberOf(score: { value?: unknown; passed?: unknown }): number | undefined {
  if (typeof score.value === 'number') return score.value;
  if (typeof score.passed === 'boolean') return score.passed ? 1 : 0;
  return undefined;
}

const keyOf = (r: RollupRow) =>
  [r.project, r.span_ms, r.bucket_start, r.policy, r.evaluator, r.metric].join('\u0000');

/**
 * The rollup rows of result rows, grouped by key: what migration 15's SQL (its backfill and
 * triggers) counts from the same rows — scored results only, each score with a name and a number,
 * once per width (hour and minute) in the bucket its score time falls in.
 */
export function rollupOf(rows: readonly RollupSource[]): RollupRow[] {
  const byKey = new Map<string, RollupRow>();
  for (const row of rows) {
    if (row.outcome !== 'OUTCOME_SCORED') continue;
    const { scores } = JSON.parse(row.result) as { scores?: unknown };
    if (!Array.isArray(scores)) continue;
    for (const score of scores as { name?: unknown; value?: unknown; passed?: unknown }[]) {
      if (typeof score !== 'object' || score === null) continue;
      const v = numberOf(score);
      if (v === undefined || score.name === undefined || score.name === null) continue;
      for (const spanMs of ROLLUP_SPANS_MS) {
        const r: RollupRow = {
          project: row.project,
          span_ms: spanMs,
          // Integer division as SQL's: towards zero.
          bucket_start: Math.trunc(row.scored_at / spanMs) * spanMs,
          policy: row.policy,
          evaluator: row.evaluator,
          metric: String(score.name),
          n: 1,
          total: v,
        };
        const key = keyOf(r);
        const seen = byKey.get(key);
        if (seen === undefined) byKey.set(key, r);
        else {
          seen.n += 1;
          seen.total += v;
        }
      }
    }
  }
  return [...byKey.values()];
}

/** SQLite's upsert of rollup rows passed as one JSON parameter: one statement text for any number. */
const SQLITE_UPSERT = `insert into score_rollup (project, span_ms, bucket_start, policy, evaluator, metric, n, total)
  select ${Array.from({ length: 8 }, (_, i) => `json_extract(value, '$[${i}]')`).join(', ')}
  from json_each(?) where true
  on conflict (project, span_ms, bucket_start, policy, evaluator, metric) do update
    set n = score_rollup.n + excluded.n, total = score_rollup.total + excluded.total`;

/**
 * SQLite: the statement adding the numeric scores of result rows to `score_rollup`, grouped
 * (migration 20 dropped the insert trigger that added each score of each row); undefined when they
 * have none. The store runs it for the rows it inserts; `bench results-insert` as the store does.
 */
export function sqliteRollupOf(rows: readonly RollupSource[]): CompiledQuery | undefined {
  const rollup = rollupOf(rows);
  if (rollup.length === 0) return undefined;
  const values = rollup.map((r) => [
    r.project,
    r.span_ms,
    r.bucket_start,
    r.policy,
    r.evaluator,
    r.metric,
    r.n,
    r.total,
  ]);
  return CompiledQuery.raw(SQLITE_UPSERT, [JSON.stringify(values)]);
}
