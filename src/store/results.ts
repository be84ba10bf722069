import { CompiledQuery, type Insertable, type Kysely, type SqlBool, sql } from 'kysely';
import { CoreErrors, HUMAN_ANNOTATIONS, type Result } from '../core/index.js';
import { batches, placeholders } from './batches.js';
import { labelsMatch, toIso } from './columns.js';
import { decodeProjectPageToken, encodePageToken, pageLimit } from './page-token.js';
import type {
  AnnotationResult,
  Page,
  PageRequest,
  PolicyResults,
  ResultStore,
  ScoreAggregateFilter,
  ScoreBucket,
  ScoredTrace,
  ScoreFilter,
  StoreDialect,
} from './ports.js';
import type { Database, ResultsTable } from './schema.js';
import { aggregateScores } from './score-aggregate.js';
import { sqliteRollupOf } from './score-rollup.js';
import { planLead, resultsCheck, runList, traceIdIn } from './trace-filters.js';
import { SUMMARY_COLUMNS, fromRow as traceFromRow } from './traces.js';

type PolicyEntry = ScoredTrace['policies'][number];

/** A `results` row as written. */
type ResultRow = Insertable<ResultsTable>;

/** The columns an upsert of results sets on a row already stored. */
type UpsertSet = readonly ('position' | 'outcome' | 'result' | 'scored_at')[];

const PK = ['project', 'trace_id', 'policy', 'digest', 'evaluator'] as const;

const traceKey = (project: string, traceId: string) => `${project}\u0000${traceId}`;

/** Trace ids per query of `latest` (a bound parameter each). */
const LATEST_READ = 500;

/** Result rows per multi-row INSERT of `insertMany` on PostgreSQL (9 parameters each). */
const INSERT_ROWS = 500;

/** A stored result's key (the primary key's columns). */
const resultKey = (r: Pick<ResultRow, (typeof PK)[number]>) =>
  `${resultVersionKey(r.project, r.trace_id, r.policy, r.digest)}\u0000${r.evaluator}`;
/** One version of one policy's results: what `insertMany` stores at most once. */
const resultVersionKey = (project: string, traceId: string, policy: string, digest: string) =>
  `${project}\u0000${traceId}\u0000${policy}\u0000${digest}`;

/** Trace ids grouped by project, in first-seen order. */
function idsByProject(traces: readonly { project: string; traceId: string }[]) {
  const sets = new Map<string, Set<string>>();
  for (const t of traces) {
    const ids = sets.get(t.project);
    if (ids === undefined) sets.set(t.project, new Set([t.traceId]));
    else ids.add(t.traceId);
  }
  return new Map([...sets].map(([project, ids]) => [project, [...ids]]));
}

interface LatestRow {
  project: string;
  trace_id: string;
  policy: string;
  digest: string;
  result: string;
  scored_at: number;
}

/** One policy's results of one trace, across the versions (digests) stored. */
const versionKey = (row: LatestRow) => `${traceKey(row.project, row.trace_id)}\u0000${row.policy}`;

