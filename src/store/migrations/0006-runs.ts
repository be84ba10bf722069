import { sql } from 'kysely';
import type { Migration } from '../migrate.js';

/**
 * Offline runs: one row per run (status, progress, summaries and gates, and the lease of the
 * replica executing it), its spec, the outputs its target produced and its results, both keyed by
 * (run, record, trial[, evaluator]) so an adopted run skips what is already stored.
 */
export const runs: Migration = {
  version: 6,
  name: 'runs',
  async up(db) {
    await db.schema
      .createTable('runs')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('labels', 'text', (c) => c.notNull())
      // 1 when labelled `touchstone.keep: "true"`: retention never sweeps it.
      .addColumn('keep', 'integer', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('created_by', 'text', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('started_at', 'bigint')
      .addColumn('finished_at', 'bigint')
      .addColumn('total', 'bigint', (c) => c.notNull())
      .addColumn('done', 'bigint', (c) => c.notNull())
      .addColumn('summaries', 'text')
      .addColumn('gates', 'text')
      .addColumn('error', 'text')
      .addColumn('cancel_requested', 'integer', (c) => c.notNull())
      .addColumn('lease_holder', 'text')
      .addColumn('lease_expires_at', 'bigint')
      .addColumn('dataset_digest', 'text')
      .execute();
    // The list: one project's runs, newest first; and the same across projects.
    await db.schema
      .createIndex('runs_project_created_idx')
      .on('runs')
      .columns(['project', 'created_at', 'id'])
      .execute();
    await db.schema
      .createIndex('runs_created_idx')
      .on('runs')
      .columns(['created_at', 'id'])
      .execute();
    // The executor's claim: runs not yet final, oldest first (few rows, hence partial).
    await db.schema
      .createIndex('runs_open_idx')
      .on('runs')
      .columns(['created_at', 'id'])
      .where(sql.ref('finished_at'), 'is', null)
      .execute();
    // The retention sweep: finished runs not kept, oldest first.
    await db.schema
      .createIndex('runs_sweep_idx')
      .on('runs')
      .columns(['finished_at', 'id'])
      .where(sql<boolean>`finished_at is not null and keep = 0`)
      .execute();

    // The spec apart from the run's row: it may hold 100k inline records, and the row is
    // updated at every batch (SQLite rewrites a whole row, overflow pages included).
    await db.schema
      .createTable('run_specs')
      .addColumn('run_id', 'text', (c) => c.primaryKey())
      .addColumn('spec', 'text', (c) => c.notNull())
      .execute();

    await db.schema
      .createTable('run_outputs')
      .addColumn('run_id', 'text', (c) => c.notNull())
      .addColumn('record_index', 'integer', (c) => c.notNull())
      .addColumn('trial', 'integer', (c) => c.notNull())
      .addColumn('record_id', 'text', (c) => c.notNull())
      // JSON {output, trajectory?, usage?}; null when the target failed.
      .addColumn('output', 'text')
      .addColumn('error', 'text')
      .addPrimaryKeyConstraint('run_outputs_pk', ['run_id', 'record_index', 'trial'])
      .execute();

    await db.schema
      .createTable('run_results')
      .addColumn('run_id', 'text', (c) => c.notNull())
      .addColumn('record_index', 'integer', (c) => c.notNull())
      .addColumn('trial', 'integer', (c) => c.notNull())
      .addColumn('evaluator', 'text', (c) => c.notNull())
      // Order of the result within the item's results (the spec's evaluator order).
      .addColumn('position', 'integer', (c) => c.notNull())
      .addColumn('record_id', 'text', (c) => c.notNull())
      .addColumn('outcome', 'text', (c) => c.notNull())
      // JSON: the Result.
      .addColumn('result', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('run_results_pk', ['run_id', 'record_index', 'trial', 'evaluator'])
      .execute();
  },
};
