import { sql } from 'kysely';
import type { Migration } from '../migrate.js';

/**
 * The work queue's unique key, one item per (project, trace, digest, policy), leads with the
 * trace's `first_seen_at` after the project: (project, trace_first_seen_at, trace_id, digest,
 * policy). A trace's `first_seen_at` is set when its row is inserted and never changes, so the key
 * allows the same items as before; but a key led by the trace id put each new item at a random
 * place when ids are random (OpenTelemetry SDKs), one index page written to the WAL per item, in
 * the transaction that stores the trace. Led by the time the trace was first seen, the items of a
 * request land together at the end of the index, and are deleted together once scored.
 *
 * Items already queued get their trace's time (0 for an item whose trace row is gone, which no
 * new item can then collide with: nothing deletes trace rows). Recording the migration keeps an
 * older build, whose inserts would not name the new key, from starting against the database.
 */
export const workItemKeyInTimeOrder: Migration = {
  version: 23,
  name: 'work_item_key_in_time_order',
  async up(db) {
    await db.schema
      .alterTable('work_items')
      .addColumn('trace_first_seen_at', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
    await sql`update work_items set trace_first_seen_at = coalesce((select t.first_seen_at
        from traces t where t.project = work_items.project and t.trace_id = work_items.trace_id), 0)`.execute(
      db,
    );
    await db.schema.dropIndex('work_items_key_uq').execute();
    await db.schema
      .createIndex('work_items_key_uq')
      .on('work_items')
      .columns(['project', 'trace_first_seen_at', 'trace_id', 'digest', 'policy'])
      .unique()
      .execute();
  },
};
