import { sql } from 'kysely';
import type { Migration } from '../migrate.js';

/**
 * Online evaluation: policies, the durable work queue (one item per trace version), results per
 * (trace, policy, digest, evaluator), metric windows and alert states, judge-token budgets.
 * Traces gain their root (what selectors read) and when they were last scored (the scores list
 * order); deliveries gain an optional target URL (a policy's own unsigned alert webhook).
 */
export const online: Migration = {
  version: 4,
  name: 'online',
  async up(db) {
    await db.schema.alterTable('traces').addColumn('root', 'text').execute();
    await db.schema.alterTable('traces').addColumn('scored_at', 'bigint').execute();
    // The scores list: scored traces of a project, most recently scored first.
    await db.schema
      .createIndex('traces_project_scored_idx')
      .on('traces')
      .columns(['project', 'scored_at', 'trace_id'])
      .where(sql.ref('scored_at'), 'is not', null)
      .execute();
    // The same across projects; project is part of the order (and the page token) there.
    await db.schema
      .createIndex('traces_scored_idx')
      .on('traces')
      .columns(['scored_at', 'project', 'trace_id'])
      .where(sql.ref('scored_at'), 'is not', null)
      .execute();
    await db.schema.alterTable('webhook_deliveries').addColumn('target_url', 'text').execute();

    await db.schema
      .createTable('policies')
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('resource', 'text', (c) => c.notNull())
      .addColumn('generation', 'integer', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('updated_at', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('policies_pk', ['project', 'name'])
      .execute();

    await db.schema
      .createTable('work_items')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('trace_id', 'text', (c) => c.notNull())
      .addColumn('digest', 'text', (c) => c.notNull())
      // '' = every policy of the project; a name = a rescore of that policy.
      .addColumn('policy', 'text', (c) => c.notNull())
      .addColumn('replace', 'integer', (c) => c.notNull())
      .addColumn('trace_completed_at', 'bigint', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('visible_at', 'bigint', (c) => c.notNull())
      .addColumn('attempts', 'integer', (c) => c.notNull())
      .addColumn('claim', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex('work_items_key_uq')
      .on('work_items')
      .columns(['project', 'trace_id', 'digest', 'policy'])
      .unique()
      .execute();
    await db.schema
      .createIndex('work_items_visible_idx')
      .on('work_items')
      .columns(['visible_at', 'id'])
      .execute();

    await db.schema
      .createTable('results')
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('trace_id', 'text', (c) => c.notNull())
      .addColumn('policy', 'text', (c) => c.notNull())
      .addColumn('digest', 'text', (c) => c.notNull())
      .addColumn('evaluator', 'text', (c) => c.notNull())
      // Order of the result within the policy's results.
      .addColumn('position', 'integer', (c) => c.notNull())
      .addColumn('outcome', 'text', (c) => c.notNull())
      // JSON: the Result as the API shows it.
      .addColumn('result', 'text', (c) => c.notNull())
      .addColumn('scored_at', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('results_pk', [
        'project',
        'trace_id',
        'policy',
        'digest',
        'evaluator',
      ])
      .execute();

    await db.schema
      .createTable('metric_points')
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('policy', 'text', (c) => c.notNull())
      .addColumn('metric', 'text', (c) => c.notNull())
      .addColumn('at', 'bigint', (c) => c.notNull())
      .addColumn('value', 'double precision', (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex('metric_points_window_idx')
      .on('metric_points')
      .columns(['project', 'policy', 'metric', 'at'])
      .execute();
    await db.schema.createIndex('metric_points_at_idx').on('metric_points').column('at').execute();

    await db.schema
      .createTable('alert_states')
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('policy', 'text', (c) => c.notNull())
      .addColumn('metric', 'text', (c) => c.notNull())
      .addColumn('firing', 'integer', (c) => c.notNull())
      .addColumn('mean', 'double precision', (c) => c.notNull())
      .addColumn('n', 'integer', (c) => c.notNull())
      .addColumn('changed_at', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('alert_states_pk', ['project', 'policy', 'metric'])
      .execute();

    await db.schema
      .createTable('judge_budgets')
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('policy', 'text', (c) => c.notNull())
      .addColumn('day', 'text', (c) => c.notNull())
      .addColumn('tokens', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('judge_budgets_pk', ['project', 'policy', 'day'])
      .execute();
  },
};
