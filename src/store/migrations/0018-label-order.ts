import { type Kysely, sql } from 'kysely';
import type { Migration } from '../migrate.js';

/**
 * Each `trace_labels` row carries its trace's start time (`start_ms`, the traces list's order),
 * indexed after the label: the traces list filtered by a label reads that label's traces in its
 * order, a page an index range of about a page of entries whatever share of the project the
 * label matches (store/trace-filters.ts `planLead`). Before, a label matching more than LEAD_MAX
 * traces walked the list's order index checking each trace: ~5,000 traces per page for a label
 * pair matching 1% of a project.
 *
 * The triggers of migration 14 are replaced to write the column, and one more keeps it when a
 * trace's start moves (completion again). The scores list's order (`scored_at`) is not kept so:
 * it moves with every score, and rewriting a trace's label rows then cut online scoring on
 * PostgreSQL from 895 to 304 traces/s (docs/performance.md, "Reads at scale").
 */
export const labelOrder: Migration = {
  version: 18,
  name: 'label_order',
  async up(db, dialect) {
    await db.schema.alterTable('trace_labels').addColumn('start_ms', 'bigint').execute();
    if (dialect === 'sqlite') await sqliteTriggers(db);
    else await postgresTriggers(db);
    // Labels written before this migration.
    await sql`update trace_labels set start_ms = t.start_ms
      from traces t where t.project = trace_labels.project and t.trace_id = trace_labels.trace_id`.execute(
      db,
    );
    await db.schema
      .createIndex('trace_labels_start_idx')
      .on('trace_labels')
      .columns(['project', 'key', 'value', 'start_ms', 'trace_id'])
      .execute();
  },
};

async function sqliteTriggers(db: Kysely<unknown>): Promise<void> {
  await sql`drop trigger trace_labels_insert`.execute(db);
  await sql`drop trigger trace_labels_update`.execute(db);
  await sql`create trigger trace_labels_insert after insert on traces
    when new.labels <> '{}'
    begin
      insert or ignore into trace_labels (project, key, value, trace_id, start_ms)
        select new.project, key, value, new.trace_id, new.start_ms
        from json_each(new.labels);
    end`.execute(db);
  await sql`create trigger trace_labels_update after update of labels on traces
    when new.labels is not old.labels
    begin
      delete from trace_labels where (project, key, value, trace_id) in
        (select old.project, key, value, old.trace_id from json_each(old.labels));
      insert or ignore into trace_labels (project, key, value, trace_id, start_ms)
        select new.project, key, value, new.trace_id, new.start_ms
        from json_each(new.labels);
    end`.execute(db);
  // Labels unchanged, start moved (changed labels were written with the new start above).
  await sql`create trigger trace_labels_order after update of start_ms on traces
    when new.labels <> '{}' and new.labels is old.labels and new.start_ms is not old.start_ms
    begin
      update trace_labels set start_ms = new.start_ms
        where (project, key, value, trace_id) in
          (select new.project, key, value, new.trace_id from json_each(new.labels));
    end`.execute(db);
}

async function postgresTriggers(db: Kysely<unknown>): Promise<void> {
  await sql`create or replace function trace_labels_sync() returns trigger language plpgsql as $$
    begin
      if tg_op in ('UPDATE', 'DELETE') then
        delete from trace_labels l using jsonb_each_text(old.labels::jsonb) e
          where l.project = old.project and l.key = e.key and l.value = e.value
            and l.trace_id = old.trace_id;
      end if;
      if tg_op in ('INSERT', 'UPDATE') then
        insert into trace_labels (project, key, value, trace_id, start_ms)
          select new.project, e.key, e.value, new.trace_id, new.start_ms
          from jsonb_each_text(new.labels::jsonb) e
          on conflict do nothing;
      end if;
      return null;
    end $$`.execute(db);
  await sql`create function trace_labels_order() returns trigger language plpgsql as $$
    begin
      update trace_labels l set start_ms = new.start_ms
        from jsonb_each_text(new.labels::jsonb) e
        where l.project = new.project and l.key = e.key and l.value = e.value
          and l.trace_id = new.trace_id;
      return null;
    end $$`.execute(db);
  // Labels unchanged, start moved (changed labels were written with the new start by
  // trace_labels_sync).
  await sql`create trigger trace_labels_order after update of start_ms on traces
    for each row when (new.labels <> '{}' and new.labels is not distinct from old.labels
      and new.start_ms is distinct from old.start_ms)
    execute function trace_labels_order()`.execute(db);
}
