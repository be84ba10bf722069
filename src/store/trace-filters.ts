import {
  type CompiledQuery,
  type Expression,
  type Kysely,
  type SelectQueryBuilder,
  type SqlBool,
  sql,
} from 'kysely';
import { labelsMatch } from './columns.js';
import type { StoreDialect } from './ports.js';
import type { Database } from './schema.js';

/**
 * Matching traces a filter may list from its own index and still lead a list query. A list walks
 * its order index (start or scored time) and checks each trace against the filters, which costs
 * (page size ÷ share of traces matching) rows: cheap for common values, the whole project for a
 * value matching nothing. A filter matching at most this many traces leads instead: its traces are
 * read by key and sorted. At this bound both ways cost about the same few milliseconds; the
 * walk is left to filters matching more (at 1M traces, more than 0.5%).
 */
export const LEAD_MAX = 5000;

/**
 * Two or more filters each matching more than LEAD_MAX traces may still match few together
 * (`env=dev&tier=trial`), or none: the walk then reads the whole project. When one of them
 * matches at most this many, its traces are checked against the others' indexes (a key lookup
 * each) and the traces matching all lead if they are few.
 */
export const INTERSECT_MAX = 20_000;

/**
 * A results filter matching more than LEAD_MAX traces and at most this many is checked, on
 * PostgreSQL, against its traces hashed once rather than by a key lookup per trace the list walks
 * (resultsCheck). Hashing costs about 0.5 µs per trace it matches, the lookups ~2.3 µs per trace
 * walked (page size ÷ share matching): at 700k traces in a project they cost the same near 12,000.
 * Counting this far costs a filter matching more ~1.5 ms beside the count to LEAD_MAX.
 */
export const HASH_MAX = 10_000;

/** The filters of the traces and scores lists that have an index of their own. */
export interface IndexedFilter {
  project: string;
  labels?: Readonly<Record<string, string>> | undefined;
  policy?: string | undefined;
  evaluator?: string | undefined;
  /** Of a result matching `policy` and `evaluator` when given (the traces list's). */
  outcome?: string | undefined;
  service?: string | undefined;
  /** Pulled traces' source (OTLP traces have none, and no entry in the index). */
  source?: string | undefined;
}

type ProbeQuery = SelectQueryBuilder<Database, keyof Database, { trace_id: string }>;

/** One indexed filter: the traces it matches, and the check of one trace against it. */
interface Probe {
  /** The traces the filter matches, ordered as the index that lists them. */
  list: ProbeQuery;
  /**
   * The trace `trace` (a column of the outer query) matches the filter, looked up by key; `start`,
   * when the outer query has it, is that trace's start time (`start_ms`).
   */
  has(trace: Expression<string>, start?: Expression<number>): Expression<SqlBool>;
  /** The list gives each trace's start time (`start_ms`) beside its id. */
  started?: true;
  /** The results filter (policy, evaluator, outcome): its traces match it exactly. */
  results?: true;
}

/** How a list finds its page (see planLead). */
export interface Lead {
  ids?: string[];
  label?: readonly [string, string];
  /**
   * Every id is known to have a result matching the filter's policy, evaluator and outcome (the
   * results filter led, or the ids were checked against it): the list need not check again.
   */
  resultsChecked?: true;
  /**
   * PostgreSQL: the results filter matches more than LEAD_MAX traces and at most HASH_MAX. The
   * list checks each trace it walks against them hashed once (`resultsCheck`) instead of by a key
   * lookup each.
   */
  resultsHashed?: true;
}

/** The conditions of a results filter on `results` (none when it has no policy, evaluator or outcome). */
function resultConditions(filter: Pick<IndexedFilter, 'policy' | 'evaluator' | 'outcome'>) {
  const conditions = [];
  if (filter.policy !== undefined) conditions.push(sql`results.policy = ${filter.policy}`);
  if (filter.evaluator !== undefined) conditions.push(sql`results.evaluator = ${filter.evaluator}`);
  if (filter.outcome !== undefined) conditions.push(sql`results.outcome = ${filter.outcome}`);
  return conditions;
}

