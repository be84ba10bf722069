import type { Migration } from '../migrate.js';

/**
 * The spans of a whole trace (one that arrived with its root ended and every span it names, in one
 * batch) are kept in its own `traces` row (`spans`, `spans_format`: the chunk text and its format,
 * store/chunk-format.ts) instead of a `span_chunks` row of their own. Keyed by trace id, a
 * `span_chunks` row costs one more index entry per trace; with random ids, as OpenTelemetry SDKs
 * make them, that entry lands on a page of its own, written to the WAL at commit. Spans that reach
 * a trace later are `span_chunks` rows as before, read after the inline chunk.
 *
 * Recording this migration is what makes an older build refuse the database at start
 * (STORE_SCHEMA_TOO_NEW) instead of reading whole traces as if they had no spans. Nullable columns
 * without a default rewrite no rows on either dialect; rows written before keep theirs null.
 */
export const traceInlineSpans: Migration = {
  version: 22,
  name: 'trace_inline_spans',
  async up(db) {
    await db.schema.alterTable('traces').addColumn('spans', 'text').execute();
    await db.schema.alterTable('traces').addColumn('spans_format', 'integer').execute();
  },
};
