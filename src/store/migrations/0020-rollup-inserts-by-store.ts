import { sql } from 'kysely';
import type { Migration } from '../migrate.js';

/**
 * On SQLite the store adds the results it inserts to `score_rollup` itself, one grouped statement
 * per insert (`addToRollup` in store/results.ts), instead of migration 15's insert trigger, which
 * upserted the rollup for each score and width of each row: 10–14 µs per result, a third of the
 * cost of a trace's five results (`npm run bench -- results-insert`), paid inside the scoring
 * transaction that holds SQLite's one write lock. The update and delete triggers stay: they move
 * the counts of replaced, changed and deleted results, whoever changes them. PostgreSQL's
 * triggers run once per statement already and stay.
 */
export const rollupInsertsByStore: Migration = {
  version: 20,
  name: 'rollup_inserts_by_store',
  async up(db, dialect) {
    if (dialect === 'sqlite') await sql`drop trigger if exists score_rollup_insert`.execute(db);
  },
};