/**
 * A trace has a stored result of the filter's policy, evaluator and outcome (one result matching
 * all given); undefined when none is given. `project` and `trace` name the trace (columns of the
 * outer query: the traces list's by default). Read by the primary key of `results`, which starts
 * with the trace: the indexes by policy, evaluator and outcome are in time order (migration 19),
 * and SQLite, which keeps no statistics, would take one of them for this check (more equalities,
 * or covering) and read every entry of the filter's value for each trace.
 */
export function resultsExist(
  dialect: StoreDialect,
  filter: Pick<IndexedFilter, 'policy' | 'evaluator' | 'outcome'>,
  project: Expression<string> = sql.ref('traces.project'),
  trace: Expression<string> = sql.ref('traces.trace_id'),
): Expression<SqlBool> | undefined {
  const conditions = resultConditions(filter);
  if (conditions.length === 0) return undefined;
  conditions.unshift(sql`results.project = ${project}`, sql`results.trace_id = ${trace}`);
  const byKey = dialect === 'sqlite' ? sql`indexed by sqlite_autoindex_results_1` : sql``;
  return sql<SqlBool>`exists (select 1 from results ${byKey} where ${sql.join(conditions, sql` and `)})`;
}

/**
 * The check of a list's traces (`traces`, of `filter.project`) against its results filter, as
 * `plan` allows: none when its ids were checked; when few enough (`resultsHashed`), membership in
 * the filter's traces, which PostgreSQL reads once from the filter's index and hashes (a hashed
 * SubPlan: `IS TRUE` keeps the planner from turning the `IN` into a join, which read each of those
 * traces by key and sorted them all: 39 ms at 1M traces); else `resultsExist`, a key lookup per
 * trace. A results filter matching 7,000 of 700k traces walks 5,000 traces for a page: 15 ms by
 * lookups, 5 ms hashed (PostgreSQL 15). The hash of HASH_MAX ids takes about 1 MB; `runList` gives
 * it room so the planner never falls back to a SubPlan read again for each trace.
 */
export function resultsCheck(
  dialect: StoreDialect,
  filter: Pick<IndexedFilter, 'policy' | 'evaluator' | 'outcome'> & { project?: string },
  plan: Lead,
): Expression<SqlBool> | undefined {
  if (plan.resultsChecked) return undefined;
  if (!plan.resultsHashed || filter.project === undefined) return resultsExist(dialect, filter);
  const conditions = [sql`results.project = ${filter.project}`, ...resultConditions(filter)];
  return sql<SqlBool>`(traces.trace_id in (select results.trace_id from results where ${sql.join(conditions, sql` and `)})) is true`;
}

/** The probe of a filter whose own query, narrowed to one trace, is read by key. */
function byKey(list: ProbeQuery): Probe {
  return {
    list,
    has: (trace) => sql<SqlBool>`exists ${list.clearOrderBy().where('trace_id', '=', trace)}`,
  };
}

/**
 * A query listing the traces each indexed filter matches (by its own index). Each is ordered as
 * its index is: a probe stops at LEAD_MAX + 1 entries, and without an order PostgreSQL may take a
 * sequential scan for a common value (a service matching 10% of traces: 30 ms against 8 ms for
 * the index at 300k traces) or a bitmap scan of every entry (a common policy: 20 against 1.4 ms).
 */
