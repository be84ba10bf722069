import { CompiledQuery, type Kysely, type Selectable } from 'kysely';
import { CoreErrors, type Result } from '../core/index.js';
import { toIso } from './columns.js';
import { decodePageToken, encodePageToken, pageLimit } from './page-token.js';
import type {
  NewRun,
  Page,
  PageRequest,
  RunFinish,
  RunItemResults,
  RunOutput,
  RunProgress,
  RunRecord,
  RunResult,
  RunStatus,
  RunStore,
  StoreDialect,
} from './ports.js';
import type { Database, RunsTable } from './schema.js';

/**
 * Rows per multi-row INSERT: SQLite binds at most 32766 parameters per statement, PostgreSQL
 * 65535; 1000 rows of the widest table (8 columns) stay below both.
 */
const CHUNK = 1000;

type RunRow = Selectable<RunsTable> & { spec?: string };

function fromRow(row: RunRow): RunRecord {
  const run: RunRecord = {
    id: row.id,
    project: row.project,
    name: row.name,
    labels: JSON.parse(row.labels) as Record<string, string>,
    status: row.status as RunStatus,
    createdBy: row.created_by,
    createdAt: toIso(Number(row.created_at)),
    total: Number(row.total),
    done: Number(row.done),
    cancelRequested: row.cancel_requested === 1,
  };
  if (row.spec !== undefined) run.spec = JSON.parse(row.spec) as Record<string, unknown>;
  if (row.started_at !== null) run.startedAt = toIso(Number(row.started_at));
  if (row.finished_at !== null) run.finishedAt = toIso(Number(row.finished_at));
  if (row.summaries !== null) run.summaries = JSON.parse(row.summaries) as unknown[];
  if (row.gates !== null) run.gates = JSON.parse(row.gates) as unknown[];
  if (row.error !== null) run.error = row.error;
  if (row.lease_holder !== null) run.leaseHolder = row.lease_holder;
  if (row.lease_expires_at !== null) run.leaseExpiresAt = toIso(Number(row.lease_expires_at));
  if (row.dataset_digest !== null) run.datasetDigest = row.dataset_digest;
  return run;
}

/** A results page token: the (record, trial) of the last item served. */
function encodeItemToken(recordIndex: number, trial: number): string {
  return encodePageToken({ at: recordIndex, id: String(trial) });
}

function decodeItemToken(token: string | undefined): [number, number] | undefined {
  const pos = decodePageToken(token);
  if (pos === undefined) return undefined;
  const trial = Number(pos.id);
  if (pos.project !== undefined || !Number.isSafeInteger(trial) || String(trial) !== pos.id) {
    throw CoreErrors.INVALID_ARGUMENT('page_token is not a token this server issued', {
      details: [{ path: 'page_token', message: 'malformed page token' }],
    });
  }
  return [pos.at, trial];
}

const OUTPUT_COLUMNS = ['run_id', 'record_index', 'trial', 'record_id', 'output', 'error'];
const RESULT_COLUMNS = [
  'run_id',
  'record_index',
  'trial',
  'evaluator',
  'position',
  'record_id',
  'outcome',
  'result',
];
const PRIMARY_KEYS: Record<string, string> = {
  run_outputs: 'run_id, record_index, trial',
  run_results: 'run_id, record_index, trial, evaluator',
};

/** Multi-row INSERT texts by (dialect, table, rows); a run writes the same few shapes. */
const insertTexts = new Map<string, string>();

