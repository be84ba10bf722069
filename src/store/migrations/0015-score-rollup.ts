import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { Migration } from '../migrate.js';
import type { StoreDialect } from '../ports.js';

const KEY = sql.raw('project, span_ms, bucket_start, policy, evaluator, metric');

/** The rollup's widths: hour rows serve long ranges, minute rows their edges and short buckets. */
export const ROLLUP_SPANS_MS = [3_600_000, 60_000] as const;

/**
 * One row per score of a result, `s` the JSON element: every reader of numeric scores (the
 * rollup's triggers and the per-result aggregate) takes name and value from these, so both count
 * the same scores.
 */
export function scoreElements(dialect: StoreDialect, result: RawBuilder<unknown>) {
  return dialect === 'postgres'
    ? sql`cross join lateral jsonb_array_elements(${result}::jsonb -> 'scores') as s(value)`
    : sql`, json_each(${result}, '$.scores') as s`;
}

export function scoreName(dialect: StoreDialect) {
  return dialect === 'postgres' ? sql`s.value ->> 'name'` : sql`json_extract(s.value, '$.name')`;
}

/** A score's number: its value, else 1 or 0 for passed; null for neither (not counted). */
export function scoreNumber(dialect: StoreDialect) {
  return dialect === 'postgres'
    ? sql`case when jsonb_typeof(s.value -> 'value') = 'number' then (s.value ->> 'value')::float8
          when jsonb_typeof(s.value -> 'passed') = 'boolean' then (case when (s.value ->> 'passed')::boolean then 1 else 0 end)
          end`
    : sql`case when json_type(s.value, '$.value') in ('integer', 'real') then json_extract(s.value, '$.value')
          when json_type(s.value, '$.passed') in ('true', 'false') then json_extract(s.value, '$.passed')
          end`;
}

/**
 * `score_rollup`: count and sum of numeric scores per project, width (hour and minute), bucket,
 * policy, evaluator and metric, so that score aggregates over days read a few thousand rows
 * instead of every result (5.6 s for 30 days at 200k traces). Triggers on `results` keep it in the
 * transaction that writes, replaces or deletes results, on both dialects, whoever writes them; a
 * row whose count falls to 0 is deleted (its sum starts again from exactly 0).
 */
export const scoreRollup: Migration = {
  version: 15,
  name: 'score_rollup',
  async up(db, dialect) {
    await db.schema
      .createTable('score_rollup')
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('span_ms', 'bigint', (c) => c.notNull())
      .addColumn('bucket_start', 'bigint', (c) => c.notNull())
      .addColumn('policy', 'text', (c) => c.notNull())
      .addColumn('evaluator', 'text', (c) => c.notNull())
      .addColumn('metric', 'text', (c) => c.notNull())
      .addColumn('n', 'bigint', (c) => c.notNull())
      .addColumn('total', 'double precision', (c) => c.notNull())
      .addPrimaryKeyConstraint('score_rollup_pk', [
        'project',
        'span_ms',
        'bucket_start',
        'policy',
        'evaluator',
        'metric',
      ])
      .$call((t) => (dialect === 'sqlite' ? t.modifyEnd(sql`without rowid`) : t))
      .execute();
    if (dialect === 'sqlite') await sqliteTriggers(db);
    else await postgresTriggers(db);
    // Results stored before this migration.
    await sql`insert into score_rollup (project, span_ms, bucket_start, policy, evaluator, metric, n, total)
      ${rollupRows(dialect, sql.raw('results'), '')}`.execute(db);
  },
};

/**
 * The rollup rows of a set of result rows (`source`, alias r), count and sum negated when
 * `sign` is '-': one per width, bucket, policy, evaluator and metric, in key order (PostgreSQL
 * writers then lock rollup rows in one order and do not deadlock). `perScore` leaves out the
 * grouping, one row per score and width: SQLite's upsert adds rows of one key one after another,
 * and a row's trigger is cheaper without the sort.
 */
function rollupRows(
  dialect: StoreDialect,
  source: RawBuilder<unknown>,
  sign: '' | '-',
  perScore = false,
) {
  const spans = sql.raw(ROLLUP_SPANS_MS.map((ms) => `select ${ms} as span_ms`).join(' union all '));
  const start =
    dialect === 'postgres'
      ? sql`(r.scored_at / w.span_ms::bigint) * w.span_ms::bigint`
      : sql`(r.scored_at / w.span_ms) * w.span_ms`;
  const scores = sql`select r.project as project, w.span_ms as span_ms, ${start} as bucket_start,
      r.policy as policy, r.evaluator as evaluator, ${scoreName(dialect)} as metric,
      ${scoreNumber(dialect)} as v
    from ${source} r ${scoreElements(dialect, sql.ref('r.result'))}, (${spans}) w
    where r.outcome = 'OUTCOME_SCORED'`;
  const counted = sql`from (${scores}) x where v is not null and metric is not null`;
  if (perScore) {
    return sql`select ${KEY}, ${sql.raw(sign)}1, ${sql.raw(sign)}v ${counted}`;
  }
  return sql`select ${KEY}, ${sql.raw(sign)}count(*), ${sql.raw(sign)}sum(v) ${counted}
    group by ${KEY} order by ${KEY}`;
}

