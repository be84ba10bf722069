import { type Kysely, type Selectable, sql } from 'kysely';
import { toIso, toMillis } from './columns.js';
import { decodePageToken, encodePageToken, pageLimit } from './page-token.js';
import type {
  AttemptOutcome,
  ClaimedDelivery,
  DeliveryRecord,
  DeliveryState,
  NewDelivery,
  Page,
  PageRequest,
  PerWebhookLimit,
  WebhookRecord,
  WebhookStore,
} from './ports.js';
import { ResourceTable } from './resource-table.js';
import type { Database, WebhookDeliveriesTable, WebhooksTable } from './schema.js';

/** Rows per multi-row INSERT (SQLite binds at most 32766 parameters per statement). */
const CHUNK = 500;
/** Deliveries per batched UPDATE. */
const CLAIM_CHUNK = 200;

function webhookFromRow(row: Selectable<WebhooksTable>): WebhookRecord {
  return {
    id: row.id,
    project: row.project,
    name: row.name,
    url: row.url,
    events: JSON.parse(row.events) as string[],
    secret: row.secret,
    disabled: row.disabled === 1,
    createdAt: toIso(row.created_at),
    updatedAt: toIso(row.updated_at),
  };
}

function deliveryFromRow(row: Selectable<WebhookDeliveriesTable>): DeliveryRecord {
  const d: DeliveryRecord = {
    id: row.id,
    project: row.project,
    webhookId: row.webhook_id,
    webhookName: row.webhook_name,
    event: row.event,
    state: row.state as DeliveryState,
    attempts: row.attempts,
    createdAt: toIso(row.created_at),
  };
  if (row.finished_at === null) d.nextAttemptAt = toIso(row.next_attempt_at);
  else d.finishedAt = toIso(row.finished_at);
  if (row.last_status !== null) d.lastStatus = row.last_status;
  if (row.last_error !== null) d.lastError = row.last_error;
  if (row.run_id !== null) d.runId = row.run_id;
  if (row.trace_id !== null) d.traceId = row.trace_id;
  if (row.policy !== null) d.policy = row.policy;
  if (row.target_url !== null) d.targetUrl = row.target_url;
  return d;
}

export class KyselyWebhookStore implements WebhookStore {
  private readonly table: ResourceTable<'webhooks', WebhookRecord>;

  constructor(private readonly db: Kysely<Database>) {
    this.table = new ResourceTable(db, 'webhooks', webhookFromRow);
  }

  async upsert(
    webhook: Omit<WebhookRecord, 'createdAt' | 'updatedAt'>,
    now: number,
  ): Promise<{ webhook: WebhookRecord; created: boolean }> {
    const row = await this.db
      .insertInto('webhooks')
      .values({
        id: webhook.id,
        project: webhook.project,
        name: webhook.name,
        url: webhook.url,
        events: JSON.stringify(webhook.events),
        secret: webhook.secret,
        disabled: webhook.disabled ? 1 : 0,
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc) =>
        oc.columns(['project', 'name']).doUpdateSet((eb) => ({
          url: eb.ref('excluded.url'),
          events: eb.ref('excluded.events'),
          secret: eb.ref('excluded.secret'),
          disabled: eb.ref('excluded.disabled'),
          updated_at: eb.ref('excluded.updated_at'),
        })),
      )
      .returningAll()
      .executeTakeFirstOrThrow();
    return { webhook: webhookFromRow(row), created: row.id === webhook.id };
  }

  get(project: string, name: string): Promise<WebhookRecord | undefined> {
    return this.table.get(project, name);
  }

  async getByIds(ids: readonly string[]): Promise<WebhookRecord[]> {
    if (ids.length === 0) return [];
    const rows = await this.db
      .selectFrom('webhooks')
      .selectAll()
      .where('id', 'in', [...new Set(ids)])
      .execute();
    return rows.map(webhookFromRow);
  }

  list(project: string, page: PageRequest): Promise<Page<WebhookRecord>> {
    return this.table.list(project, page);
  }

  async listEnabled(project: string): Promise<WebhookRecord[]> {
    const rows = await this.db
      .selectFrom('webhooks')
      .selectAll()
      .where('project', '=', project)
      .where('disabled', '=', 0)
      .orderBy('name')
      .execute();
    return rows.map(webhookFromRow);
  }

  delete(project: string, name: string): Promise<boolean> {
    return this.table.delete(project, name);
  }

  async enqueue(deliveries: readonly NewDelivery[]): Promise<void> {
    const rows = deliveries.map((d) => {
      const at = toMillis(d.createdAt, 'createdAt');
      return {
        id: d.id,
        project: d.project,
        webhook_id: d.webhookId,
        webhook_name: d.webhookName,
        event: d.event,
        payload: d.payload,
        state: 'PENDING',
        attempts: 0,
        next_attempt_at: at,
        last_status: null,
        last_error: null,
        run_id: d.runId ?? null,
        trace_id: d.traceId ?? null,
        policy: d.policy ?? null,
        target_url: d.targetUrl ?? null,
        created_at: at,
        finished_at: null,
      };
    });
    for (let i = 0; i < rows.length; i += CHUNK) {
      await this.db
        .insertInto('webhook_deliveries')
        .values(rows.slice(i, i + CHUNK))
        .execute();
    }
  }

