import {
  CompiledQuery,
  type ExpressionBuilder,
  type Kysely,
  type Selectable,
  type SqlBool,
  sql,
} from 'kysely';
import type {
  IdempotencyEviction,
  IdempotencyOutcome,
  IdempotencyRecord,
  IdempotencyReservation,
  IdempotencyScope,
  IdempotencyState,
  IdempotencyStore,
  IdempotencyUsage,
  StoreDialect,
} from './ports.js';
import type { Database, IdempotencyKeysTable } from './schema.js';

/** First half of the scope lock's advisory key ('TSID'); the second is the scope's hash. */
const SCOPE_LOCK_CLASS = 0x54534944;

/** Keys per DELETE (SQLite caps bound parameters). */
const DELETE_CHUNK = 200;
/** Rows an eviction reads at a time, oldest first. */
const EVICT_PAGE = 32;

function outcomeFromRow(row: Selectable<IdempotencyKeysTable>): IdempotencyOutcome | undefined {
  if (row.state !== 'completed' || row.status === null) return undefined;
  const outcome: IdempotencyOutcome = {
    status: row.status,
    headers: row.headers === null ? {} : (JSON.parse(row.headers) as Record<string, string>),
    body: row.body === null ? new Uint8Array(0) : new Uint8Array(row.body),
  };
  if (row.withheld !== null) outcome.withheld = JSON.parse(row.withheld) as string[];
  return outcome;
}

function fromRow(row: Selectable<IdempotencyKeysTable>): IdempotencyRecord {
  const record: IdempotencyRecord = {
    principal: row.principal,
    operation: row.operation,
    key: row.key,
    digest: row.digest,
    state: row.state as IdempotencyState,
    token: row.token,
    createdAt: Number(row.created_at),
    heartbeatAt: Number(row.heartbeat_at),
    expiresAt: Number(row.expires_at),
  };
  const outcome = outcomeFromRow(row);
  if (outcome !== undefined) record.outcome = outcome;
  return record;
}

/** What a stored outcome counts against its scope's byte budget. */
export function outcomeBytes(outcome: IdempotencyOutcome): number {
  return outcome.body.byteLength + JSON.stringify(outcome.headers).length;
}

type KeysFilter = ExpressionBuilder<Database, 'idempotency_keys'>;

/** The scope's row. */
function inScope(scope: IdempotencyScope) {
  return (eb: KeysFilter) =>
    eb.and([
      eb('principal', '=', scope.principal),
      eb('operation', '=', scope.operation),
      eb('key', '=', scope.key),
    ]);
}

/** The scope's row while `token` still holds it in flight: the fence of every holder's write. */
function heldBy(scope: IdempotencyScope, token: string) {
  return (eb: KeysFilter) =>
    eb.and([inScope(scope)(eb), eb('token', '=', token), eb('state', '=', 'in_flight')]);
}