/**
 * The statement adding the rollup rows of `source` (result rows, alias r: project, policy,
 * evaluator, outcome, result, scored_at) to `score_rollup`, grouped: on SQLite the store runs it
 * for the rows it inserts (migration 20 dropped the per-row insert trigger), and the benches that
 * seed results run it once.
 */
export function rollupUpsert(dialect: StoreDialect, source: RawBuilder<unknown>) {
  return sql`insert into score_rollup (${KEY}, n, total) ${rollupRows(dialect, source, '')}
    on conflict (${KEY}) do update
      set n = score_rollup.n + excluded.n, total = score_rollup.total + excluded.total`;
}

async function sqliteTriggers(db: Kysely<unknown>): Promise<void> {
  // The row as a one-row table, so the trigger shares rollupRows with the backfill.
  const row = (alias: 'new' | 'old') =>
    sql.raw(
      `(select ${alias}.project as project, ${alias}.policy as policy, ${alias}.evaluator as evaluator,
        ${alias}.outcome as outcome, ${alias}.result as result, ${alias}.scored_at as scored_at)`,
    );
  const add = (alias: 'new' | 'old', sign: '' | '-') =>
    sql`insert into score_rollup (${KEY}, n, total)
      ${rollupRows('sqlite', row(alias), sign, true)}
      on conflict (${KEY}) do update set n = n + excluded.n, total = total + excluded.total;`;
  const emptied = sql`delete from score_rollup where project = old.project and policy = old.policy
      and evaluator = old.evaluator and n = 0
      and (${sql.raw(
        ROLLUP_SPANS_MS.map(
          (ms) => `(span_ms = ${ms} and bucket_start = (old.scored_at / ${ms}) * ${ms})`,
        ).join(' or '),
      )});`;
  await sql`create trigger score_rollup_insert after insert on results
    when new.outcome = 'OUTCOME_SCORED'
    begin ${add('new', '')} end`.execute(db);
  await sql`create trigger score_rollup_delete after delete on results
    when old.outcome = 'OUTCOME_SCORED'
    begin ${add('old', '-')} ${emptied} end`.execute(db);
  await sql`create trigger score_rollup_update after update on results
    when old.outcome = 'OUTCOME_SCORED' or new.outcome = 'OUTCOME_SCORED'
    begin ${add('old', '-')} ${emptied} ${add('new', '')} end`.execute(db);
}

async function postgresTriggers(db: Kysely<unknown>): Promise<void> {
  // Per statement over transition tables: a batch of results costs one upsert, not one per row.
  const add = (rows: string, sign: '' | '-') =>
    sql`insert into score_rollup (${KEY}, n, total)
      ${rollupRows('postgres', sql.raw(rows), sign)}
      on conflict (${KEY}) do update
        set n = score_rollup.n + excluded.n, total = score_rollup.total + excluded.total;`;
  const spans = sql.raw(ROLLUP_SPANS_MS.map((ms) => `(${ms}::bigint)`).join(', '));
  const code = sql`begin
      if tg_op in ('UPDATE', 'DELETE') then
        ${add('old_rows', '-')}
        delete from score_rollup s
          using (select distinct o.project, o.policy, o.evaluator, w.span_ms,
                   (o.scored_at / w.span_ms) * w.span_ms as bucket_start
                 from old_rows o, (values ${spans}) as w(span_ms)
                 where o.outcome = 'OUTCOME_SCORED') k
          where s.project = k.project and s.span_ms = k.span_ms
            and s.bucket_start = k.bucket_start and s.policy = k.policy
            and s.evaluator = k.evaluator and s.n = 0;
      end if;
      if tg_op in ('INSERT', 'UPDATE') then
        ${add('new_rows', '')}
      end if;
      return null;
    end`.compile(db);
  // Unqualified names resolve on the connection's search_path, as the store's own queries do.
  await sql`create function score_rollup_sync() returns trigger language plpgsql as $$ ${sql.raw(
    code.sql,
  )} $$`.execute(db);
  await sql`create trigger score_rollup_insert after insert on results
    referencing new table as new_rows for each statement
    execute function score_rollup_sync()`.execute(db);
  await sql`create trigger score_rollup_update after update on results
    referencing old table as old_rows new table as new_rows for each statement
    execute function score_rollup_sync()`.execute(db);
  await sql`create trigger score_rollup_delete after delete on results
    referencing old table as old_rows for each statement
    execute function score_rollup_sync()`.execute(db);
}
