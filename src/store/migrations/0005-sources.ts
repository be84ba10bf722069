import { sql } from 'kysely';
import type { Migration } from '../migrate.js';

/**
 * Trace sources: the resources, their pull state (one row per source, written by the lease
 * holder), what each source knows of its store's traces (digest skip, deferral), the durable
 * write-back queue and the write-back ledger (remote id and value digest per metric).
 */
export const sources: Migration = {
  version: 5,
  name: 'sources',
  async up(db) {
    await db.schema
      .createTable('sources')
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('resource', 'text', (c) => c.notNull())
      .addColumn('generation', 'integer', (c) => c.notNull())
      .addColumn('paused', 'integer', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('updated_at', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('sources_pk', ['project', 'name'])
      .execute();

    await db.schema
      .createTable('source_states')
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('name', 'text', (c) => c.notNull())
      // JSON of SourceState without its key and counters: one writer (the lease holder).
      .addColumn('state', 'text', (c) => c.notNull())
      // Counters several writers add to (`count`); `saveState` never rewrites them.
      .addColumn('pulled', 'bigint', (c) => c.notNull().defaultTo(0))
      .addColumn('scored', 'bigint', (c) => c.notNull().defaultTo(0))
      .addColumn('last_write_back_at', 'bigint')
      .addPrimaryKeyConstraint('source_states_pk', ['project', 'name'])
      .execute();

    await db.schema
      .createTable('source_traces')
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('source', 'text', (c) => c.notNull())
      .addColumn('store_id', 'text', (c) => c.notNull())
      .addColumn('trace_id', 'text', (c) => c.notNull())
      .addColumn('start_ms', 'bigint', (c) => c.notNull())
      .addColumn('version', 'text', (c) => c.notNull())
      .addColumn('deferred_since', 'bigint')
      .addPrimaryKeyConstraint('source_traces_pk', ['project', 'source', 'store_id'])
      .execute();
    // `storeIdOf`: write-back addresses a trace by its store id.
    await db.schema
      .createIndex('source_traces_trace_idx')
      .on('source_traces')
      .columns(['project', 'source', 'trace_id'])
      .execute();
    // `deferred`: a source's deferred traces, oldest first (few rows, hence partial).
    await db.schema
      .createIndex('source_traces_deferred_idx')
      .on('source_traces')
      .columns(['project', 'source', 'deferred_since', 'store_id'])
      .where(sql.ref('deferred_since'), 'is not', null)
      .execute();

    await db.schema
      .createTable('write_backs')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('source', 'text', (c) => c.notNull())
      .addColumn('store_id', 'text', (c) => c.notNull())
      .addColumn('trace_id', 'text', (c) => c.notNull())
      .addColumn('policy', 'text', (c) => c.notNull())
      .addColumn('metric', 'text', (c) => c.notNull())
      .addColumn('score', 'text', (c) => c.notNull())
      .addColumn('judge', 'integer', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('visible_at', 'bigint', (c) => c.notNull())
      .addColumn('attempts', 'integer', (c) => c.notNull())
      .addColumn('claim', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex('write_backs_visible_idx')
      .on('write_backs')
      .columns(['visible_at', 'id'])
      .execute();

    await db.schema
      .createTable('write_back_ledger')
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('source', 'text', (c) => c.notNull())
      .addColumn('trace_id', 'text', (c) => c.notNull())
      .addColumn('policy', 'text', (c) => c.notNull())
      .addColumn('metric', 'text', (c) => c.notNull())
      .addColumn('remote_id', 'text', (c) => c.notNull())
      .addColumn('value_digest', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('write_back_ledger_pk', [
        'project',
        'source',
        'trace_id',
        'policy',
        'metric',
      ])
      .execute();
  },
};
