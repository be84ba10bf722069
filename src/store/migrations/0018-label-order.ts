import { type Kysely, sql } from 'kysely';
import type { Migration } from '../migrate.js';

/**
 * Each `trace_labels` row carries its trace's list order (`start_ms` for the traces list,
 * `scored_at` for the scores list), indexed after the label: a list filtered by a label reads
 * that label's traces in the list's order, a page an index range of about a page of entries
 * whatever share of the project the label matches (store/trace-filters.ts `planLead`). Before,
 * a label matching more than LEAD_MAX traces walked the list's order index checking each trace:
 * ~5,000 traces per page for a label pair matching 1% of a project.
 *
 * The triggers of migration 14 are replaced to write the two columns, and one more keeps them
 * when a trace's start or score time moves (completion again, a newer score).
 */
export const labelOrder: Migration = {
  version: 18,
  name: 'label_order',
  async up(db, dialect) {
    await db.schema.alterTable('trace_labels').addColumn('start_ms', 'bigint').execute();
    await db.schema.alterTable('trace_labels').addColumn('scored_at', 'bigint').execute();
    if (dialect === 'sqlite') await sqliteTriggers(db);
    else await postgresTriggers(db);
    // Labels written before this migration.
    await sql`update trace_labels set start_ms = t.start_ms, scored_at = t.scored_at
      from traces t where t.project = trace_labels.project and t.trace_id = trace_labels.trace_id`.execute(
      db,
    );
    await db.schema
      .createIndex('trace_labels_start_idx')
      .on('trace_labels')
      .columns(['project', 'key', 'value', 'start_ms', 'trace_id'])
      .execute();
    await db.schema
      .createIndex('trace_labels_scored_idx')
      .on('trace_labels')
      .columns(['project', 'key', 'value', 'scored_at', 'trace_id'])
      .execute();
  },
};

async function sqliteTriggers(db: Kysely<unknown>): Promise<void> {
  await sql`drop trigger trace_labels_insert`.execute(db);
  await sql`drop trigger trace_labels_update`.execute(db);
  await sql`create trigger trace_labels_insert after insert on traces
    when new.labels <> '{}'
    begin
      insert or ignore into trace_labels (project, key, value, trace_id, start_ms, scored_at)
        select new.project, key, value, new.trace_id, new.start_ms, new.scored_at
        from json_each(new.labels);
    end`.execute(db);
  await sql`create trigger trace_labels_update after update of labels on traces
    when new.labels is not old.labels
    begin
      delete from trace_labels where (project, key, value, trace_id) in
        (select old.project, key, value, old.trace_id from json_each(old.labels));
      insert or ignore into trace_labels (project, key, value, trace_id, start_ms, scored_at)
        select new.project, key, value, new.trace_id, new.start_ms, new.scored_at
        from json_each(new.labels);
    end`.execute(db);
  // Labels unchanged, order moved (changed labels were written with the new order above).
  await sql`create trigger trace_labels_order after update of start_ms, scored_at on traces
    when new.labels <> '{}' and new.labels is old.labels
      and (new.start_ms is not old.start_ms or new.scored_at is not old.scored_at)
    begin
      update trace_labels set start_ms = new.start_ms, scored_at = new.scored_at
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
        insert into trace_labels (project, key, value, trace_id, start_ms, scored_at)
          select new.project, e.key, e.value, new.trace_id, new.start_ms, new.scored_at
          from jsonb_each_text(new.labels::jsonb) e
          on conflict do nothing;
      end if;
      return null;
    end $$`.execute(db);
  await sql`create function trace_labels_order() returns trigger language plpgsql as $$
    begin
      update trace_labels l set start_ms = new.start_ms, scored_at = new.scored_at
        from jsonb_each_text(new.labels::jsonb) e
        where l.project = new.project and l.key = e.key and l.value = e.value
          and l.trace_id = new.trace_id;
      return null;
    end $$`.execute(db);
  // Labels unchanged, order moved (changed labels were written with the new order by
  // trace_labels_sync).
  await sql`create trigger trace_labels_order after update of start_ms, scored_at on traces
    for each row when (new.labels <> '{}' and new.labels is not distinct from old.labels
      and (new.start_ms is distinct from old.start_ms or new.scored_at is distinct from old.scored_at))
    execute function trace_labels_order()`.execute(db);
}
