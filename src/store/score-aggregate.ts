import { type Kysely, type RawBuilder, sql } from 'kysely';
import { labelsMatch } from './columns.js';
import {
  ROLLUP_SPANS_MS,
  scoreElements,
  scoreName,
  scoreNumber,
} from './migrations/0015-score-rollup.js';
import type { ScoreAggregateFilter, ScoreBucket, StoreDialect } from './ports.js';
import type { Database } from './schema.js';
import { leadingTraces, traceIdIn } from './trace-filters.js';

/** A part of the range, `[from, to)`: read from the rollup's rows of `spanMs`, else from results. */
interface Piece {
  from: number;
  to: number;
  spanMs?: number;
}

/**
 * Splits `[from, to)` into whole rollup buckets of the widest width first, the edges into
 * narrower ones, what is left (less than a minute at each end) into results.
 */
export function rangePieces(from: number, to: number, spans: readonly number[]): Piece[] {
  if (from >= to) return [];
  const [spanMs, ...narrower] = spans;
  if (spanMs === undefined) return [{ from, to }];
  const start = Math.ceil(from / spanMs) * spanMs;
  const end = Math.floor(to / spanMs) * spanMs;
  if (start >= end) return rangePieces(from, to, narrower);
  return [
    ...rangePieces(from, start, narrower),
    { from: start, to: end, spanMs },
    ...rangePieces(end, to, narrower),
  ];
}

/**
 * Numeric scores per policy, evaluator, metric and bucket. Without a label or service condition
 * (a trace's, which the rollup does not keep) the rollup answers whole minutes and hours that
 * fall in one bucket each, results only the edges; the sums are those of the same scores.
 * `rollupSpans` `[]` reads results only (what the rollup's tests compare with).
 */
export async function aggregateScores(
  db: Kysely<Database>,
  dialect: StoreDialect,
  filter: ScoreAggregateFilter,
  rollupSpans: readonly number[] = ROLLUP_SPANS_MS,
): Promise<ScoreBucket[]> {
  const bucket = Math.max(1, Math.floor(filter.bucketMs));
  let byTrace = traceConditions(dialect, filter);
  let byKey = false;
  if (byTrace !== undefined) {
    // A label matching few traces: their results by key, not every result in the range.
    const { project, labels, policy, evaluator } = filter;
    const lead = await leadingTraces(db, dialect, { project, labels, policy, evaluator });
    if (lead?.length === 0) return [];
    if (lead !== undefined) {
      byTrace = sql`${byTrace} and ${traceIdIn(dialect, lead, 'r.trace_id')}`;
      byKey = true;
    }
  }
  const spans = byTrace === undefined ? rollupSpans.filter((ms) => bucket % ms === 0) : [];
  const parts = rangePieces(filter.since, filter.until, spans).map((piece) =>
    piece.spanMs === undefined
      ? fromResults(dialect, filter, bucket, piece, byTrace, byKey)
      : fromRollup(dialect, filter, bucket, piece, piece.spanMs),
  );
  if (parts.length === 0) return [];
  const result = await sql<{
    policy: string;
    evaluator: string;
    metric: string;
    bucket_start: number | string;
    n: number | string;
    total: number | string;
  }>`
    select policy, evaluator, metric, bucket_start, sum(n) as n, sum(total) as total
    from (${sql.join(parts, sql` union all `)}) x
    group by policy, evaluator, metric, bucket_start
    order by policy, evaluator, metric, bucket_start`.execute(db);
  return result.rows.map((r) => ({
    policy: r.policy,
    evaluator: r.evaluator,
    metric: r.metric,
    bucketStart: Number(r.bucket_start),
    n: Number(r.n),
    sum: Number(r.total),
  }));
}

function bucketOf(dialect: StoreDialect, column: RawBuilder<unknown>, bucket: number) {
  return dialect === 'postgres'
    ? sql`(${column} / ${bucket}::bigint) * ${bucket}::bigint`
    : sql`cast(${column} / ${bucket} as integer) * ${bucket}`;
}

function seriesConditions(filter: ScoreAggregateFilter, alias: string) {
  const conditions = [sql`${sql.ref(`${alias}.project`)} = ${filter.project}`];
  if (filter.policy !== undefined) {
    conditions.push(sql`${sql.ref(`${alias}.policy`)} = ${filter.policy}`);
  }
  if (filter.evaluator !== undefined) {
    conditions.push(sql`${sql.ref(`${alias}.evaluator`)} = ${filter.evaluator}`);
  }
  return conditions;
}

function fromRollup(
  dialect: StoreDialect,
  filter: ScoreAggregateFilter,
  bucket: number,
  piece: Piece,
  spanMs: number,
) {
  const conditions = [
    ...seriesConditions(filter, 'u'),
    sql`u.span_ms = ${spanMs}`,
    sql`u.bucket_start >= ${piece.from}`,
    sql`u.bucket_start < ${piece.to}`,
  ];
  return sql`select u.policy as policy, u.evaluator as evaluator, u.metric as metric,
      ${bucketOf(dialect, sql.ref('u.bucket_start'), bucket)} as bucket_start,
      u.n as n, u.total as total
    from score_rollup u
    where ${sql.join(conditions, sql` and `)}`;
}

/** One row per score of each result in the piece. */
function fromResults(
  dialect: StoreDialect,
  filter: ScoreAggregateFilter,
  bucket: number,
  piece: Piece,
  byTrace: RawBuilder<unknown> | undefined,
  byKey = false,
) {
  const conditions = [
    ...seriesConditions(filter, 'r'),
    sql`r.scored_at >= ${piece.from}`,
    sql`r.scored_at < ${piece.to}`,
    // Not by results_outcome_idx (nearly every result is scored): by time.
    dialect === 'sqlite' ? sql`+r.outcome = 'OUTCOME_SCORED'` : sql`r.outcome = 'OUTCOME_SCORED'`,
  ];
  if (byTrace !== undefined) conditions.push(byTrace);
  // SQLite took results_policy_idx (every result of the project) for a common label's exists.
  const byTime =
    dialect === 'sqlite' && !byKey ? sql`indexed by results_project_scored_idx` : sql``;
  return sql`select policy, evaluator, metric, bucket_start, count(*) as n, sum(v) as total
    from (
      select r.policy as policy, r.evaluator as evaluator, ${scoreName(dialect)} as metric,
        ${bucketOf(dialect, sql.ref('r.scored_at'), bucket)} as bucket_start,
        ${scoreNumber(dialect)} as v
      from results r ${byTime} ${scoreElements(dialect, sql.ref('r.result'))}
      where ${sql.join(conditions, sql` and `)}
    ) e
    where v is not null and metric is not null
    group by policy, evaluator, metric, bucket_start`;
}

/** The trace's labels and service, as an `exists` on the result's trace; none: undefined. */
function traceConditions(dialect: StoreDialect, filter: ScoreAggregateFilter) {
  const conditions = [];
  const labels = labelsMatch(dialect, filter.labels);
  if (labels !== undefined) conditions.push(labels);
  if (filter.services !== undefined) {
    conditions.push(
      filter.services.length === 0
        ? sql`1 = 0`
        : sql`service in (${sql.join(filter.services.map((x) => sql`${x}`))})`,
    );
  }
  if (conditions.length === 0) return undefined;
  return sql`exists (select 1 from traces where traces.project = r.project
    and traces.trace_id = r.trace_id and ${sql.join(conditions, sql` and `)})`;
}
