import { type Kysely, sql } from 'kysely';
import type { Migration } from '../migrate.js';

/**
 * `trace_labels` keyed by (project, key, value, start_ms, trace_id): migration 18's order index
 * becomes the primary key, and the key by trace id (migration 14's) goes. With random trace ids,
 * as OpenTelemetry SDKs make them, that key put each new trace's label entries on a page of their
 * own: an index page written to the WAL per label and trace, inside the transaction that holds
 * SQLite's write lock (one-span traces with one label: 8.7–9.1k → 10.1–10.2k stored and complete
 * per second, docs/performance.md). Entries in start order are appended near the end of their
 * label's range, whatever the ids.
 *
 * Nothing reads a trace's labels by its id from this table any more: a check of one trace against
 * a label reads the trace's own `labels` (store/trace-filters.ts), and the triggers find a trace's
 * entries by its start time, which they keep equal to the trace's (migration 18). The rows are
 * copied with their trace's start time; rows of traces that no longer exist are not.
 */
export const labelKeys: Migration = {
  version: 21,
  name: 'label_keys',
  async up(db, dialect) {
    if (dialect === 'sqlite') await sqliteUp(db);
    else await postgresUp(db);
  },
};

async function sqliteUp(db: Kysely<unknown>): Promise<void> {
  // A table's key cannot change in place on SQLite: copy it (without rowid: the key is the table).
  await sql`create table trace_labels_keyed (
      project text not null, key text not null, value text not null,
      start_ms bigint not null, trace_id text not null,
      constraint trace_labels_pk primary key (project, key, value, start_ms, trace_id)
    ) without rowid`.execute(db);
  await sql`insert or ignore into trace_labels_keyed (project, key, value, start_ms, trace_id)
      select l.project, l.key, l.value, t.start_ms, l.trace_id
      from trace_labels l join traces t on t.project = l.project and t.trace_id = l.trace_id`.execute(
    db,
  );
  for (const name of ['insert', 'update', 'order', 'delete']) {
    await sql`drop trigger if exists ${sql.raw(`trace_labels_${name}`)}`.execute(db);
  }
  await sql`drop table trace_labels`.execute(db);
  await sql`alter table trace_labels_keyed rename to trace_labels`.execute(db);
  // Each trigger names a trace's entries by the start time they were written with (old.start_ms).
  await sql`create trigger trace_labels_insert after insert on traces
    when new.labels <> '{}'
    begin
      insert or ignore into trace_labels (project, key, value, start_ms, trace_id)
        select new.project, key, value, new.start_ms, new.trace_id from json_each(new.labels);
    end`.execute(db);
  await sql`create trigger trace_labels_update after update of labels on traces
    when new.labels is not old.labels
    begin
      delete from trace_labels where (project, key, value, start_ms, trace_id) in
        (select old.project, key, value, old.start_ms, old.trace_id from json_each(old.labels));
      insert or ignore into trace_labels (project, key, value, start_ms, trace_id)
        select new.project, key, value, new.start_ms, new.trace_id from json_each(new.labels);
    end`.execute(db);
  // Labels unchanged, start moved (changed labels were written with the new start above).
  await sql`create trigger trace_labels_order after update of start_ms on traces
    when new.labels <> '{}' and new.labels is old.labels and new.start_ms is not old.start_ms
    begin
      update trace_labels set start_ms = new.start_ms
        where (project, key, value, start_ms, trace_id) in
          (select old.project, key, value, old.start_ms, old.trace_id from json_each(old.labels));
    end`.execute(db);
  await sql`create trigger trace_labels_delete after delete on traces
    when old.labels <> '{}'
    begin
      delete from trace_labels where (project, key, value, start_ms, trace_id) in
        (select old.project, key, value, old.start_ms, old.trace_id from json_each(old.labels));
    end`.execute(db);
}

async function postgresUp(db: Kysely<unknown>): Promise<void> {
  // Every row gets its trace's start time; rows of traces that no longer exist go.
  await sql`delete from trace_labels l where not exists
      (select 1 from traces t where t.project = l.project and t.trace_id = l.trace_id)`.execute(db);
  await sql`update trace_labels l set start_ms = t.start_ms from traces t
      where t.project = l.project and t.trace_id = l.trace_id
        and l.start_ms is distinct from t.start_ms`.execute(db);
  await sql`alter table trace_labels drop constraint trace_labels_pk`.execute(db);
  await sql`drop index trace_labels_start_idx`.execute(db);
  await sql`alter table trace_labels alter column start_ms set not null`.execute(db);
  await sql`alter table trace_labels add constraint trace_labels_pk
      primary key (project, key, value, start_ms, trace_id)`.execute(db);
  // The trigger functions of migrations 14 and 18, naming a trace's entries by their start time.
  await sql`create or replace function trace_labels_sync() returns trigger language plpgsql as $$
    begin
      if tg_op in ('UPDATE', 'DELETE') then
        delete from trace_labels l using jsonb_each_text(old.labels::jsonb) e
          where l.project = old.project and l.key = e.key and l.value = e.value
            and l.start_ms = old.start_ms and l.trace_id = old.trace_id;
      end if;
      if tg_op in ('INSERT', 'UPDATE') then
        insert into trace_labels (project, key, value, start_ms, trace_id)
          select new.project, e.key, e.value, new.start_ms, new.trace_id
          from jsonb_each_text(new.labels::jsonb) e
          on conflict do nothing;
      end if;
      return null;
    end $$`.execute(db);
  await sql`create or replace function trace_labels_order() returns trigger language plpgsql as $$
    begin
      update trace_labels l set start_ms = new.start_ms
        from jsonb_each_text(old.labels::jsonb) e
        where l.project = old.project and l.key = e.key and l.value = e.value
          and l.start_ms = old.start_ms and l.trace_id = old.trace_id;
      return null;
    end $$`.execute(db);
}
