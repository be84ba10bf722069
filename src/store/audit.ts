import type { Kysely, Selectable } from 'kysely';
import { toIso, toMillis } from './columns.js';
import { decodePageToken, encodePageToken, pageLimit } from './page-token.js';
import type {
  AuditEntry,
  AuditFilter,
  AuditOutcome,
  AuditPrincipalKind,
  AuditStore,
  Page,
  PageRequest,
} from './ports.js';
import type { AuditEntriesTable, Database } from './schema.js';

function fromRow(row: Selectable<AuditEntriesTable>): AuditEntry {
  return {
    id: row.id,
    at: toIso(Number(row.at)),
    principal: row.principal,
    principalKind: row.principal_kind as AuditPrincipalKind,
    action: row.action,
    resource: row.resource,
    ...(row.project === '' ? {} : { project: row.project }),
    outcome: row.outcome as AuditOutcome,
    status: row.status,
    ...(row.code === null ? {} : { code: row.code }),
    requestId: row.request_id,
  };
}

export class KyselyAuditStore implements AuditStore {
  constructor(private readonly db: Kysely<Database>) {}

  async append(entries: readonly AuditEntry[]): Promise<void> {
    if (entries.length === 0) return;
    await this.db
      .insertInto('audit_entries')
      .values(
        entries.map((e) => ({
          id: e.id,
          at: toMillis(e.at, 'at'),
          principal: e.principal,
          principal_kind: e.principalKind,
          action: e.action,
          resource: e.resource,
          project: e.project ?? '',
          outcome: e.outcome,
          status: e.status,
          code: e.code ?? null,
          request_id: e.requestId,
        })),
      )
      .execute();
  }

  async list(filter: AuditFilter, page: PageRequest): Promise<Page<AuditEntry>> {
    const limit = pageLimit(page);
    const after = decodePageToken(page.pageToken);
    let query = this.db
      .selectFrom('audit_entries')
      .selectAll()
      .orderBy('at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit + 1);
    const { project } = filter;
    if (project !== undefined) {
      query = filter.orNoProject
        ? query.where('project', 'in', [project, ''])
        : query.where('project', '=', project);
    }
    if (filter.principal !== undefined) query = query.where('principal', '=', filter.principal);
    if (filter.action !== undefined) query = query.where('action', '=', filter.action);
    if (filter.outcome !== undefined) query = query.where('outcome', '=', filter.outcome);
    if (filter.since !== undefined)
      query = query.where('at', '>=', toMillis(filter.since, 'since'));
    if (filter.until !== undefined) query = query.where('at', '<', toMillis(filter.until, 'until'));
    if (after !== undefined) {
      query = query.where((eb) => eb(eb.refTuple('at', 'id'), '<', eb.tuple(after.at, after.id)));
    }
    const rows = await query.execute();
    const items = rows.slice(0, limit);
    const last = items.at(-1);
    if (rows.length <= limit || last === undefined) return { items: items.map(fromRow) };
    return {
      items: items.map(fromRow),
      nextPageToken: encodePageToken({ at: Number(last.at), id: last.id }),
    };
  }

  async deleteBefore(before: number, limit: number): Promise<number> {
    const result = await this.db
      .deleteFrom('audit_entries')
      .where('id', 'in', (qb) =>
        qb
          .selectFrom('audit_entries')
          .select('id')
          .where('at', '<', before)
          .orderBy('at')
          .limit(limit),
      )
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
