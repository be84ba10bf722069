import type { Migration } from '../migrate.js';

/**
 * Pulled traces found by their store's own id (`GET /v1alpha1/traces/tr-…`): the trace reads look
 * a store id up across the sources of a project, which the primary key (project, source, store_id)
 * cannot serve without the source.
 */
export const sourceStoreIds: Migration = {
  version: 8,
  name: 'source-store-ids',
  async up(db) {
    await db.schema
      .createIndex('source_traces_store_idx')
      .on('source_traces')
      .columns(['project', 'store_id'])
      .execute();
  },
};
