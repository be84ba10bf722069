import type { Migration } from '../migrate.js';

/**
 * Idempotency-Key records: stored outcomes per principal, operation and key. A row is written
 * (in flight) before the operation runs and completed with the response afterwards, so the key's
 * primary key is what makes two first requests race for one reservation.
 */
export const idempotency: Migration = {
  version: 7,
  name: 'idempotency',
  async up(db, dialect) {
    await db.schema
      .createTable('idempotency_keys')
      .addColumn('principal', 'text', (c) => c.notNull())
      .addColumn('operation', 'text', (c) => c.notNull())
      .addColumn('key', 'text', (c) => c.notNull())
      .addColumn('digest', 'text', (c) => c.notNull())
      .addColumn('state', 'text', (c) => c.notNull())
      .addColumn('token', 'text', (c) => c.notNull())
      .addColumn('created_at', 'bigint', (c) => c.notNull())
      .addColumn('heartbeat_at', 'bigint', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .addColumn('status', 'integer')
      .addColumn('headers', 'text')
      // Responses are kept as the bytes sent, whatever their media type.
      .addColumn('body', dialect === 'postgres' ? 'bytea' : 'blob')
      .addColumn('withheld', 'text')
      .addColumn('bytes', 'bigint', (c) => c.notNull().defaultTo(0))
      .addPrimaryKeyConstraint('idempotency_keys_pk', ['principal', 'operation', 'key'])
      .execute();
    // A scope's keys oldest first (eviction), and its key count and stored bytes read from the
    // index alone: both run on every keyed request.
    await db.schema
      .createIndex('idempotency_keys_scope_idx')
      .on('idempotency_keys')
      .columns(['principal', 'operation', 'created_at', 'key', 'bytes'])
      .execute();
    // The expiry sweep.
    await db.schema
      .createIndex('idempotency_keys_expires_idx')
      .on('idempotency_keys')
      .column('expires_at')
      .execute();
  },
};