  async claimDue(
    now: number,
    limit: number,
    maxAttempts: number,
    hideUntil: number,
    perWebhook?: PerWebhookLimit,
  ): Promise<ClaimedDelivery[]> {
    const full = [...(perWebhook?.inFlight ?? [])]
      .filter(([, n]) => n >= (perWebhook?.max ?? Number.POSITIVE_INFINITY))
      .map(([id]) => id);
    let q = this.db
      .selectFrom('webhook_deliveries')
      .select(['id', 'webhook_id'])
      .where('finished_at', 'is', null)
      .where('next_attempt_at', '<=', now)
      .where('attempts', '<', maxAttempts)
      .orderBy('next_attempt_at')
      .orderBy('id')
      // With a per-webhook cap some candidates are passed over; read a few more.
      .limit(perWebhook === undefined ? limit : limit * 4);
    if (full.length > 0) q = q.where('webhook_id', 'not in', full);
    const taken = new Map(perWebhook?.inFlight ?? []);
    const due: { id: string }[] = [];
    for (const row of await q.execute()) {
      if (due.length >= limit) break;
      const n = taken.get(row.webhook_id) ?? 0;
      if (perWebhook !== undefined && n >= perWebhook.max) continue;
      taken.set(row.webhook_id, n + 1);
      due.push(row);
    }
    if (due.length === 0) return [];
    // The UPDATE repeats the due test, so of two claimers that read the same ids only one gets
    // each row (the other's condition fails once the first has committed). Two statements rather
    // than `IN (subquery LIMIT n)`: PostgreSQL may re-run such a subquery per row and then claim
    // more than `limit`.
    const rows = await this.db
      .updateTable('webhook_deliveries')
      .set((eb) => ({ attempts: eb('attempts', '+', 1), next_attempt_at: hideUntil }))
      .where(
        'id',
        'in',
        due.map((d) => d.id),
      )
      .where('finished_at', 'is', null)
      .where('next_attempt_at', '<=', now)
      .where('attempts', '<', maxAttempts)
      .returningAll()
      .execute();
    return rows
      .map((row) => ({ ...deliveryFromRow(row), payload: row.payload, attempt: row.attempts }))
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async failExhausted(now: number, maxAttempts: number, error: string): Promise<number> {
    const result = await this.db
      .updateTable('webhook_deliveries')
      .set({ state: 'FAILED', last_error: error, finished_at: now })
      .where('finished_at', 'is', null)
      .where('next_attempt_at', '<=', now)
      .where('attempts', '>=', maxAttempts)
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  async finishAttempt(
    id: string,
    attempt: number,
    outcome: AttemptOutcome,
    now: number,
  ): Promise<boolean> {
    const result = await this.db
      .updateTable('webhook_deliveries')
      .set({
        state: outcome.state,
        last_status: outcome.status ?? null,
        last_error: outcome.state === 'DELIVERED' ? null : outcome.error,
        ...(outcome.state === 'RETRYING'
          ? { next_attempt_at: outcome.nextAttemptAt }
          : { finished_at: now }),
      })
      .where('id', '=', id)
      .where('attempts', '=', attempt)
      .where('finished_at', 'is', null)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  async finishDelivered(
    delivered: readonly { id: string; attempt: number; status: number }[],
    now: number,
  ): Promise<string[]> {
    const recorded: string[] = [];
    for (let i = 0; i < delivered.length; i += CLAIM_CHUNK) {
      const chunk = delivered.slice(i, i + CLAIM_CHUNK);
      const rows = await this.db
        .updateTable('webhook_deliveries')
        .set({
          state: 'DELIVERED',
          last_status: sql<number>`case ${sql.join(
            chunk.map((d) => sql`when id = ${d.id} then cast(${d.status} as integer)`),
            sql` `,
          )} end`,
          last_error: null,
          finished_at: now,
        })
        .where('finished_at', 'is', null)
        .where((eb) =>
          eb.or(chunk.map((d) => eb.and([eb('id', '=', d.id), eb('attempts', '=', d.attempt)]))),
        )
        .returning('id')
        .execute();
      recorded.push(...rows.map((r) => r.id));
    }
    return recorded;
  }

  async listDeliveries(webhookId: string, page: PageRequest): Promise<Page<DeliveryRecord>> {
    const limit = pageLimit(page);
    const after = decodePageToken(page.pageToken);
    let q = this.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('webhook_id', '=', webhookId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit + 1);
    if (after !== undefined) {
      q = q.where((eb) => eb(eb.refTuple('created_at', 'id'), '<', eb.tuple(after.at, after.id)));
    }
    const rows = await q.execute();
    const items = rows.slice(0, limit);
    const last = items.at(-1);
    const out = items.map(deliveryFromRow);
    if (rows.length <= limit || last === undefined) return { items: out };
    return { items: out, nextPageToken: encodePageToken({ at: last.created_at, id: last.id }) };
  }

  async pruneFinished(before: number, limit: number): Promise<number> {
    const result = await this.db
      .deleteFrom('webhook_deliveries')
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('webhook_deliveries')
          .select('id')
          .where('finished_at', 'is not', null)
          .where('finished_at', '<', before)
          .limit(limit),
      )
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  async queueStats(): Promise<{ depth: number; oldestCreatedAt?: string }> {
    const row = await this.db
      .selectFrom('webhook_deliveries')
      .select((eb) => [
        eb.fn.countAll<number | string>().as('n'),
        eb.fn.min<number | null>('created_at').as('oldest'),
      ])
      .where('finished_at', 'is', null)
      .executeTakeFirst();
    const depth = Number(row?.n ?? 0);
    const oldest = row?.oldest;
    return oldest === null || oldest === undefined || depth === 0
      ? { depth }
      : { depth, oldestCreatedAt: toIso(Number(oldest)) };
  }
}
