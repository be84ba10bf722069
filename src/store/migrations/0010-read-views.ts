import type { Migration } from '../migrate.js';

/**
 * What the web UI and the read API show beyond the first views: a completed trace's token usage
 * (a small column, so trace lists need not read records), results by time (the scores chart),
 * and the history of alert transitions (the chart's fired and resolved markers; alert_states
 * keeps only the current state).
 */
export const readViews: Migration = {
  version: 10,
  name: 'read_views',
  async up(db) {
    // JSON {inputTokens?, outputTokens?, totalTokens?, costUsd?}; null before this migration.
    await db.schema.alterTable('traces').addColumn('usage', 'text').execute();
    await db.schema
      .createIndex('results_project_scored_idx')
      .on('results')
      .columns(['project', 'scored_at'])
      .execute();
    await db.schema
      .createTable('alert_transitions')
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('policy', 'text', (c) => c.notNull())
      .addColumn('metric', 'text', (c) => c.notNull())
      .addColumn('at', 'bigint', (c) => c.notNull())
      .addColumn('firing', 'integer', (c) => c.notNull())
      .addColumn('mean', 'double precision', (c) => c.notNull())
      .addColumn('n', 'integer', (c) => c.notNull())
      .addColumn('below', 'double precision', (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex('alert_transitions_project_at_idx')
      .on('alert_transitions')
      .columns(['project', 'at'])
      .execute();
  },
};
