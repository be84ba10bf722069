import type { Migration } from '../migrate.js';

/**
 * The results indexes that serve the lists' result filters (`policy`, `evaluator`, `outcome`:
 * store/trace-filters.ts) end with the score time before the trace id, as the scores themselves
 * arrive, instead of with the trace id. Keyed by trace id, each stored result went to a random
 * leaf of three indexes (random trace ids, as OpenTelemetry SDKs make them), and each such leaf
 * was written again to the WAL at commit: storing a scoring batch of one-result traces cost
 * 146–237 µs of CPU per result on SQLite at 264k results, 55–63 µs with the three in time order
 * (docs/performance.md, "Results in time order"). A filter still lists its traces from its index
 * (what it matches, not in trace order); the check of one trace against a result filter (the
 * lists' walk) reads the primary key, which starts with the trace.
 */
export const resultsInTimeOrder: Migration = {
  version: 19,
  name: 'results_in_time_order',
  async up(db) {
    const indexes = [
      ['results_policy_idx', ['project', 'policy', 'evaluator', 'scored_at', 'trace_id']],
      ['results_evaluator_idx', ['project', 'evaluator', 'scored_at', 'trace_id']],
      [
        'results_outcome_idx',
        ['project', 'outcome', 'policy', 'evaluator', 'scored_at', 'trace_id'],
      ],
    ] as const;
    for (const [name, columns] of indexes) {
      await db.schema.dropIndex(name).execute();
      await db.schema
        .createIndex(name)
        .on('results')
        .columns([...columns])
        .execute();
    }
  },
};
