import type { Migration } from '../migrate.js';

/** API keys and leases. */
export const initial: Migration = {
  version: 1,
  name: 'initial',
  async up(db) {
    await db.schema
      .createTable('api_keys')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('roles', 'text', (c) => c.notNull())
      .addColumn('labels', 'text', (c) => c.notNull())
      .addColumn('prefix', 'text', (c) => c.notNull())
      .addColumn('secret_hash', 'text', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('last_used_at', 'bigint')
      .addColumn('revoked_at', 'bigint')
      .addColumn('expires_at', 'bigint')
      .execute();
    await db.schema
      .createIndex('api_keys_secret_hash_uq')
      .on('api_keys')
      .column('secret_hash')
      .unique()
      .execute();
    // Serves the per-project list in its (created_at, id) keyset order.
    await db.schema
      .createIndex('api_keys_project_idx')
      .on('api_keys')
      .columns(['project', 'created_at', 'id'])
      .execute();

    await db.schema
      .createTable('leases')
      .addColumn('name', 'text', (c) => c.primaryKey())
      .addColumn('holder', 'text', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .addColumn('acquired_at', 'bigint', (c) => c.notNull())
      .execute();
  },
};
