import { sql } from 'kysely';
import type { Migration } from '../migrate.js';

/**
 * Traces (summary columns + record) and their spans; open traces are found by a partial index.
 * API keys gain an optional grant scope (services, labels) that narrows what they read.
 */
export const traces: Migration = {
  version: 2,
  name: 'traces',
  async up(db) {
    await db.schema.alterTable('api_keys').addColumn('scope', 'text').execute();
    await db.schema
      .createTable('traces')
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('trace_id', 'text', (c) => c.notNull())
      .addColumn('source', 'text', (c) => c.notNull())
      .addColumn('ingest_labels', 'text', (c) => c.notNull())
      .addColumn('first_seen_at', 'bigint', (c) => c.notNull())
      .addColumn('last_span_at', 'bigint', (c) => c.notNull())
      .addColumn('root_ended_at', 'bigint')
      .addColumn('completed_at', 'bigint')
      .addColumn('service', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('name', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('start_ms', 'bigint', (c) => c.notNull().defaultTo(0))
      .addColumn('duration_ms', 'double precision', (c) => c.notNull().defaultTo(0))
      .addColumn('steps', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('error', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('labels', 'text', (c) => c.notNull().defaultTo('{}'))
      .addColumn('digest', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('record', 'text')
      .addPrimaryKeyConstraint('traces_pk', ['project', 'trace_id'])
      .execute();
    // Newest-first listing within a project.
    await db.schema
      .createIndex('traces_project_start_idx')
      .on('traces')
      .columns(['project', 'start_ms', 'trace_id'])
      .execute();
    // The completer scans only open traces.
    await db.schema
      .createIndex('traces_open_idx')
      .on('traces')
      .columns(['last_span_at'])
      .where(sql.ref('completed_at'), 'is', null)
      .execute();

    // Spans are stored in chunks: the spans of one trace from one request (or pulled page) in one
    // row. Ten times fewer rows than one per span is what makes ingest fast; a span id seen again in
    // a later chunk replaces the earlier one when the trace is read.
    await db.schema
      .createTable('span_chunks')
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('trace_id', 'text', (c) => c.notNull())
      .addColumn('chunk', 'text', (c) => c.notNull())
      .addColumn('spans', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('span_chunks_pk', ['project', 'trace_id', 'chunk'])
      .execute();
  },
};
