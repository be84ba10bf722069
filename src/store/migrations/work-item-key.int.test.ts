import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { freshPgSchema, PG_URL } from '../../../test/support/stores.js';
import type { StoreDialect } from '../ports.js';
import { workItemKeyInTimeOrder } from './0023-work-item-key-in-time-order.js';
import { MIGRATIONS } from './index.js';

/**
 * Migration 23 on a queue written before it: each item gets its trace's `first_seen_at` (0 when
 * the trace row is gone), and the unique key, led by it, still refuses a second copy of an item.
 */
async function check(db: Kysely<unknown>, dialect: StoreDialect): Promise<void> {
  for (const m of MIGRATIONS.slice(0, workItemKeyInTimeOrder.version - 1)) await m.up(db, dialect);
  await sql`insert into traces (project, trace_id, source, ingest_labels, first_seen_at,
      last_span_at, completed_at, start_ms)
    values ('p', 'a', '', '{}', 100, 200, 300, 100)`.execute(db);
  const item = (id: string, traceId: string) =>
    sql`insert into work_items (id, project, trace_id, digest, policy, replace,
        trace_completed_at, created_at, visible_at, attempts, claim)
      values (${id}, 'p', ${traceId}, 'd', '', 0, 300, 300, 300, 0, '')
      on conflict do nothing`.execute(db);
  await item('wi_1', 'a');
  await item('wi_2', 'gone');
  await workItemKeyInTimeOrder.up(db, dialect);
  const rows = await sql<{ id: string; at: number | string }>`select id,
      trace_first_seen_at as at from work_items order by id`.execute(db);
  expect(rows.rows.map((r) => [r.id, Number(r.at)])).toEqual([
    ['wi_1', 100],
    ['wi_2', 0],
  ]);
  const again = await sql`insert into work_items (id, project, trace_id, digest, policy,
      replace, trace_completed_at, created_at, visible_at, attempts, claim, trace_first_seen_at)
    values ('wi_3', 'p', 'a', 'd', '', 0, 300, 300, 300, 0, '', 100)
    on conflict (project, trace_first_seen_at, trace_id, digest, policy) do nothing`.execute(db);
  expect(Number(again.numAffectedRows ?? 0n)).toBe(0);
}

describe('the work queue key in time order (migration 23)', () => {
  it('on SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'touchstone-migration-23-'));
    const db = new Kysely<unknown>({
      dialect: new SqliteDialect({ database: new Database(join(dir, 'db')) }),
    });
    try {
      await check(db, 'sqlite');
    } finally {
      await db.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(PG_URL === undefined || PG_URL === '')('on PostgreSQL', async () => {
    const schema = await freshPgSchema(PG_URL ?? '');
    const db = new Kysely<unknown>({
      dialect: new PostgresDialect({
        pool: new pg.Pool({ connectionString: schema.url, max: 1 }),
      }),
    });
    try {
      await check(db, 'postgres');
    } finally {
      await db.destroy();
      await schema.drop();
    }
  });
});