export class KyselyIdempotencyStore implements IdempotencyStore {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: StoreDialect,
  ) {}

  private scoped(scope: IdempotencyScope) {
    return {
      principal: scope.principal,
      operation: scope.operation,
      key: scope.key,
    };
  }

  async lockScope(principal: string, operation: string): Promise<void> {
    // SQLite transactions take the write lock at BEGIN (IMMEDIATE): they are serialized already.
    if (this.dialect !== 'postgres') return;
    await this.db.executeQuery(
      CompiledQuery.raw(
        "select pg_advisory_xact_lock($1, hashtext(coalesce(current_schema(), '') || $2))",
        [SCOPE_LOCK_CLASS, JSON.stringify([principal, operation])],
      ),
    );
  }

  async get(scope: IdempotencyScope): Promise<IdempotencyRecord | undefined> {
    const row = await this.db
      .selectFrom('idempotency_keys')
      .selectAll()
      .where(inScope(scope))
      .executeTakeFirst();
    return row === undefined ? undefined : fromRow(row);
  }

  async insert(reservation: IdempotencyReservation): Promise<void> {
    await this.db
      .insertInto('idempotency_keys')
      .values({
        ...this.scoped(reservation),
        digest: reservation.digest,
        state: 'in_flight',
        token: reservation.token,
        created_at: reservation.createdAt,
        heartbeat_at: reservation.createdAt,
        expires_at: reservation.expiresAt,
        status: null,
        headers: null,
        body: null,
        withheld: null,
        bytes: 0,
      })
      .execute();
  }

  async complete(
    scope: IdempotencyScope,
    token: string,
    outcome: IdempotencyOutcome,
    expiresAt: number,
  ): Promise<boolean> {
    const result = await this.db
      .updateTable('idempotency_keys')
      .set({
        state: 'completed',
        status: outcome.status,
        headers: JSON.stringify(outcome.headers),
        body: Buffer.from(outcome.body.buffer, outcome.body.byteOffset, outcome.body.byteLength),
        withheld:
          outcome.withheld === undefined || outcome.withheld.length === 0
            ? null
            : JSON.stringify(outcome.withheld),
        bytes: outcomeBytes(outcome),
        expires_at: expiresAt,
      })
      .where(heldBy(scope, token))
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async markUncertain(scope: IdempotencyScope, token: string): Promise<boolean> {
    const result = await this.db
      .updateTable('idempotency_keys')
      .set({ state: 'uncertain' })
      .where(heldBy(scope, token))
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async takeOver(
    scope: IdempotencyScope,
    fromToken: string,
    toToken: string,
    now: number,
  ): Promise<boolean> {
    const result = await this.db
      .updateTable('idempotency_keys')
      .set({ state: 'in_flight', token: toToken, heartbeat_at: now })
      .where(inScope(scope))
      .where('token', '=', fromToken)
      .where('state', 'in', ['in_flight', 'uncertain'])
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async heartbeat(scope: IdempotencyScope, token: string, now: number): Promise<boolean> {
    const result = await this.db
      .updateTable('idempotency_keys')
      .set({ heartbeat_at: now })
      .where(heldBy(scope, token))
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async release(scope: IdempotencyScope, token: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('idempotency_keys')
      .where(heldBy(scope, token))
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  async delete(scope: IdempotencyScope): Promise<boolean> {
    const result = await this.db
      .deleteFrom('idempotency_keys')
      .where(inScope(scope))
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  async usage(principal: string, operation: string): Promise<IdempotencyUsage> {
    const row = await this.db
      .selectFrom('idempotency_keys')
      .select((eb) => [eb.fn.countAll<number>().as('keys'), eb.fn.sum<number>('bytes').as('bytes')])
      .where('principal', '=', principal)
      .where('operation', '=', operation)
      .executeTakeFirst();
    return { keys: Number(row?.keys ?? 0), bytes: Number(row?.bytes ?? 0) };
  }

  async evict(
    principal: string,
    operation: string,
    limits: IdempotencyEviction,
  ): Promise<IdempotencyUsage & { evicted: number }> {
    const before = await this.usage(principal, operation);
    if (before.keys <= limits.maxKeys && before.bytes <= limits.maxBytes) {
      return { ...before, evicted: 0 };
    }
    let { keys, bytes } = before;
    const victims: string[] = [];
    // Oldest first, a page at a time: the common case is one key over the limit.
    let after: { createdAt: number; key: string } | undefined;
    scan: for (;;) {
      let q = this.db
        .selectFrom('idempotency_keys')
        .select(['key', 'state', 'heartbeat_at', 'bytes', 'created_at'])
        .where('principal', '=', principal)
        .where('operation', '=', operation)
        .orderBy('created_at')
        .orderBy('key')
        .limit(EVICT_PAGE);
      if (after !== undefined) {
        const { createdAt, key } = after;
        q = q.where((eb) => eb(eb.refTuple('created_at', 'key'), '>', eb.tuple(createdAt, key)));
      }
      const rows = await q.execute();
      for (const row of rows) {
        if (keys <= limits.maxKeys && bytes <= limits.maxBytes) break scan;
        if (row.key === limits.keep) continue;
        // A live holder's reservation is what keeps its request from running twice.
        if (row.state === 'in_flight' && Number(row.heartbeat_at) >= limits.liveSince) continue;
        victims.push(row.key);
        keys -= 1;
        bytes -= Number(row.bytes);
      }
      const last = rows.at(-1);
      if (rows.length < EVICT_PAGE || last === undefined) break;
      after = { createdAt: Number(last.created_at), key: last.key };
    }
    for (let i = 0; i < victims.length; i += DELETE_CHUNK) {
      await this.db
        .deleteFrom('idempotency_keys')
        .where('principal', '=', principal)
        .where('operation', '=', operation)
        .where('key', 'in', victims.slice(i, i + DELETE_CHUNK))
        .execute();
    }
    return { keys, bytes, evicted: victims.length };
  }

  async deleteExpired(now: number, limit: number): Promise<number> {
    const result = await this.db
      .deleteFrom('idempotency_keys')
      .where(
        sql<SqlBool>`(principal, operation, key) in (${this.db
          .selectFrom('idempotency_keys')
          .select(['principal', 'operation', 'key'])
          .where('expires_at', '<=', now)
          .orderBy('expires_at')
          .limit(limit)})`,
      )
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
