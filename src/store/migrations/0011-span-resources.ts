import type { Migration } from '../migrate.js';

/**
 * OTLP resources stored once by content instead of inside every span: a request of one large
 * resource and many spans multiplied the resource into each span's stored copy (hundreds of MB
 * written for a request of hundreds of KB). Chunks written from now on name their spans' resource
 * by id; chunks written before keep theirs inline and read as they did.
 */
export const spanResources: Migration = {
  version: 11,
  name: 'span_resources',
  async up(db) {
    await db.schema
      .createTable('span_resources')
      .addColumn('project', 'text', (c) => c.notNull())
      // sha256 (hex) of `attributes`: equal resources are one row.
      .addColumn('id', 'text', (c) => c.notNull())
      // JSON object of the redacted resource attributes (bytes as {"$bytes": base64}).
      .addColumn('attributes', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('span_resources_pk', ['project', 'id'])
      .execute();
  },
};