export function probesOf(
  db: Kysely<Database>,
  dialect: StoreDialect,
  filter: IndexedFilter,
): Probe[] {
  const { project } = filter;
  const probes: Probe[] = [];
  for (const [key, value] of Object.entries(filter.labels ?? {})) {
    const entry = sql`o.project = ${project} and o.key = ${key} and o.value = ${value}`;
    probes.push({
      list: db
        .selectFrom('trace_labels')
        .select(['trace_id', 'start_ms'])
        .where('project', '=', project)
        .where('key', '=', key)
        .where('value', '=', value)
        .orderBy('start_ms')
        .orderBy('trace_id'),
      started: true,
      // The key is in start order (migration 21): a trace's entry is found by its start time,
      // read from its row when the outer query does not have it.
      has: (trace, start) =>
        start === undefined
          ? sql<SqlBool>`exists (select 1 from traces t join trace_labels o
              on o.start_ms = t.start_ms and o.trace_id = t.trace_id
              where t.project = ${project} and t.trace_id = ${trace} and ${entry})`
          : sql<SqlBool>`exists (select 1 from trace_labels o
              where ${entry} and o.start_ms = ${start} and o.trace_id = ${trace})`,
    });
  }
  if (
    filter.policy !== undefined ||
    filter.evaluator !== undefined ||
    filter.outcome !== undefined
  ) {
    // Rows, not distinct traces (a trace has one per evaluator and version): `distinct` made
    // PostgreSQL hash every result of a common policy before the limit applied. One result
    // matches all three (results_outcome_idx when outcome is given).
    let q = db.selectFrom('results').select('trace_id').where('project', '=', project);
    if (filter.outcome !== undefined) q = q.where('outcome', '=', filter.outcome);
    if (filter.policy !== undefined) q = q.where('policy', '=', filter.policy);
    if (filter.evaluator !== undefined) q = q.where('evaluator', '=', filter.evaluator);
    // In the order of the index that serves it (results_outcome_idx, results_policy_idx or
    // results_evaluator_idx after their equalities: score time, then trace).
    if (filter.outcome !== undefined) q = q.orderBy('policy');
    if (filter.outcome !== undefined || filter.policy !== undefined) q = q.orderBy('evaluator');
    q = q.orderBy('scored_at').orderBy('trace_id');
    const has = (trace: Expression<string>) =>
      resultsExist(dialect, filter, sql`${project}`, trace) as Expression<SqlBool>;
    probes.push({ list: q, has, results: true });
  }
  if (filter.source !== undefined && filter.source !== '') {
    probes.push(
      byKey(
        db
          .selectFrom('traces')
          .select('trace_id')
          .where('project', '=', project)
          .where('source', '=', filter.source)
          // Says the partial index applies (a bound value proves nothing to the planner).
          .where('source', '<>', ''),
      ),
    );
  }
  if (filter.service !== undefined) {
    probes.push(
      byKey(
        db
          .selectFrom('traces')
          .select('trace_id')
          .where('project', '=', project)
          .where('service', '=', filter.service)
          .orderBy('start_ms'),
      ),
    );
  }
  return probes;
}

/**
 * How a list finds its page. `ids`: the traces that may match `filter` when some indexed filter
 * other than a label is selective (those of the filter matching the fewest, at most LEAD_MAX;
 * possibly none: the list is empty). `label`: a label filter whose entries the traces list reads
 * in its order (trace_labels' key, migrations 18 and 21) until a page matches every filter: a page
 * costs about a page of entries for a label alone however many traces it matches, and never more
 * entries than the label has. A label leads so when it matches fewest (reading its ids would read
 * them all), when every filter is a label (the one matching fewest, counts capped at
 * LEAD_MAX + 1), or when every filter matches more than LEAD_MAX traces and they are not few
 * together. Neither: the caller walks its order index. The caller still applies every filter
 * (these are candidates) but the results filter when `resultsChecked`: checking each of up to
 * 5,000 traces again read a result row per trace (its outcome is not in the primary key). Each
 * filter is counted first (an index-only count of up to LEAD_MAX + 1 entries, well under a
 * millisecond); ids are read only for the one that leads.
 */
