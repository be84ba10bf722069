/**
 * Worker entry for backend.test.ts: a connection of its own to `workerData.dir`'s database that
 * inserts `{value}` into `t` in a transaction on `{type: 'write'}` (posting `{type: 'written'}`),
 * as the scoring worker's connection does; answers `{type: 'pages'}` with `{type: 'pages N'}`, its
 * connection's `wal_autocheckpoint`; stops on `stop`.
 */

import { parentPort, workerData } from 'node:worker_threads';
import { Kysely, sql } from 'kysely';
import { createSqliteBackend } from './backend.js';

const port = parentPort;
if (port === null) throw new Error('write-turns.testkit must run in a worker thread');
const db = new Kysely<{ t: { x: number } }>({
  dialect: createSqliteBackend((workerData as { dir: string }).dir).kyselyDialect,
});
port.on('message', async (msg: { type: string; value?: number }) => {
  if (msg.type === 'stop') {
    await db.destroy();
    port.close();
  } else if (msg.type === 'write') {
    port.postMessage({ type: 'waiting' });
    await db
      .transaction()
      .execute((tx) => sql`insert into t (x) values (${msg.value})`.execute(tx));
    port.postMessage({ type: 'written' });
  } else if (msg.type === 'pages') {
    const { rows } = await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(
      db,
    );
    port.postMessage({ type: `pages ${rows[0]?.wal_autocheckpoint}` });
  }
});
port.postMessage({ type: 'ready' });
