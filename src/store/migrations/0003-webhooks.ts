import { sql } from 'kysely';
import type { Migration } from '../migrate.js';

/**
 * Webhooks and their outbox of deliveries. A delivery row is written in the same transaction as
 * the change that caused its event, with the payload frozen; the dispatcher claims due rows.
 */
export const webhooks: Migration = {
  version: 3,
  name: 'webhooks',
  async up(db) {
    await db.schema
      .createTable('webhooks')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('url', 'text', (c) => c.notNull())
      .addColumn('events', 'text', (c) => c.notNull())
      // Kept as is, not hashed: every attempt is signed with it.
      .addColumn('secret', 'text', (c) => c.notNull())
      .addColumn('disabled', 'integer', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('updated_at', 'bigint', (c) => c.notNull())
      .execute();
    // Identity within the project; also serves the per-project list in name order.
    await db.schema
      .createIndex('webhooks_project_name_uq')
      .on('webhooks')
      .columns(['project', 'name'])
      .unique()
      .execute();

    await db.schema
      .createTable('webhook_deliveries')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('webhook_id', 'text', (c) => c.notNull())
      .addColumn('webhook_name', 'text', (c) => c.notNull())
      .addColumn('event', 'text', (c) => c.notNull())
      .addColumn('payload', 'text', (c) => c.notNull())
      .addColumn('state', 'text', (c) => c.notNull())
      .addColumn('attempts', 'integer', (c) => c.notNull())
      .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
      .addColumn('last_status', 'integer')
      .addColumn('last_error', 'text')
      .addColumn('run_id', 'text')
      .addColumn('trace_id', 'text')
      .addColumn('policy', 'text')
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('finished_at', 'bigint')
      .execute();
    // The dispatcher's scan: unfinished deliveries by due time (also the queue-depth gauges).
    await db.schema
      .createIndex('webhook_deliveries_due_idx')
      .on('webhook_deliveries')
      .columns(['next_attempt_at', 'id'])
      .where(sql.ref('finished_at'), 'is', null)
      .execute();
    // One webhook's deliveries, newest first.
    await db.schema
      .createIndex('webhook_deliveries_webhook_idx')
      .on('webhook_deliveries')
      .columns(['webhook_id', 'created_at', 'id'])
      .execute();
    // Retention pruning of finished deliveries.
    await db.schema
      .createIndex('webhook_deliveries_finished_idx')
      .on('webhook_deliveries')
      .column('finished_at')
      .where(sql.ref('finished_at'), 'is not', null)
      .execute();
  },
};