export async function planLead(
  db: Kysely<Database>,
  dialect: StoreDialect,
  filter: IndexedFilter,
  byLabel = true,
): Promise<Lead> {
  const probes = probesOf(db, dialect, filter);
  // probesOf lists the labels first, in this order.
  const labels = byLabel ? Object.entries(filter.labels ?? {}) : [];
  // A label alone leads uncounted (a label matching nothing ends its walk at once).
  if (probes.length === 1 && labels.length === 1 && labels[0] !== undefined) {
    return { label: labels[0] };
  }
  let lead: { i: number; n: number } | undefined;
  const counts: number[] = [];
  for (const [i, probe] of probes.entries()) {
    // On PostgreSQL a results filter is counted up to HASH_MAX unless another leads already.
    const further = dialect === 'postgres' && probe.results && lead === undefined;
    const n = await countUpTo(db, probe.list, further ? HASH_MAX : LEAD_MAX);
    if (n === 0) return { ids: [] };
    counts.push(n);
    if (n <= LEAD_MAX && (lead === undefined || n < lead.n)) lead = { i, n };
  }
  if (lead !== undefined) {
    const label = labels[lead.i];
    if (label !== undefined) return { label };
    const probe = probes[lead.i];
    if (probe !== undefined) {
      const ids = distinctIds(await probe.list.execute());
      return probe.results ? { ids, resultsChecked: true } : { ids };
    }
  }
  // Labels only: a label's entries in order stop at a full page, where the intersection would
  // count each up to INTERSECT_MAX first (a pair took 13 ms with it, 8 without, on PostgreSQL at
  // 1M traces) and then walk the smaller one's to the end.
  if (probes.length > 1 && labels.length < probes.length) {
    const both = await intersection(db, probes, counts);
    // Each of them was checked against every filter's index, the results filter's included.
    if (both !== undefined) return { ids: both, resultsChecked: true };
  }
  // Counts are capped: the first of equals drives.
  let driver: number | undefined;
  for (let i = 0; i < labels.length; i++) {
    if (driver === undefined || (counts[i] ?? 0) < (counts[driver] ?? 0)) driver = i;
  }
  const label = driver === undefined ? undefined : labels[driver];
  const plan: Lead = label === undefined ? {} : { label };
  // No ids led: on PostgreSQL a results filter was counted up to HASH_MAX (or INTERSECT_MAX).
  const results = probes.findIndex((p) => p.results);
  if (dialect === 'postgres' && results >= 0 && (counts[results] ?? 0) <= HASH_MAX) {
    plan.resultsHashed = true;
  }
  return plan;
}

/**
 * The traces that may match `filter` when some indexed filter, labels included, is selective
 * (`planLead`'s ids, labels leading by ids too), for reads not in a list's order (aggregates).
 * The scores list calls `planLead` so too (trace_labels does not carry its order: migration 18),
 * and reads its `resultsChecked`.
 */
export async function leadingTraces(
  db: Kysely<Database>,
  dialect: StoreDialect,
  filter: IndexedFilter,
): Promise<string[] | undefined> {
  return (await planLead(db, dialect, filter, false)).ids;
}

