import type { Migration } from '../migrate.js';

/**
 * The audit trail: one row per write and per refusal. Listed newest first, filtered by project
 * (an admin reads their project's), and deleted oldest first past the retention.
 */
export const audit: Migration = {
  version: 12,
  name: 'audit',
  async up(db) {
    await db.schema
      .createTable('audit_entries')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('at', 'bigint', (c) => c.notNull())
      .addColumn('principal', 'text', (c) => c.notNull())
      .addColumn('principal_kind', 'text', (c) => c.notNull())
      .addColumn('action', 'text', (c) => c.notNull())
      .addColumn('resource', 'text', (c) => c.notNull())
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('outcome', 'text', (c) => c.notNull())
      .addColumn('status', 'integer', (c) => c.notNull())
      .addColumn('code', 'text')
      .addColumn('request_id', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex('audit_entries_project_idx')
      .on('audit_entries')
      .columns(['project', 'at', 'id'])
      .execute();
    // Listing every project newest first, and the retention sweep oldest first.
    await db.schema
      .createIndex('audit_entries_at_idx')
      .on('audit_entries')
      .columns(['at', 'id'])
      .execute();
  },
};
