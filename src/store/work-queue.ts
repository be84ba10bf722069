import { randomBytes } from 'node:crypto';
import { CompiledQuery, type Kysely, type Selectable } from 'kysely';
import { batches, placeholders, valuesOf } from './batches.js';
import type { NewWorkItem, StoreDialect, WorkItem, WorkQueue } from './ports.js';
import type { Database, WorkItemsTable } from './schema.js';

/** Rows per multi-row INSERT (SQLite binds at most 32766 parameters per statement). */
const CHUNK = 500;

/** The columns `enqueue` writes, in its rows' order. */
const ITEM_COLUMNS = [
  'id',
  'project',
  'trace_id',
  'digest',
  'policy',
  'replace',
  'trace_completed_at',
  'created_at',
  'visible_at',
  'attempts',
  'claim',
] as const;

/**
 * `enqueue`'s VALUES for `rows` items: each item's columns, then its trace's `first_seen_at` read
 * by (project, trace id), 0 when the trace has no row.
 */
function itemValues(dialect: StoreDialect, rows: number): string {
  return valuesOf(
    dialect,
    rows,
    'work item',
    (p) =>
      `(${ITEM_COLUMNS.map(p).join(', ')}, coalesce((select first_seen_at from traces where project = ${p()} and trace_id = ${p()}), 0))`,
  );
}

function fromRow(row: Selectable<WorkItemsTable>): WorkItem {
  return {
    id: row.id,
    project: row.project,
    traceId: row.trace_id,
    digest: row.digest,
    policy: row.policy,
    replace: row.replace === 1,
    traceCompletedAt: row.trace_completed_at,
    attempts: row.attempts,
    claim: row.claim,
    createdAt: row.created_at,
  };
}

export class KyselyWorkQueue implements WorkQueue {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: StoreDialect,
  ) {}

  async enqueue(items: readonly NewWorkItem[], now: number): Promise<number> {
    // Ids break ties between items visible at the same time: time, then one random draw per
    // call, then the position in the call, so a call's items are claimed in the order given.
    const prefix = `wi_${Math.max(0, now).toString(16).padStart(12, '0')}${randomBytes(8).toString('hex')}`;
    // The key's second column: the trace's `first_seen_at` as given, else read from its row.
    const known = items.every((item) => item.traceFirstSeenAt !== undefined);
    const rows = items.map((item, i) => [
      `${prefix}${i.toString(16).padStart(6, '0')}`,
      item.project,
      item.traceId,
      item.digest,
      item.policy,
      item.replace ? 1 : 0,
      item.traceCompletedAt,
      now,
      now,
      0,
      '',
      ...(known ? [item.traceFirstSeenAt] : [item.project, item.traceId]),
    ]);
    // Built as text, not by the query builder: a request of 500 whole traces enqueues 500 items,
    // and SQLite then compiles one statement per group size (batches) instead of a 500-row one
    // per call, too long for the statement cache.
    const values = known
      ? (n: number) => placeholders(this.dialect, n, ITEM_COLUMNS.length + 1)
      : (n: number) => itemValues(this.dialect, n);
    let added = 0;
    for (const part of batches(this.dialect, rows, CHUNK)) {
      const inserted = await this.db.executeQuery<{ id: string }>(
        CompiledQuery.raw(
          `insert into work_items (${ITEM_COLUMNS.join(', ')}, trace_first_seen_at) values ${values(part.length)}
           on conflict (project, trace_first_seen_at, trace_id, digest, policy) do nothing returning id`,
          part.flat(),
        ),
      );
      added += inserted.rows.length;
    }
    return added;
  }

  async claim(now: number, limit: number, hideUntil: number, claim: string): Promise<WorkItem[]> {
    if (limit <= 0) return [];
    // PostgreSQL: the candidates are locked and skipped by concurrent claimers, and `= any(array(
    // subquery))` makes the subquery an InitPlan, run exactly once; `in (subquery)` leaves the
    // planner free to rescan it, which could lock and claim more than `limit` rows. SQLite
    // serializes writers, so the plain form is already one atomic claim.
    const query =
      this.dialect === 'postgres'
        ? CompiledQuery.raw(
            `update work_items set visible_at = $1, attempts = attempts + 1, claim = $2
             where id = any(array(
               select id from work_items where visible_at <= $3
               order by visible_at, id limit $4 for update skip locked))
             returning *`,
            [hideUntil, claim, now, limit],
          )
        : CompiledQuery.raw(
            `update work_items set visible_at = ?, attempts = attempts + 1, claim = ?
             where id in (
               select id from work_items where visible_at <= ? order by visible_at, id limit ?)
             returning *`,
            [hideUntil, claim, now, limit],
          );
    const { rows } = await this.db.executeQuery<Selectable<WorkItemsTable>>(query);
    return rows
      .map(fromRow)
      .sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async complete(id: string, claim: string): Promise<boolean> {
    // '' is the token of an item never claimed; it must not be able to complete one.
    if (claim === '') return false;
    const result = await this.db
      .deleteFrom('work_items')
      .where('id', '=', id)
      .where('claim', '=', claim)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }

  async postpone(id: string, claim: string, visibleAt: number): Promise<boolean> {
    if (claim === '') return false;
    const result = await this.db
      .updateTable('work_items')
      .set({ visible_at: visibleAt })
      .where('id', '=', id)
      .where('claim', '=', claim)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  async holding(items: readonly { id: string; claim: string }[]): Promise<Set<string>> {
    const held = new Set<string>();
    // Only rows still ours are locked (an item another replica claimed since is not waited on),
    // in id order, so two batches never lock rows in opposite orders.
    const claimed = items
      .filter((i) => i.claim !== '')
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    for (let i = 0; i < claimed.length; i += CHUNK) {
      const part = claimed.slice(i, i + CHUNK);
      let q = this.db
        .selectFrom('work_items')
        .select('id')
        .where((eb) =>
          eb(
            eb.refTuple('id', 'claim'),
            'in',
            part.map((p) => eb.tuple(p.id, p.claim)),
          ),
        )
        .orderBy('id');
      if (this.dialect === 'postgres') q = q.forUpdate();
      for (const row of await q.execute()) held.add(row.id);
    }
    return held;
  }

  async completeAll(items: readonly { id: string; claim: string }[]): Promise<Set<string>> {
    const done = new Set<string>();
    const claimed = items.filter((i) => i.claim !== '');
    for (let i = 0; i < claimed.length; i += CHUNK) {
      const part = claimed.slice(i, i + CHUNK);
      const rows = await this.db
        .deleteFrom('work_items')
        .where((eb) =>
          eb(
            eb.refTuple('id', 'claim'),
            'in',
            part.map((p) => eb.tuple(p.id, p.claim)),
          ),
        )
        .returning('id')
        .execute();
      for (const r of rows) done.add(r.id);
    }
    return done;
  }

  async stats(): Promise<{ depth: number; oldestCreatedAt?: number }> {
    const row = await this.db
      .selectFrom('work_items')
      .select((eb) => [
        eb.fn.countAll<number | string>().as('n'),
        eb.fn.min<number | null>('created_at').as('oldest'),
      ])
      .executeTakeFirst();
    const depth = Number(row?.n ?? 0);
    const oldest = row?.oldest;
    return oldest === null || oldest === undefined || depth === 0
      ? { depth }
      : { depth, oldestCreatedAt: Number(oldest) };
  }
}
