import { randomBytes } from 'node:crypto';
import { CompiledQuery, type Kysely, type Selectable } from 'kysely';
import { CoreErrors } from '../core/index.js';
import { toIso } from './columns.js';
import type {
  DeadLetter,
  LedgerEntry,
  NewWriteBack,
  Page,
  PageRequest,
  SourceRecord,
  SourceState,
  SourceStore,
  SourceTrace,
  StoreDialect,
  WriteBack,
} from './ports.js';
import { ResourceTable, upsertDocument } from './resource-table.js';
import type {
  Database,
  SourceStatesTable,
  SourcesTable,
  SourceTracesTable,
  WriteBackDeadLettersTable,
  WriteBacksTable,
} from './schema.js';

/**
 * Rows (or ids) per statement: SQLite binds at most 32766 parameters per statement, PostgreSQL
 * 65535; 500 rows of the widest table (13 columns) stay well below both.
 */
const CHUNK = 500;

function chunks<T>(items: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += CHUNK) out.push(items.slice(i, i + CHUNK));
  return out;
}

function fromRow(row: Selectable<SourcesTable>): SourceRecord {
  return {
    project: row.project,
    name: row.name,
    resource: JSON.parse(row.resource) as Record<string, unknown>,
    generation: row.generation,
    paused: row.paused === 1,
    createdAt: toIso(row.created_at),
    updatedAt: toIso(row.updated_at),
  };
}

/** The part of SourceState kept as JSON: everything but its key and the counter columns. */
type StateJson = Omit<
  SourceState,
  'project' | 'name' | 'pulled' | 'scored' | 'lastWriteBackAt' | 'deadLetters'
>;

function stateJson(state: SourceState): string {
  const json: StateJson = {
    watermark: state.watermark,
    backfillUntil: state.backfillUntil,
    phase: state.phase,
    nextPullAt: state.nextPullAt,
    failures: state.failures,
    recordsPerSecond: state.recordsPerSecond,
  };
  if (state.lastError !== undefined) json.lastError = state.lastError;
  if (state.lastCompleteStartAt !== undefined) {
    json.lastCompleteStartAt = state.lastCompleteStartAt;
  }
  if (state.lastPullAt !== undefined) json.lastPullAt = state.lastPullAt;
  if (state.schedule !== undefined) json.schedule = state.schedule;
  return JSON.stringify(json);
}

function stateFromRow(row: Selectable<SourceStatesTable>): SourceState {
  const json = JSON.parse(row.state) as StateJson;
  const state: SourceState = {
    project: row.project,
    name: row.name,
    watermark: json.watermark,
    backfillUntil: json.backfillUntil,
    phase: json.phase,
    nextPullAt: json.nextPullAt,
    failures: json.failures,
    pulled: Number(row.pulled),
    scored: Number(row.scored),
    recordsPerSecond: json.recordsPerSecond,
    deadLetters: Number(row.dead_letters),
  };
  if (json.lastError !== undefined) state.lastError = json.lastError;
  if (json.lastCompleteStartAt !== undefined) state.lastCompleteStartAt = json.lastCompleteStartAt;
  if (json.lastPullAt !== undefined) state.lastPullAt = json.lastPullAt;
  if (json.schedule !== undefined) state.schedule = json.schedule;
  if (row.last_write_back_at !== null) state.lastWriteBackAt = Number(row.last_write_back_at);
  return state;
}

function traceFromRow(row: Selectable<SourceTracesTable>): SourceTrace {
  const trace: SourceTrace = {
    project: row.project,
    source: row.source,
    storeId: row.store_id,
    traceId: row.trace_id,
    startMs: Number(row.start_ms),
    version: row.version,
  };
  if (row.deferred_since !== null) trace.deferredSince = Number(row.deferred_since);
  return trace;
}

function deadLetterFromRow(row: Selectable<WriteBackDeadLettersTable>): DeadLetter {
  return {
    id: row.id,
    project: row.project,
    source: row.source,
    traceId: row.trace_id,
    policy: row.policy,
    metric: row.metric,
    attempts: row.attempts,
    code: row.code,
    message: row.message,
    failedAt: Number(row.failed_at),
  };
}

function writeBackFromRow(row: Selectable<WriteBacksTable>): WriteBack {
  return {
    id: row.id,
    project: row.project,
    source: row.source,
    storeId: row.store_id,
    traceId: row.trace_id,
    policy: row.policy,
    metric: row.metric,
    score: row.score,
    judge: row.judge === 1,
    createdAt: Number(row.created_at),
    attempts: row.attempts,
    claim: row.claim,
  };
}

