import { type Kysely, sql } from 'kysely';
import type { Migration } from '../migrate.js';

/**
 * Indexes for list filters that match few or no traces: without them the traces and scores lists
 * walked their time index through every trace of the project checking each one (3 s for an
 * evaluator matching nothing at 378k traces). Each lets a filter list its matching traces
 * directly (store/trace-filters.ts decides which one leads):
 * - `trace_labels`: one row per label of a completed trace, kept by triggers on `traces`, so that
 *   every writer of trace rows (completion, a bulk load) keeps it without knowing it exists;
 * - results by policy and evaluator, and by evaluator;
 * - traces by service in start order (the traces list's most used filter), and pulled traces by
 *   source.
 */
export const readIndexes: Migration = {
  version: 14,
  name: 'read_indexes',
  async up(db, dialect) {
    await db.schema
      .createTable('trace_labels')
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('key', 'text', (c) => c.notNull())
      .addColumn('value', 'text', (c) => c.notNull())
      .addColumn('trace_id', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('trace_labels_pk', ['project', 'key', 'value', 'trace_id'])
      // SQLite: the key is the table (no rowid copy of every column).
      .$call((t) => (dialect === 'sqlite' ? t.modifyEnd(sql`without rowid`) : t))
      .execute();
    if (dialect === 'sqlite') await sqliteTriggers(db);
    else await postgresTriggers(db);
    // Traces completed before this migration.
    await sql`insert into trace_labels (project, key, value, trace_id)
      select t.project, l.key, l.value, t.trace_id from traces t, ${
        dialect === 'sqlite' ? sql`json_each(t.labels) l` : sql`jsonb_each_text(t.labels::jsonb) l`
      }
      where t.labels <> '{}'`.execute(db);
    await db.schema
      .createIndex('results_policy_idx')
      .on('results')
      .columns(['project', 'policy', 'evaluator', 'trace_id'])
      .execute();
    await db.schema
      .createIndex('results_evaluator_idx')
      .on('results')
      .columns(['project', 'evaluator', 'trace_id'])
      .execute();
    await db.schema
      .createIndex('traces_project_service_start_idx')
      .on('traces')
      .columns(['project', 'service', 'start_ms', 'trace_id'])
      .execute();
    // Pulled traces only: OTLP's (source '') are most traces, and their ingest pays no entry.
    await db.schema
      .createIndex('traces_project_source_idx')
      .on('traces')
      .columns(['project', 'source', 'trace_id'])
      .where(sql.ref('source'), '<>', '')
      .execute();
  },
};

/** Labels are written when they change (completion), not when spans arrive. */
async function sqliteTriggers(db: Kysely<unknown>): Promise<void> {
  await sql`create trigger trace_labels_insert after insert on traces
    when new.labels <> '{}'
    begin
      insert or ignore into trace_labels (project, key, value, trace_id)
        select new.project, key, value, new.trace_id from json_each(new.labels);
    end`.execute(db);
  await sql`create trigger trace_labels_update after update of labels on traces
    when new.labels is not old.labels
    begin
      delete from trace_labels where (project, key, value, trace_id) in
        (select old.project, key, value, old.trace_id from json_each(old.labels));
      insert or ignore into trace_labels (project, key, value, trace_id)
        select new.project, key, value, new.trace_id from json_each(new.labels);
    end`.execute(db);
  await sql`create trigger trace_labels_delete after delete on traces
    when old.labels <> '{}'
    begin
      delete from trace_labels where (project, key, value, trace_id) in
        (select old.project, key, value, old.trace_id from json_each(old.labels));
    end`.execute(db);
}

async function postgresTriggers(db: Kysely<unknown>): Promise<void> {
  // Unqualified names resolve on the connection's search_path, as the store's own queries do.
  await sql`create function trace_labels_sync() returns trigger language plpgsql as $$
    begin
      if tg_op in ('UPDATE', 'DELETE') then
        delete from trace_labels l using jsonb_each_text(old.labels::jsonb) e
          where l.project = old.project and l.key = e.key and l.value = e.value
            and l.trace_id = old.trace_id;
      end if;
      if tg_op in ('INSERT', 'UPDATE') then
        insert into trace_labels (project, key, value, trace_id)
          select new.project, e.key, e.value, new.trace_id from jsonb_each_text(new.labels::jsonb) e
          on conflict do nothing;
      end if;
      return null;
    end $$`.execute(db);
  await sql`create trigger trace_labels_insert after insert on traces
    for each row when (new.labels <> '{}') execute function trace_labels_sync()`.execute(db);
  await sql`create trigger trace_labels_update after update of labels on traces
    for each row when (new.labels is distinct from old.labels)
    execute function trace_labels_sync()`.execute(db);
  await sql`create trigger trace_labels_delete after delete on traces
    for each row when (old.labels <> '{}') execute function trace_labels_sync()`.execute(db);
}
