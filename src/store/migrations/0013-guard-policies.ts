import type { Migration } from '../migrate.js';

/** Guard policies (the gateway guardrails' resource), keyed like every resource by (project, name). */
export const guardPolicies: Migration = {
  version: 13,
  name: 'guard-policies',
  async up(db) {
    await db.schema
      .createTable('guard_policies')
      .addColumn('project', 'text', (c) => c.notNull())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('resource', 'text', (c) => c.notNull())
      .addColumn('generation', 'integer', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('updated_at', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('guard_policies_pk', ['project', 'name'])
      .execute();
  },
};
