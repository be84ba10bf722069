import type { Migration } from '../migrate.js';

/**
 * Write-backs a store refused for good (401, 403, the trace gone, a refused value): taken out of
 * the queue and kept as dead letters for the source's status (what was refused and why, not the
 * score: a later score of the trace is queued as usual), the newest per source, with a counter
 * of all of them beside the source's other counters.
 */
export const writeBackDeadLetters: Migration = {
  version: 9,
  name: 'write-back-dead-letters',
  async up(db) {
    await db.schema
      .createTable('write_back_dead_letters')
      // The write-back's own id (`wb_…`).
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('source', 'text', (c) => c.notNull())
      .addColumn('trace_id', 'text', (c) => c.notNull())
      .addColumn('policy', 'text', (c) => c.notNull())
      .addColumn('metric', 'text', (c) => c.notNull())
      .addColumn('attempts', 'integer', (c) => c.notNull())
      .addColumn('code', 'text', (c) => c.notNull())
      .addColumn('message', 'text', (c) => c.notNull())
      .addColumn('failed_at', 'bigint', (c) => c.notNull())
      .execute();
    // A source's dead letters newest first (status, pruning).
    await db.schema
      .createIndex('write_back_dead_letters_source_idx')
      .on('write_back_dead_letters')
      .columns(['project', 'source', 'failed_at', 'id'])
      .execute();
    await db.schema
      .alterTable('source_states')
      .addColumn('dead_letters', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
  },
};