export class KyselyResultStore implements ResultStore {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: StoreDialect,
  ) {}

  private deleteVersion(r: PolicyResults) {
    return this.db
      .deleteFrom('results')
      .where('project', '=', r.project)
      .where('trace_id', '=', r.traceId)
      .where('policy', '=', r.policy)
      .where('digest', '=', r.digest);
  }

  /**
   * On SQLite outside a transaction of the caller's, a write of results takes one of its own
   * (`atomically`): inserted rows and their rollup counts (addToRollup) commit together.
   */
  private outsideTransaction(): boolean {
    return this.dialect === 'sqlite' && !this.db.isTransaction;
  }

  private atomically<T>(write: (store: KyselyResultStore) => Promise<T>): Promise<T> {
    return this.db.transaction().execute((trx) => write(new KyselyResultStore(trx, this.dialect)));
  }

  /**
   * Adds the numeric scores of the rows just inserted (those of `rows` that `inserted` names) to
   * `score_rollup`, on SQLite, in one grouped statement (migration 20 dropped the insert trigger
   * that did it per row); nothing else is computed on PostgreSQL, whose triggers do it all. The
   * update and delete triggers move the counts of rows changed or removed.
   */
  private async addToRollup(
    rows: readonly ResultRow[],
    inserted: (row: ResultRow) => boolean,
  ): Promise<void> {
    if (this.dialect !== 'sqlite') return;
    const rollup = sqliteRollupOf(rows.filter(inserted));
    if (rollup !== undefined) await this.db.executeQuery(rollup);
  }

  /**
   * Inserts rows, and sets `set` on those already stored (the later write wins). On SQLite the
   * two are apart, so that only the inserted rows are added to the rollup (an update moves its
   * counts by the update trigger).
   */
  private async upsert(rows: readonly ResultRow[], set: UpsertSet): Promise<void> {
    if (this.dialect !== 'sqlite') {
      await this.db
        .insertInto('results')
        .values([...rows])
        .onConflict((oc) =>
          oc
            .columns([...PK])
            .doUpdateSet((eb) => Object.fromEntries(set.map((c) => [c, eb.ref(`excluded.${c}`)]))),
        )
        .execute();
      return;
    }
    const inserted = await this.db
      .insertInto('results')
      .values([...rows])
      .onConflict((oc) => oc.columns([...PK]).doNothing())
      .returning(['project', 'trace_id', 'policy', 'digest', 'evaluator'])
      .execute();
    const written = new Set(inserted.map((r) => resultKey(r)));
    await this.addToRollup(rows, (r) => written.has(resultKey(r)));
    for (const row of rows) {
      if (written.has(resultKey(row))) continue;
      await this.db
        .updateTable('results')
        .set(Object.fromEntries(set.map((c) => [c, row[c]])))
        .where('project', '=', row.project)
        .where('trace_id', '=', row.trace_id)
        .where('policy', '=', row.policy)
        .where('digest', '=', row.digest)
        .where('evaluator', '=', row.evaluator)
        .execute();
    }
  }

  async insert(results: PolicyResults, replace: boolean): Promise<boolean> {
    if (this.outsideTransaction()) return this.atomically((s) => s.insert(results, replace));
    const { project, traceId, policy, digest, scoredAt } = results;
    if (results.results.length === 0) return false;
    if (new Set(results.results.map((r) => r.evaluator)).size !== results.results.length) {
      throw CoreErrors.INVALID_ARGUMENT(`policy ${policy} has two results for one evaluator name`);
    }
    const rows = results.results.map((r, position) => ({
      project,
      trace_id: traceId,
      policy,
      digest,
      evaluator: r.evaluator,
      position,
      outcome: r.outcome,
      result: JSON.stringify(r),
      scored_at: scoredAt,
    }));
    if (replace) {
      await this.deleteVersion(results).execute();
      // A concurrent replace may have written rows our delete did not see: the later one wins.
      await this.upsert(rows, ['position', 'outcome', 'result', 'scored_at']);
    } else {
      const existing = await this.db
        .selectFrom('results')
        .select('evaluator')
        .where('project', '=', project)
        .where('trace_id', '=', traceId)
        .where('policy', '=', policy)
        .where('digest', '=', digest)
        .limit(1)
        .executeTakeFirst();
      if (existing !== undefined) return false;
      // A concurrent insert of the same version that committed after the check shows up here as
      // conflicts (PostgreSQL waits on the unique key for the other transaction, then skips).
      const inserted = await this.db
        .insertInto('results')
        .values(rows)
        .onConflict((oc) => oc.columns([...PK]).doNothing())
        .returning('evaluator')
        .execute();
      if (inserted.length === 0) return false;
      // Before a take-back below: its delete trigger subtracts what is added here.
      await this.addToRollup(rows, (r) => inserted.some((i) => i.evaluator === r.evaluator));
      if (inserted.length < rows.length) {
        // The other writer won with other evaluators (another generation of the policy): take
        // back the rows that did not collide rather than mix them into its results.
        await this.deleteVersion(results)
          .where(
            'evaluator',
            'in',
            inserted.map((r) => r.evaluator),
          )
          .execute();
        return false;
      }
    }
    await this.markScored(project, [traceId], scoredAt);
    return true;
  }

  async insertMany(batch: readonly PolicyResults[]): Promise<boolean[]> {
    if (this.outsideTransaction()) return this.atomically((s) => s.insertMany(batch));
    const out = batch.map(() => false);
    for (const r of batch) {
      if (new Set(r.results.map((x) => x.evaluator)).size !== r.results.length) {
        throw CoreErrors.INVALID_ARGUMENT(
          `policy ${r.policy} has two results for one evaluator name`,
        );
      }
    }
    const candidates = batch
      .map((r, index) => ({ r, index }))
      .filter(({ r }) => r.results.length > 0);
    if (candidates.length === 0) return out;
    // Versions already stored win, as in `insert`: one read per project and 500 traces.
    const stored = new Set<string>();
    for (const row of await this.storedVersions(candidates.map(({ r }) => r)))
      stored.add(resultVersionKey(row.project, row.trace_id, row.policy, row.digest));
    const writing = new Map<string, { r: PolicyResults; index: number }>();
    for (const c of candidates) {
      const key = resultVersionKey(c.r.project, c.r.traceId, c.r.policy, c.r.digest);
      if (!stored.has(key) && !writing.has(key)) writing.set(key, c);
    }
    const written = [...writing.values()].flatMap(({ r }) =>
      r.results.map(
        (x, position): ResultRow => ({
          project: r.project,
          trace_id: r.traceId,
          policy: r.policy,
          digest: r.digest,
          evaluator: x.evaluator,
          position,
          outcome: x.outcome,
          result: JSON.stringify(x),
          scored_at: r.scoredAt,
        }),
      ),
    );
    const rows = written.map((w) => [
      w.project,
      w.trace_id,
      w.policy,
      w.digest,
      w.evaluator,
      w.position,
      w.outcome,
      w.result,
      w.scored_at,
    ]);
    // A concurrent writer of the same version that committed after the read shows up here as
    // conflicts (PostgreSQL waits on the unique key for the other transaction, then skips).
    const inserted = new Map<string, string[]>();
    for (const part of batches(this.dialect, rows, INSERT_ROWS)) {
      const { rows: back } = await this.db.executeQuery<{
        project: string;
        trace_id: string;
        policy: string;
        digest: string;
        evaluator: string;
      }>(
        CompiledQuery.raw(
          `insert into results (project, trace_id, policy, digest, evaluator, position, outcome, result, scored_at)
           values ${placeholders(this.dialect, part.length, 9)}
           on conflict (project, trace_id, policy, digest, evaluator) do nothing
           returning project, trace_id, policy, digest, evaluator`,
          part.flat(),
        ),
      );
      for (const b of back) {
        const key = resultVersionKey(b.project, b.trace_id, b.policy, b.digest);
        const evaluators = inserted.get(key);
        if (evaluators === undefined) inserted.set(key, [b.evaluator]);
        else evaluators.push(b.evaluator);
      }
    }
    // Before the take-backs below: their delete trigger subtracts what is added here.
    await this.addToRollup(
      written,
      (w) =>
        inserted
          .get(resultVersionKey(w.project, w.trace_id, w.policy, w.digest))
          ?.includes(w.evaluator) ?? false,
    );
    const scored: PolicyResults[] = [];
    for (const [key, { r, index }] of writing) {
      const evaluators = inserted.get(key) ?? [];
      if (evaluators.length === r.results.length) {
        out[index] = true;
        scored.push(r);
      } else if (evaluators.length > 0) {
        // The other writer won with other evaluators: take back the rows that did not collide.
        await this.deleteVersion(r).where('evaluator', 'in', evaluators).execute();
      }
    }
    await this.markScoredMany(scored);
    return out;
  }

  /** `markScored` of many traces: one statement per (project, time) and 500 traces. */
  private async markScoredMany(scored: readonly PolicyResults[]): Promise<void> {
    const groups = new Map<string, { project: string; at: number; ids: Set<string> }>();
    for (const r of scored) {
      const key = `${r.project}\u0000${r.scoredAt}`;
      let g = groups.get(key);
      if (g === undefined) {
        g = { project: r.project, at: r.scoredAt, ids: new Set() };
        groups.set(key, g);
      }
      g.ids.add(r.traceId);
    }
    for (const { project, at, ids } of groups.values()) {
      const all = [...ids];
      for (let i = 0; i < all.length; i += LATEST_READ) {
        await this.markScored(project, all.slice(i, i + LATEST_READ), at);
      }
    }
  }

  async annotate(annotation: AnnotationResult): Promise<void> {
    if (this.outsideTransaction()) return this.atomically((s) => s.annotate(annotation));
    const { project, traceId, result, annotatedAt } = annotation;
    // The annotator's principal stands in the digest column: one row per (person, name).
    await this.upsert(
      [
        {
          project,
          trace_id: traceId,
          policy: HUMAN_ANNOTATIONS,
          digest: result.annotator.principal,
          evaluator: result.evaluator,
          position: 0,
          outcome: result.outcome,
          result: JSON.stringify(result),
          scored_at: annotatedAt,
        },
      ],
      ['outcome', 'result', 'scored_at'],
    );
    await this.markScored(project, [traceId], annotatedAt);
  }

  /** The traces' `scored_at` only moves forward. */
  private async markScored(
    project: string,
    traceIds: readonly string[],
    at: number,
  ): Promise<void> {
    await this.db
      .updateTable('traces')
      .set((eb) => ({
        scored_at: eb
          .case()
          .when(eb.or([eb('scored_at', 'is', null), eb('scored_at', '<', at)]))
          .then(at)
          .else(eb.ref('scored_at'))
          .end(),
      }))
      .where('project', '=', project)
      .where('trace_id', 'in', traceIds)
      .execute();
  }

  async scoredPolicies(project: string, traceId: string, digest: string): Promise<Set<string>> {
    const rows = await this.db
      .selectFrom('results')
      .select('policy')
      .distinct()
      .where('project', '=', project)
      .where('trace_id', '=', traceId)
      .where('digest', '=', digest)
      .execute();
    return new Set(rows.map((r) => r.policy));
  }

  async scoredPoliciesOf(
    versions: readonly { project: string; traceId: string; digest: string }[],
  ): Promise<Set<string>[]> {
    const found = new Map<string, Set<string>>();
    const versionOf = (project: string, traceId: string, digest: string) =>
      `${project}\u0000${traceId}\u0000${digest}`;
    for (const row of await this.storedVersions(versions)) {
      const key = versionOf(row.project, row.trace_id, row.digest);
      const policies = found.get(key);
      if (policies === undefined) found.set(key, new Set([row.policy]));
      else policies.add(row.policy);
    }
    return versions.map((v) => new Set(found.get(versionOf(v.project, v.traceId, v.digest)) ?? []));
  }

  /** The (policy, digest) versions stored for these traces: one read per project and 500 traces. */
  private async storedVersions(
    traces: readonly { project: string; traceId: string }[],
  ): Promise<{ project: string; trace_id: string; policy: string; digest: string }[]> {
    const out: { project: string; trace_id: string; policy: string; digest: string }[] = [];
    for (const [project, ids] of idsByProject(traces)) {
      for (let i = 0; i < ids.length; i += LATEST_READ) {
        const rows = await this.db
          .selectFrom('results')
          .select(['trace_id', 'policy', 'digest'])
          .distinct()
          .where('project', '=', project)
          .where('trace_id', 'in', ids.slice(i, i + LATEST_READ))
          .execute();
        for (const row of rows) out.push({ project, ...row });
      }
    }
    return out;
  }

  async list(filter: ScoreFilter, page: PageRequest): Promise<Page<ScoredTrace>> {
    const limit = pageLimit(page);
    const after = decodeProjectPageToken(page.pageToken);
    const plan =
      filter.project === undefined
        ? {}
        : await planLead(this.db, this.dialect, { ...filter, project: filter.project }, false);
    const lead = plan.ids;
    if (lead?.length === 0) return { items: [] };
    let q = this.db
      .selectFrom('traces')
      .select([...SUMMARY_COLUMNS, 'scored_at'])
      .where('traces.scored_at', 'is not', null)
      .where('traces.completed_at', 'is not', null)
      .orderBy('traces.scored_at', 'desc')
      .orderBy('traces.project', 'desc')
      .orderBy('traces.trace_id', 'desc')
      .limit(limit + 1);
    if (filter.project !== undefined) q = q.where('traces.project', '=', filter.project);
    if (filter.service !== undefined) {
      // Not by the service index: it would read every trace of the service to sort them by score
      // time (200 ms at 200k traces); a rare service leads instead (trace-filters.ts).
      q = q.where(
        this.dialect === 'sqlite'
          ? sql<SqlBool>`+traces.service = ${filter.service}`
          : sql<SqlBool>`traces.service = ${filter.service}`,
      );
    }
    if (filter.services !== undefined) {
      // An empty grant sees nothing (`in ()` is not valid SQL).
      q =
        filter.services.length > 0
          ? q.where('traces.service', 'in', [...filter.services])
          : q.where(sql<SqlBool>`1 = 0`);
    }
    if (filter.since !== undefined) q = q.where('traces.scored_at', '>=', filter.since);
    const labels = labelsMatch(this.dialect, filter.labels);
    if (labels !== undefined) q = q.where(labels);
    const scored = resultsCheck(this.dialect, filter, plan);
    if (scored !== undefined) q = q.where(scored);
    if (lead !== undefined) q = q.where(traceIdIn(this.dialect, lead));
    if (after !== undefined) {
      q = q.where((eb) =>
        eb(
          eb.refTuple('traces.scored_at', 'traces.project', 'traces.trace_id'),
          '<',
          eb.tuple(after.at, after.project, after.id),
        ),
      );
    }
    const rows = await runList(this.db, this.dialect, q, plan);
    const items = rows.slice(0, limit);
    const latest = await this.latest(
      items.map((r) => ({ project: r.project, traceId: r.trace_id })),
    );
    const out = items.map((row) => ({
      trace: traceFromRow(row),
      scoredAt: toIso(row.scored_at ?? 0),
      policies: latest.get(traceKey(row.project, row.trace_id)) ?? [],
    }));
    const last = items.at(-1);
    if (rows.length <= limit || last === undefined) return { items: out };
    return {
      items: out,
      nextPageToken: encodePageToken({
        at: last.scored_at ?? 0,
        id: last.trace_id,
        project: last.project,
      }),
    };
  }

  async forTrace(project: string, traceId: string): Promise<ScoredTrace | undefined> {
    const row = await this.db
      .selectFrom('traces')
      .select([...SUMMARY_COLUMNS, 'scored_at'])
      .where('project', '=', project)
      .where('trace_id', '=', traceId)
      .where('completed_at', 'is not', null)
      .where('scored_at', 'is not', null)
      .executeTakeFirst();
    if (row === undefined) return undefined;
    const policies = (await this.latest([{ project, traceId }])).get(traceKey(project, traceId));
    if (policies === undefined) return undefined;
    return { trace: traceFromRow(row), scoredAt: toIso(row.scored_at ?? 0), policies };
  }

  async latestOf(
    traces: readonly { project: string; traceId: string }[],
  ): Promise<PolicyEntry[][]> {
    const latest = await this.latest(traces);
    return traces.map((t) => latest.get(traceKey(t.project, t.traceId)) ?? []);
  }

  aggregate(filter: ScoreAggregateFilter): Promise<ScoreBucket[]> {
    return aggregateScores(this.db, this.dialect, filter);
  }

  /**
   * Each trace's latest results per policy: per (trace, policy) only the digest stored last
   * counts (older versions stay stored but are superseded). Policies by name.
   *
   * One query per project, `project = ? and trace_id in (…)`, which walks the primary key. A row
   * value `(project, trace_id) in ((…), …)` with a correlated `max(scored_at)` made SQLite walk
   * `results_project_scored_idx` over the whole project for every row: a page of 1000 traces
   * among 10k scored ones held the event loop for minutes. The latest version is picked here.
   */
  private async latest(
    traces: readonly { project: string; traceId: string }[],
  ): Promise<Map<string, PolicyEntry[]>> {
    const out = new Map<string, PolicyEntry[]>();
    const byProject = new Map<string, string[]>();
    for (const t of traces) {
      const ids = byProject.get(t.project);
      if (ids === undefined) byProject.set(t.project, [t.traceId]);
      else ids.push(t.traceId);
    }
    const rows: LatestRow[] = [];
    for (const [project, ids] of byProject) {
      for (let i = 0; i < ids.length; i += LATEST_READ) {
        rows.push(
          ...(await this.db
            .selectFrom('results as r')
            .select(['r.project', 'r.trace_id', 'r.policy', 'r.digest', 'r.result', 'r.scored_at'])
            .where('r.project', '=', project)
            .where('r.trace_id', 'in', ids.slice(i, i + LATEST_READ))
            .orderBy('r.project')
            .orderBy('r.trace_id')
            .orderBy('r.policy')
            .orderBy('r.digest')
            .orderBy('r.position')
            .orderBy('r.evaluator')
            .execute()),
        );
      }
    }
    const newest = new Map<string, number>();
    for (const row of rows) {
      if (row.policy === HUMAN_ANNOTATIONS) continue;
      const at = Number(row.scored_at);
      if (at > (newest.get(versionKey(row)) ?? Number.NEGATIVE_INFINITY))
        newest.set(versionKey(row), at);
    }
    for (const row of rows) {
      // Annotations are not versions: every one of them is current.
      const human = row.policy === HUMAN_ANNOTATIONS;
      if (!human && Number(row.scored_at) !== newest.get(versionKey(row))) continue;
      const k = traceKey(row.project, row.trace_id);
      let policies = out.get(k);
      if (policies === undefined) {
        policies = [];
        out.set(k, policies);
      }
      let entry = policies.at(-1);
      if (entry?.policy !== row.policy) {
        entry = {
          policy: row.policy,
          digest: human ? '' : row.digest,
          scoredAt: toIso(row.scored_at),
          results: [],
        };
        policies.push(entry);
      }
      if (human && toIso(row.scored_at) > entry.scoredAt) entry.scoredAt = toIso(row.scored_at);
      // Two versions stored in the same millisecond: the first digest in order stands.
      if (human || entry.digest === row.digest) {
        entry.results.push(JSON.parse(row.result) as Result);
      }
    }
    return out;
  }
}
