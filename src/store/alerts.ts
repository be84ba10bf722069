import { CompiledQuery, type Kysely, type Selectable } from 'kysely';
import type {
  AlertState,
  AlertStore,
  AlertTransition,
  MetricPoint,
  StoreDialect,
} from './ports.js';
import type { AlertStatesTable, Database } from './schema.js';

/** Rows per multi-row INSERT (SQLite binds at most 32766 parameters per statement). */
const CHUNK = 1000;

/** First half of the advisory lock key of alert states ('TSAL'); the second hashes the key. */
const ALERT_LOCK_CLASS = 0x5453414c;

function stateFromRow(row: Selectable<AlertStatesTable>): AlertState {
  return {
    project: row.project,
    policy: row.policy,
    metric: row.metric,
    firing: row.firing === 1,
    mean: row.mean,
    n: row.n,
    changedAt: row.changed_at,
  };
}

export class KyselyAlertStore implements AlertStore {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: StoreDialect,
  ) {}

  async addPoints(points: readonly MetricPoint[]): Promise<void> {
    for (let i = 0; i < points.length; i += CHUNK) {
      await this.db
        .insertInto('metric_points')
        .values(
          points.slice(i, i + CHUNK).map((p) => ({
            project: p.project,
            policy: p.policy,
            metric: p.metric,
            at: p.at,
            value: p.value,
          })),
        )
        .execute();
    }
  }

  async window(
    project: string,
    policy: string,
    metric: string,
    since: number,
  ): Promise<{ mean: number; n: number }> {
    const row = await this.db
      .selectFrom('metric_points')
      .select((eb) => [
        eb.fn.avg<number | string | null>('value').as('mean'),
        eb.fn.countAll<number | string>().as('n'),
      ])
      .where('project', '=', project)
      .where('policy', '=', policy)
      .where('metric', '=', metric)
      .where('at', '>=', since)
      .executeTakeFirst();
    const n = Number(row?.n ?? 0);
    return { mean: n === 0 ? 0 : Number(row?.mean ?? 0), n };
  }

  async lockState(
    project: string,
    policy: string,
    metric: string,
  ): Promise<AlertState | undefined> {
    const q = this.db
      .selectFrom('alert_states')
      .selectAll()
      .where('project', '=', project)
      .where('policy', '=', policy)
      .where('metric', '=', metric);
    // SQLite has no row locks; its transactions take the write lock at BEGIN (IMMEDIATE), so
    // they are serialized already.
    if (this.dialect !== 'postgres') {
      const row = await q.executeTakeFirst();
      return row === undefined ? undefined : stateFromRow(row);
    }
    const row = await q.forUpdate().executeTakeFirst();
    if (row !== undefined) return stateFromRow(row);
    // No row to lock before the first state is saved: a transaction-scoped advisory lock on the
    // key serializes the first transition instead; the read after it sees a winner's row.
    await this.db.executeQuery(
      CompiledQuery.raw(
        "select pg_advisory_xact_lock($1, hashtext(coalesce(current_schema(), '') || $2))",
        [ALERT_LOCK_CLASS, JSON.stringify([project, policy, metric])],
      ),
    );
    const after = await q.forUpdate().executeTakeFirst();
    return after === undefined ? undefined : stateFromRow(after);
  }

  async saveState(state: AlertState): Promise<void> {
    await this.db
      .insertInto('alert_states')
      .values({
        project: state.project,
        policy: state.policy,
        metric: state.metric,
        firing: state.firing ? 1 : 0,
        mean: state.mean,
        n: state.n,
        changed_at: state.changedAt,
      })
      .onConflict((oc) =>
        oc.columns(['project', 'policy', 'metric']).doUpdateSet((eb) => ({
          firing: eb.ref('excluded.firing'),
          mean: eb.ref('excluded.mean'),
          n: eb.ref('excluded.n'),
          changed_at: eb.ref('excluded.changed_at'),
        })),
      )
      .execute();
  }

  async states(): Promise<AlertState[]> {
    const rows = await this.db
      .selectFrom('alert_states')
      .selectAll()
      .orderBy('project')
      .orderBy('policy')
      .orderBy('metric')
      .execute();
    return rows.map(stateFromRow);
  }

  async statesOf(project: string): Promise<AlertState[]> {
    const rows = await this.db
      .selectFrom('alert_states')
      .selectAll()
      .where('project', '=', project)
      .orderBy('policy')
      .orderBy('metric')
      .execute();
    return rows.map(stateFromRow);
  }

  async addTransition(t: AlertTransition): Promise<void> {
    await this.db
      .insertInto('alert_transitions')
      .values({
        project: t.project,
        policy: t.policy,
        metric: t.metric,
        at: t.at,
        firing: t.firing ? 1 : 0,
        mean: t.mean,
        n: t.n,
        below: t.below,
      })
      .execute();
  }

  async transitions(
    project: string,
    filter: { policy?: string; since: number; until: number },
    limit: number,
  ): Promise<AlertTransition[]> {
    let q = this.db
      .selectFrom('alert_transitions')
      .selectAll()
      .where('project', '=', project)
      .where('at', '>=', filter.since)
      .where('at', '<', filter.until)
      .orderBy('at')
      .orderBy('policy')
      .orderBy('metric')
      .limit(limit);
    if (filter.policy !== undefined) q = q.where('policy', '=', filter.policy);
    const rows = await q.execute();
    return rows.map((r) => ({
      project: r.project,
      policy: r.policy,
      metric: r.metric,
      at: r.at,
      firing: r.firing === 1,
      mean: r.mean,
      n: r.n,
      below: r.below,
    }));
  }

  async trimWindow(
    project: string,
    policy: string,
    metric: string,
    before: number,
  ): Promise<number> {
    const result = await this.db
      .deleteFrom('metric_points')
      .where('project', '=', project)
      .where('policy', '=', policy)
      .where('metric', '=', metric)
      .where('at', '<', before)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
