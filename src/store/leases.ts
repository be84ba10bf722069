import type { Kysely } from 'kysely';
import { type Clock, CoreErrors } from '../core/index.js';
import { toIso } from './columns.js';
import type { Lease, LeaseStore } from './ports.js';
import type { Database } from './schema.js';

export class KyselyLeaseStore implements LeaseStore {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
  ) {}

  async acquire(name: string, holder: string, ttlMs: number): Promise<boolean> {
    if (!Number.isSafeInteger(ttlMs) || ttlMs <= 0) {
      throw CoreErrors.INVALID_ARGUMENT(`lease ttl must be a positive integer of ms, got ${ttlMs}`);
    }
    const now = this.clock.now();
    // One statement, so two replicas racing for a free lease cannot both win: the row lock (PG)
    // or the write lock (SQLite) orders them, and the loser's WHERE sees the winner's row.
    const won = await this.db
      .insertInto('leases')
      .values({ name, holder, expires_at: now + ttlMs, acquired_at: now })
      .onConflict((oc) =>
        oc
          .column('name')
          .doUpdateSet((eb) => ({
            holder: eb.ref('excluded.holder'),
            expires_at: eb.ref('excluded.expires_at'),
            acquired_at: eb
              .case()
              .when('leases.holder', '=', eb.ref('excluded.holder'))
              .then(eb.ref('leases.acquired_at'))
              .else(eb.ref('excluded.acquired_at'))
              .end(),
          }))
          .where((eb) =>
            eb.or([
              eb('leases.holder', '=', eb.ref('excluded.holder')),
              eb('leases.expires_at', '<=', now),
            ]),
          ),
      )
      .returning('holder')
      .executeTakeFirst();
    return won !== undefined;
  }

  async release(name: string, holder: string): Promise<void> {
    await this.db
      .deleteFrom('leases')
      .where('name', '=', name)
      .where('holder', '=', holder)
      .execute();
  }

  async get(name: string): Promise<Lease | undefined> {
    const row = await this.db
      .selectFrom('leases')
      .select(['holder', 'expires_at', 'acquired_at'])
      .where('name', '=', name)
      .executeTakeFirst();
    if (row === undefined) return undefined;
    return {
      holder: row.holder,
      expiresAt: toIso(row.expires_at),
      acquiredAt: toIso(row.acquired_at),
    };
  }
}