export class KyselyRunStore implements RunStore {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: StoreDialect,
  ) {}

  /**
   * `insert … values (…), (…) on conflict do nothing` as text: the batches of a run are the hot
   * path, and building them through the query builder cost more than the database's work.
   */
  private insertSql(table: string, columns: readonly string[], rows: number): string {
    const key = `${this.dialect}/${table}/${rows}`;
    let text = insertTexts.get(key);
    if (text === undefined) {
      const tuples: string[] = [];
      let n = 0;
      for (let r = 0; r < rows; r++) {
        const marks = columns.map(() => (this.dialect === 'postgres' ? `$${++n}` : '?'));
        tuples.push(`(${marks.join(', ')})`);
      }
      text = `insert into ${table} (${columns.join(', ')}) values ${tuples.join(', ')} on conflict (${PRIMARY_KEYS[table]}) do nothing`;
      insertTexts.set(key, text);
    }
    return text;
  }

  async create(run: NewRun): Promise<RunRecord> {
    // The spec first: a run row is claimable as soon as it is visible (in one transaction, both
    // become visible together).
    await this.db
      .insertInto('run_specs')
      .values({ run_id: run.id, spec: JSON.stringify(run.spec) })
      .execute();
    const row = await this.db
      .insertInto('runs')
      .values({
        id: run.id,
        project: run.project,
        name: run.name,
        labels: JSON.stringify(run.labels),
        keep: run.keep ? 1 : 0,
        status: 'RUN_STATUS_PENDING',
        created_by: run.createdBy,
        created_at: run.createdAt,
        started_at: null,
        finished_at: null,
        total: 0,
        done: 0,
        summaries: null,
        gates: null,
        error: null,
        cancel_requested: 0,
        lease_holder: null,
        lease_expires_at: null,
        dataset_digest: null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { ...fromRow(row), spec: run.spec };
  }

  private async spec(id: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('run_specs')
      .select('spec')
      .where('run_id', '=', id)
      .executeTakeFirst();
    return row?.spec;
  }

  async get(id: string, options: { spec?: boolean } = {}): Promise<RunRecord | undefined> {
    const row = await this.db
      .selectFrom('runs')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    if (row === undefined) return undefined;
    if (options.spec === false) return fromRow(row);
    const spec = await this.spec(id);
    return fromRow(spec === undefined ? row : { ...row, spec });
  }

  async list(project: string | undefined, page: PageRequest): Promise<Page<RunRecord>> {
    const limit = pageLimit(page);
    const after = decodePageToken(page.pageToken);
    let q = this.db
      .selectFrom('runs')
      .selectAll()
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit + 1);
    if (project !== undefined) q = q.where('project', '=', project);
    if (after !== undefined) {
      q = q.where((eb) => eb(eb.refTuple('created_at', 'id'), '<', eb.tuple(after.at, after.id)));
    }
    const rows = await q.execute();
    const items = rows.slice(0, limit);
    const last = items.at(-1);
    const out = items.map(fromRow);
    if (rows.length <= limit || last === undefined) return { items: out };
    return {
      items: out,
      nextPageToken: encodePageToken({ at: Number(last.created_at), id: last.id }),
    };
  }

  async claim(holder: string, now: number, leaseMs: number): Promise<RunRecord | undefined> {
    // As the work queue's claim (work-queue.ts): on PostgreSQL the candidate is locked and
    // skipped by concurrent claimers, and `= any(array(...))` runs the subquery once.
    const query =
      this.dialect === 'postgres'
        ? CompiledQuery.raw(
            `update runs set status = 'RUN_STATUS_RUNNING', lease_holder = $1,
               lease_expires_at = $2, started_at = coalesce(started_at, $3)
             where id = any(array(
               select id from runs where finished_at is null
                 and (lease_holder is null or lease_expires_at <= $3)
               order by created_at, id limit 1 for update skip locked))
             returning *`,
            [holder, now + leaseMs, now],
          )
        : CompiledQuery.raw(
            `update runs set status = 'RUN_STATUS_RUNNING', lease_holder = ?,
               lease_expires_at = ?, started_at = coalesce(started_at, ?)
             where id in (
               select id from runs where finished_at is null
                 and (lease_holder is null or lease_expires_at <= ?)
               order by created_at, id limit 1)
             returning *`,
            [holder, now + leaseMs, now, now],
          );
    const { rows } = await this.db.executeQuery<Selectable<RunsTable>>(query);
    const row = rows[0];
    if (row === undefined) return undefined;
    const spec = await this.spec(row.id);
    return fromRow(spec === undefined ? row : { ...row, spec });
  }

  async renew(
    id: string,
    holder: string,
    now: number,
    leaseMs: number,
  ): Promise<{ cancelRequested: boolean } | undefined> {
    const row = await this.db
      .updateTable('runs')
      .set({ lease_expires_at: now + leaseMs })
      .where('id', '=', id)
      .where('lease_holder', '=', holder)
      .where('finished_at', 'is', null)
      .returning('cancel_requested')
      .executeTakeFirst();
    return row === undefined ? undefined : { cancelRequested: row.cancel_requested === 1 };
  }

  async release(id: string, holder: string): Promise<void> {
    await this.db
      .updateTable('runs')
      .set({ lease_holder: null, lease_expires_at: null })
      .where('id', '=', id)
      .where('lease_holder', '=', holder)
      .execute();
  }

  async prepare(
    id: string,
    holder: string,
    fields: { total: number; done: number; datasetDigest: string },
  ): Promise<boolean> {
    const result = await this.db
      .updateTable('runs')
      .set({ total: fields.total, done: fields.done, dataset_digest: fields.datasetDigest })
      .where('id', '=', id)
      .where('lease_holder', '=', holder)
      .where('finished_at', 'is', null)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  async record(
    id: string,
    holder: string,
    now: number,
    leaseMs: number,
    progress: RunProgress,
  ): Promise<boolean> {
    // The fence first: it takes the run's row lock, so a deletion, a finish or an adopter waits
    // for this transaction or makes it write nothing.
    const fenced = await this.db
      .updateTable('runs')
      .set((eb) => ({ done: eb('done', '+', progress.done), lease_expires_at: now + leaseMs }))
      .where('id', '=', id)
      .where('lease_holder', '=', holder)
      .where('finished_at', 'is', null)
      .executeTakeFirst();
    if (fenced.numUpdatedRows === 0n) return false;
    for (let i = 0; i < progress.outputs.length; i += CHUNK) {
      const rows = progress.outputs.slice(i, i + CHUNK);
      const values: unknown[] = [];
      for (const o of rows) {
        values.push(id, o.recordIndex, o.trial, o.recordId, o.output ?? null, o.error ?? null);
      }
      await this.db.executeQuery(
        CompiledQuery.raw(this.insertSql('run_outputs', OUTPUT_COLUMNS, rows.length), values),
      );
    }
    for (let i = 0; i < progress.results.length; i += CHUNK) {
      const rows = progress.results.slice(i, i + CHUNK);
      const values: unknown[] = [];
      for (const r of rows) {
        values.push(
          id,
          r.recordIndex,
          r.trial,
          r.result.evaluator,
          r.position,
          r.recordId,
          r.result.outcome,
          JSON.stringify(r.result),
        );
      }
      await this.db.executeQuery(
        CompiledQuery.raw(this.insertSql('run_results', RESULT_COLUMNS, rows.length), values),
      );
    }
    return true;
  }

  async finishedItems(id: string): Promise<{ recordIndex: number; trial: number }[]> {
    const rows = await this.db
      .selectFrom('run_results')
      .select(['record_index', 'trial'])
      .distinct()
      .where('run_id', '=', id)
      .execute();
    return rows.map((r) => ({ recordIndex: Number(r.record_index), trial: Number(r.trial) }));
  }

  async outputs(id: string): Promise<RunOutput[]> {
    const rows = await this.db
      .selectFrom('run_outputs')
      .selectAll()
      .where('run_id', '=', id)
      .orderBy('record_index')
      .orderBy('trial')
      .execute();
    return rows.map((r) => ({
      recordIndex: Number(r.record_index),
      trial: Number(r.trial),
      recordId: r.record_id,
      ...(r.output === null ? {} : { output: r.output }),
      ...(r.error === null ? {} : { error: r.error }),
    }));
  }

  async allResults(id: string): Promise<RunResult[]> {
    const rows = await this.db
      .selectFrom('run_results')
      .select(['record_index', 'trial', 'record_id', 'position', 'result'])
      .where('run_id', '=', id)
      .orderBy('record_index')
      .orderBy('trial')
      .orderBy('position')
      .execute();
    return rows.map((r) => ({
      recordIndex: Number(r.record_index),
      trial: Number(r.trial),
      recordId: r.record_id,
      position: Number(r.position),
      result: JSON.parse(r.result) as Result,
    }));
  }

  async results(id: string, page: PageRequest): Promise<Page<RunItemResults>> {
    const limit = pageLimit(page);
    const after = decodeItemToken(page.pageToken);
    let q = this.db
      .selectFrom('run_results')
      .select(['record_index', 'trial'])
      .distinct()
      .where('run_id', '=', id)
      .orderBy('record_index')
      .orderBy('trial')
      .limit(limit + 1);
    if (after !== undefined) {
      q = q.where((eb) =>
        eb(eb.refTuple('record_index', 'trial'), '>', eb.tuple(after[0], after[1])),
      );
    }
    const keys = (await q.execute()).map((r) => [Number(r.record_index), Number(r.trial)] as const);
    const items = keys.slice(0, limit);
    const first = items[0];
    const last = items.at(-1);
    if (first === undefined || last === undefined) return { items: [] };
    const rows = await this.db
      .selectFrom('run_results')
      .select(['record_index', 'trial', 'record_id', 'position', 'result'])
      .where('run_id', '=', id)
      .where((eb) =>
        eb.and([
          eb(eb.refTuple('record_index', 'trial'), '>=', eb.tuple(first[0], first[1])),
          eb(eb.refTuple('record_index', 'trial'), '<=', eb.tuple(last[0], last[1])),
        ]),
      )
      .orderBy('record_index')
      .orderBy('trial')
      .orderBy('position')
      .execute();
    const outputs = await this.db
      .selectFrom('run_outputs')
      .selectAll()
      .where('run_id', '=', id)
      .where((eb) =>
        eb.and([
          eb(eb.refTuple('record_index', 'trial'), '>=', eb.tuple(first[0], first[1])),
          eb(eb.refTuple('record_index', 'trial'), '<=', eb.tuple(last[0], last[1])),
        ]),
      )
      .execute();
    const key = (recordIndex: number, trial: number) => `${recordIndex}:${trial}`;
    const byKey = new Map<string, RunItemResults>();
    for (const r of rows) {
      const k = key(Number(r.record_index), Number(r.trial));
      let item = byKey.get(k);
      if (item === undefined) {
        item = {
          recordIndex: Number(r.record_index),
          trial: Number(r.trial),
          recordId: r.record_id,
          results: [],
        };
        byKey.set(k, item);
      }
      item.results.push(JSON.parse(r.result) as Result);
    }
    for (const o of outputs) {
      const item = byKey.get(key(Number(o.record_index), Number(o.trial)));
      if (item === undefined) continue;
      if (o.output !== null) item.output = o.output;
      if (o.error !== null) item.error = o.error;
    }
    const out = items.flatMap(([r, t]) => byKey.get(key(r, t)) ?? []);
    if (keys.length <= limit) return { items: out };
    return { items: out, nextPageToken: encodeItemToken(last[0], last[1]) };
  }

  async finish(
    id: string,
    holder: string | undefined,
    now: number,
    finish: RunFinish,
  ): Promise<RunRecord | undefined> {
    let q = this.db
      .updateTable('runs')
      .set({
        status: finish.status,
        summaries: JSON.stringify(finish.summaries),
        gates: JSON.stringify(finish.gates),
        error: finish.error ?? null,
        finished_at: finish.finishedAt,
        lease_holder: null,
        lease_expires_at: null,
      })
      .where('id', '=', id)
      .where('finished_at', 'is', null);
    q =
      holder === undefined
        ? q.where((eb) =>
            eb.or([eb('lease_holder', 'is', null), eb('lease_expires_at', '<=', now)]),
          )
        : q.where('lease_holder', '=', holder);
    const row = await q.returningAll().executeTakeFirst();
    return row === undefined ? undefined : fromRow(row);
  }

  async requestCancel(id: string): Promise<boolean> {
    const result = await this.db
      .updateTable('runs')
      .set({ cancel_requested: 1 })
      .where('id', '=', id)
      .where('finished_at', 'is', null)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  async delete(id: string, now: number): Promise<'deleted' | 'not_found' | 'not_finished'> {
    const deleted = await this.db
      .deleteFrom('runs')
      .where('id', '=', id)
      .where('finished_at', 'is not', null)
      .where((eb) => eb.or([eb('lease_holder', 'is', null), eb('lease_expires_at', '<=', now)]))
      .returning('id')
      .executeTakeFirst();
    if (deleted === undefined) {
      const exists = await this.db
        .selectFrom('runs')
        .select('id')
        .where('id', '=', id)
        .executeTakeFirst();
      return exists === undefined ? 'not_found' : 'not_finished';
    }
    await this.db.deleteFrom('run_specs').where('run_id', '=', id).execute();
    await this.db.deleteFrom('run_results').where('run_id', '=', id).execute();
    await this.db.deleteFrom('run_outputs').where('run_id', '=', id).execute();
    return 'deleted';
  }

  async expired(
    filter: {
      finishedBefore: number;
      projects?: readonly string[];
      exceptProjects?: readonly string[];
    },
    limit: number,
  ): Promise<{ id: string; project: string }[]> {
    if (filter.projects !== undefined && filter.projects.length === 0) return [];
    let q = this.db
      .selectFrom('runs')
      .select(['id', 'project'])
      .where('finished_at', 'is not', null)
      .where('keep', '=', 0)
      .where('finished_at', '<', filter.finishedBefore)
      .orderBy('finished_at')
      .orderBy('id')
      .limit(limit);
    if (filter.projects !== undefined) q = q.where('project', 'in', [...filter.projects]);
    if (filter.exceptProjects !== undefined && filter.exceptProjects.length > 0) {
      q = q.where('project', 'not in', [...filter.exceptProjects]);
    }
    return q.execute();
  }
}