/** Entries the probe lists, counted up to `max + 1` (index-only). */
async function countUpTo(db: Kysely<Database>, probe: ProbeQuery, max: number): Promise<number> {
  const row = await db
    .selectFrom(probe.limit(max + 1).as('m'))
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

const distinctIds = (rows: readonly { trace_id: string }[]) => [
  ...new Set(rows.map((r) => r.trace_id)),
];

/**
 * The traces every probe lists, when one lists at most INTERSECT_MAX and all together at most
 * LEAD_MAX; else undefined (the walk). The smallest probe's traces are each looked up in the
 * others' indexes. Writes each probe's count up to INTERSECT_MAX + 1 into `counts`.
 */
async function intersection(
  db: Kysely<Database>,
  probes: readonly Probe[],
  counts: number[],
): Promise<string[] | undefined> {
  let driver: { probe: Probe; n: number } | undefined;
  for (const [i, probe] of probes.entries()) {
    const n = await countUpTo(db, probe.list, INTERSECT_MAX);
    counts[i] = n;
    if (n <= INTERSECT_MAX && (driver === undefined || n < driver.n)) driver = { probe, n };
  }
  if (driver === undefined) return undefined;
  let q = db.selectFrom(driver.probe.list.as('d')).select('d.trace_id');
  for (const other of probes) {
    if (other === driver.probe) continue;
    q = q.where(
      other.has(sql.ref('d.trace_id'), driver.probe.started ? sql.ref('d.start_ms') : undefined),
    );
  }
  const rows = await q.limit(LEAD_MAX + 1).execute();
  return rows.length > LEAD_MAX ? undefined : distinctIds(rows);
}

/**
 * `column` (`traces.trace_id` unless named) is one of `ids`, as one parameter (a JSON array on
 * SQLite, an array on PostgreSQL): one statement text whatever their number, so SQLite compiles
 * it once.
 */
export function traceIdIn(
  dialect: StoreDialect,
  ids: readonly string[],
  column = 'traces.trace_id',
): Expression<SqlBool> {
  const ref = sql.ref(column);
  return dialect === 'postgres'
    ? sql<SqlBool>`${ref} = any(${[...ids]}::text[])`
    : sql<SqlBool>`${ref} in (select value from json_each(${JSON.stringify(ids)}))`;
}

/**
 * The label filters other than the one a list reads its entries of (`planLead`'s `label`, which
 * its entry guarantees). On PostgreSQL each is looked up in trace_labels by key (the trace's start
 * time and id), per entry read (`offset 0` keeps the subquery from becoming a join): with a JSON
 * containment (`labels @> …`, which the planner guesses matches a fraction of a percent) or an
 * EXISTS it may turn into a join, PostgreSQL hashed every trace of the project or every entry of
 * both labels rather than read a page of entries in order (122 and 13 ms against 0.4 ms at 100k
 * traces).
 */
export function otherLabelsMatch(
  dialect: StoreDialect,
  project: string,
  labels: Readonly<Record<string, string>> | undefined,
  lead: readonly [string, string],
): Expression<SqlBool> | undefined {
  const others = Object.entries(labels ?? {}).filter(([key]) => key !== lead[0]);
  if (others.length === 0) return undefined;
  if (dialect === 'sqlite') return labelsMatch(dialect, Object.fromEntries(others));
  return sql<SqlBool>`${sql.join(
    others.map(
      ([key, value]) =>
        sql`exists (select 1 from trace_labels o where o.project = ${project} and o.key = ${key}
          and o.value = ${value} and o.start_ms = traces.start_ms and o.trace_id = traces.trace_id
          offset 0)`,
    ),
    sql` and `,
  )}`;
}

/**
 * Runs a list query. On PostgreSQL without parallel workers (`SET LOCAL`, in a transaction of
 * its own): a page of 50 rows read in an index's order was planned as a Gather Merge of 2 workers
 * (21–30 ms, against 0.5 ms for the same plan without them); starting the workers costs more
 * than the few hundred rows they share. Other queries keep the server's setting.
 */
export async function runList<R>(
  db: Kysely<Database>,
  dialect: StoreDialect,
  query: { compile(): CompiledQuery<R> },
  plan: Lead = {},
): Promise<R[]> {
  if (dialect !== 'postgres') return (await db.executeQuery(query.compile())).rows;
  return db.transaction().execute(async (trx) => {
    await sql`set local max_parallel_workers_per_gather = 0`.execute(trx);
    // Room for the hash of the results filter's traces (resultsCheck) whatever the planner's
    // estimate of their number: a SubPlan read for each trace instead would cost seconds.
    if (plan.resultsHashed) await sql`set local work_mem = '64MB'`.execute(trx);
    return (await trx.executeQuery(query.compile())).rows;
  });
}
