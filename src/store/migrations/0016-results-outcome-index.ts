import type { Migration } from '../migrate.js';

/**
 * Results by outcome (then policy and evaluator): the traces list's `outcome` filter, alone or
 * with a policy, lists its traces from here (store/trace-filters.ts), so an outcome that is rare
 * leads and one that matches nothing answers at once instead of walking the project.
 */
export const resultsOutcomeIndex: Migration = {
  version: 16,
  name: 'results_outcome_index',
  async up(db) {
    await db.schema
      .createIndex('results_outcome_idx')
      .on('results')
      .columns(['project', 'outcome', 'policy', 'evaluator', 'trace_id'])
      .execute();
  },
};
