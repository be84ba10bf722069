import type { Migration } from '../migrate.js';

/**
 * The format each span chunk is written in (store/chunk-format.ts): 1 for every chunk written so
 * far (the default, also for what an older build might still insert), 2 for the compact chunks
 * written from now on. Recording this migration is what makes an older build refuse the database
 * at start (STORE_SCHEMA_TOO_NEW) instead of misreading format-2 chunks; a build that finds a
 * format newer than it knows refuses to read that chunk. Adding a column with a constant default
 * rewrites no rows on either dialect.
 */
export const spanChunkFormat: Migration = {
  version: 17,
  name: 'span_chunk_format',
  async up(db) {
    await db.schema
      .alterTable('span_chunks')
      .addColumn('format', 'integer', (c) => c.notNull().defaultTo(1))
      .execute();
  },
};