export class KyselySourceStore implements SourceStore {
  private readonly table: ResourceTable<'sources', SourceRecord>;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: StoreDialect,
  ) {
    this.table = new ResourceTable(db, 'sources', fromRow, true);
  }

  // --- Sources -------------------------------------------------------------------------------

  async upsert(
    project: string,
    name: string,
    resource: Record<string, unknown>,
    now: number,
  ): Promise<{ source: SourceRecord; created: boolean }> {
    const { row, created } = await upsertDocument(
      this.db,
      'sources',
      { project, name },
      resource,
      now,
      { paused: 0 },
    );
    // A new source starts from scratch: drop a pull state left by a deleted namesake (one a
    // lease holder saved while the source was being deleted).
    if (created) await this.deleteState(project, name);
    return { source: fromRow(row), created };
  }

  get(project: string, name: string): Promise<SourceRecord | undefined> {
    return this.table.get(project, name);
  }

  list(project: string | undefined, page: PageRequest): Promise<Page<SourceRecord>> {
    return this.table.list(project, page);
  }

  listAll(): Promise<SourceRecord[]> {
    return this.table.all();
  }

  async delete(project: string, name: string): Promise<boolean> {
    if (!(await this.table.delete(project, name))) return false;
    // The pull state (counters included) belongs to the source; its traces, queued write-backs
    // and ledger stay (a source created again under this name skips and dedupes with them).
    await this.deleteState(project, name);
    return true;
  }

  async setPaused(project: string, name: string, paused: boolean, now: number): Promise<boolean> {
    const flag = paused ? 1 : 0;
    const result = await this.db
      .updateTable('sources')
      .set((eb) => ({
        paused: flag,
        // Only a change moves updatedAt (pausing a paused source changes nothing).
        updated_at: eb.case().when('paused', '=', flag).then(eb.ref('updated_at')).else(now).end(),
      }))
      .where('project', '=', project)
      .where('name', '=', name)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  // --- Pull state ----------------------------------------------------------------------------

  /** The pull state (counters included) and the dead letters: what belongs to the source. */
  private async deleteState(project: string, name: string): Promise<void> {
    await this.db
      .deleteFrom('source_states')
      .where('project', '=', project)
      .where('name', '=', name)
      .execute();
    await this.db
      .deleteFrom('write_back_dead_letters')
      .where('project', '=', project)
      .where('source', '=', name)
      .execute();
  }

  async getState(project: string, name: string): Promise<SourceState | undefined> {
    const row = await this.db
      .selectFrom('source_states')
      .selectAll()
      .where('project', '=', project)
      .where('name', '=', name)
      .executeTakeFirst();
    return row === undefined ? undefined : stateFromRow(row);
  }

  async saveState(state: SourceState): Promise<void> {
    // The first save seeds the counters from `state`; later ones replace the JSON only, so
    // increments by other writers (`count`) are never lost.
    await this.db
      .insertInto('source_states')
      .values({
        project: state.project,
        name: state.name,
        state: stateJson(state),
        pulled: state.pulled,
        scored: state.scored,
        last_write_back_at: state.lastWriteBackAt ?? null,
        dead_letters: state.deadLetters,
      })
      .onConflict((oc) =>
        oc.columns(['project', 'name']).doUpdateSet((eb) => ({ state: eb.ref('excluded.state') })),
      )
      .execute();
  }

  async count(
    project: string,
    name: string,
    field: 'pulled' | 'scored',
    n: number,
    at: number,
  ): Promise<void> {
    if (!Number.isSafeInteger(n) || n < 0) {
      throw CoreErrors.INVALID_ARGUMENT('a source counter grows by a non-negative integer');
    }
    if (n === 0) return;
    // One UPDATE: atomic on both dialects, and a no-op before the first saveState.
    await this.db
      .updateTable('source_states')
      .set((eb) =>
        field === 'pulled'
          ? { pulled: eb('pulled', '+', n) }
          : {
              scored: eb('scored', '+', n),
              // Only moves forward: writers finishing out of order keep the latest time.
              last_write_back_at: eb
                .case()
                .when(
                  eb.or([eb('last_write_back_at', 'is', null), eb('last_write_back_at', '<', at)]),
                )
                .then(at)
                .else(eb.ref('last_write_back_at'))
                .end(),
            },
      )
      .where('project', '=', project)
      .where('name', '=', name)
      .execute();
  }

  // --- Traces of a source's store ------------------------------------------------------------

  async traces(
    project: string,
    source: string,
    storeIds: readonly string[],
  ): Promise<SourceTrace[]> {
    const wanted = [...new Set(storeIds)];
    const found = new Map<string, SourceTrace>();
    for (const ids of chunks(wanted)) {
      const rows = await this.db
        .selectFrom('source_traces')
        .selectAll()
        .where('project', '=', project)
        .where('source', '=', source)
        .where('store_id', 'in', ids)
        .execute();
      for (const row of rows) found.set(row.store_id, traceFromRow(row));
    }
    // In the order asked, each once.
    return wanted.flatMap((id) => {
      const trace = found.get(id);
      return trace === undefined ? [] : [trace];
    });
  }

  async saveTraces(traces: readonly SourceTrace[]): Promise<void> {
    // One row per key, the last given winning: PostgreSQL refuses to update a row twice in one
    // INSERT … ON CONFLICT.
    const byKey = new Map<string, Selectable<SourceTracesTable>>();
    for (const t of traces) {
      byKey.set(`${t.project}\u0000${t.source}\u0000${t.storeId}`, {
        project: t.project,
        source: t.source,
        store_id: t.storeId,
        trace_id: t.traceId,
        start_ms: t.startMs,
        version: t.version,
        deferred_since: t.deferredSince ?? null,
      });
    }
    for (const rows of chunks([...byKey.values()])) {
      await this.db
        .insertInto('source_traces')
        .values(rows)
        .onConflict((oc) =>
          oc.columns(['project', 'source', 'store_id']).doUpdateSet((eb) => ({
            trace_id: eb.ref('excluded.trace_id'),
            start_ms: eb.ref('excluded.start_ms'),
            version: eb.ref('excluded.version'),
            deferred_since: eb.ref('excluded.deferred_since'),
          })),
        )
        .execute();
    }
  }

  async storeIdOf(project: string, source: string, traceId: string): Promise<string | undefined> {
    // One store trace per Touchstone trace; should two rows ever share one, the answer is stable.
    const row = await this.db
      .selectFrom('source_traces')
      .select('store_id')
      .where('project', '=', project)
      .where('source', '=', source)
      .where('trace_id', '=', traceId)
      .orderBy('store_id')
      .limit(1)
      .executeTakeFirst();
    return row?.store_id;
  }

  async traceIdOf(project: string, storeId: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('source_traces')
      .select('trace_id')
      .where('project', '=', project)
      .where('store_id', '=', storeId)
      .orderBy('source')
      .limit(1)
      .executeTakeFirst();
    return row?.trace_id;
  }

  async deferred(project: string, source: string, limit: number): Promise<SourceTrace[]> {
    if (limit <= 0) return [];
    const rows = await this.db
      .selectFrom('source_traces')
      .selectAll()
      .where('project', '=', project)
      .where('source', '=', source)
      .where('deferred_since', 'is not', null)
      .orderBy('deferred_since')
      .orderBy('store_id')
      .limit(limit)
      .execute();
    return rows.map(traceFromRow);
  }

  // --- Write-back queue ----------------------------------------------------------------------

  async enqueueWriteBacks(items: readonly NewWriteBack[], now: number): Promise<void> {
    // Ids as work-queue.ts: time, one random draw per call, then the position in the call, so
    // ids sort in enqueue order and break ties between write-backs visible at the same time.
    const prefix = `wb_${Math.max(0, now).toString(16).padStart(12, '0')}${randomBytes(8).toString('hex')}`;
    const rows = items.map((item, i) => ({
      id: `${prefix}${i.toString(16).padStart(6, '0')}`,
      project: item.project,
      source: item.source,
      store_id: item.storeId,
      trace_id: item.traceId,
      policy: item.policy,
      metric: item.metric,
      score: item.score,
      judge: item.judge ? 1 : 0,
      created_at: item.createdAt,
      visible_at: now,
      attempts: 0,
      claim: '',
    }));
    for (const chunk of chunks(rows)) {
      await this.db.insertInto('write_backs').values(chunk).execute();
    }
  }

  async claimWriteBacks(
    now: number,
    limit: number,
    hideUntil: number,
    claim: string,
  ): Promise<WriteBack[]> {
    if (limit <= 0) return [];
    // As work-queue.ts: on PostgreSQL the candidates are locked and skipped by concurrent
    // claimers, and `= any(array(subquery))` runs the subquery exactly once (an InitPlan), so
    // one claim never takes more than `limit`. SQLite serializes writers.
    const query =
      this.dialect === 'postgres'
        ? CompiledQuery.raw(
            `update write_backs set visible_at = $1, attempts = attempts + 1, claim = $2
             where id = any(array(
               select id from write_backs where visible_at <= $3
               order by visible_at, id limit $4 for update skip locked))
             returning *`,
            [hideUntil, claim, now, limit],
          )
        : CompiledQuery.raw(
            `update write_backs set visible_at = ?, attempts = attempts + 1, claim = ?
             where id in (
               select id from write_backs where visible_at <= ? order by visible_at, id limit ?)
             returning *`,
            [hideUntil, claim, now, limit],
          );
    const { rows } = await this.db.executeQuery<Selectable<WriteBacksTable>>(query);
    return rows
      .map(writeBackFromRow)
      .sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async finishWriteBack(id: string, claim: string): Promise<boolean> {
    // '' is the token of a write-back never claimed; it must not be able to finish one.
    if (claim === '') return false;
    const result = await this.db
      .deleteFrom('write_backs')
      .where('id', '=', id)
      .where('claim', '=', claim)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }

  async retryWriteBack(id: string, claim: string, visibleAt: number): Promise<boolean> {
    if (claim === '') return false;
    const result = await this.db
      .updateTable('write_backs')
      .set({ visible_at: visibleAt })
      .where('id', '=', id)
      .where('claim', '=', claim)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  async deadLetterWriteBack(
    row: WriteBack,
    failure: { code: string; message: string; at: number },
    keep: number,
  ): Promise<boolean> {
    if (row.claim === '') return false;
    const taken = await this.db
      .deleteFrom('write_backs')
      .where('id', '=', row.id)
      .where('claim', '=', row.claim)
      .returningAll()
      .executeTakeFirst();
    if (taken === undefined) return false;
    await this.db
      .insertInto('write_back_dead_letters')
      .values({
        id: taken.id,
        project: taken.project,
        source: taken.source,
        trace_id: taken.trace_id,
        policy: taken.policy,
        metric: taken.metric,
        attempts: taken.attempts,
        code: failure.code,
        message: failure.message,
        failed_at: failure.at,
      })
      // A write-back dead-lettered again after a crash between the two statements is one letter.
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
    await this.db
      .updateTable('source_states')
      .set((eb) => ({ dead_letters: eb('dead_letters', '+', 1) }))
      .where('project', '=', taken.project)
      .where('name', '=', taken.source)
      .execute();
    // Older letters beyond `keep` go: the newest kept one is the boundary.
    const boundary = await this.db
      .selectFrom('write_back_dead_letters')
      .select(['failed_at', 'id'])
      .where('project', '=', taken.project)
      .where('source', '=', taken.source)
      .orderBy('failed_at', 'desc')
      .orderBy('id', 'desc')
      .offset(Math.max(0, keep - 1))
      .limit(1)
      .executeTakeFirst();
    if (boundary !== undefined) {
      await this.db
        .deleteFrom('write_back_dead_letters')
        .where('project', '=', taken.project)
        .where('source', '=', taken.source)
        .where((eb) =>
          eb(
            eb.refTuple('failed_at', 'id'),
            '<',
            eb.tuple(Number(boundary.failed_at), boundary.id),
          ),
        )
        .execute();
    }
    return true;
  }

  async deadLetters(project: string, source: string, limit: number): Promise<DeadLetter[]> {
    if (limit <= 0) return [];
    const rows = await this.db
      .selectFrom('write_back_dead_letters')
      .selectAll()
      .where('project', '=', project)
      .where('source', '=', source)
      .orderBy('failed_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.map(deadLetterFromRow);
  }

  // --- Ledger --------------------------------------------------------------------------------

  async ledger(
    project: string,
    source: string,
    traceId: string,
    policy: string,
    metric: string,
  ): Promise<LedgerEntry | undefined> {
    const row = await this.db
      .selectFrom('write_back_ledger')
      .selectAll()
      .where('project', '=', project)
      .where('source', '=', source)
      .where('trace_id', '=', traceId)
      .where('policy', '=', policy)
      .where('metric', '=', metric)
      .executeTakeFirst();
    if (row === undefined) return undefined;
    return {
      project: row.project,
      source: row.source,
      traceId: row.trace_id,
      policy: row.policy,
      metric: row.metric,
      remoteId: row.remote_id,
      valueDigest: row.value_digest,
    };
  }

  async saveLedger(entry: LedgerEntry): Promise<void> {
    await this.db
      .insertInto('write_back_ledger')
      .values({
        project: entry.project,
        source: entry.source,
        trace_id: entry.traceId,
        policy: entry.policy,
        metric: entry.metric,
        remote_id: entry.remoteId,
        value_digest: entry.valueDigest,
      })
      .onConflict((oc) =>
        oc.columns(['project', 'source', 'trace_id', 'policy', 'metric']).doUpdateSet((eb) => ({
          remote_id: eb.ref('excluded.remote_id'),
          value_digest: eb.ref('excluded.value_digest'),
        })),
      )
      .execute();
  }
}
