import type { Kysely, Selectable } from 'kysely';
import { canonicalJson } from './columns.js';
import {
  decodePageToken,
  decodeProjectPageToken,
  encodePageToken,
  pageLimit,
} from './page-token.js';
import type { Page, PageRequest } from './ports.js';
import type { Database, PoliciesTable, SourcesTable } from './schema.js';

/** The tables of declarative resources: each keyed by (project, name). */
type ResourceTableName = 'policies' | 'guard_policies' | 'sources' | 'webhooks';

/**
 * Any of them typed as the key the shared statements read, under the one name `resource` (the
 * statements name the real table; the rows they return are that table's own).
 */
type Keyed = { resource: { project: string; name: string } };

/** The tables holding the resource as a document, with a generation that moves on change. */
type Versioned = { resource: PoliciesTable & Partial<Pick<SourcesTable, 'paused'>> };

/**
 * Get, list and delete by name of one resource table (the ResourceRows port), shared by the
 * policy, source and webhook stores. A list is ordered by name within a project, or, with
 * `acrossProjects`, by (project, name) over all projects when none is given.
 */
export class ResourceTable<T extends ResourceTableName, R> {
  private readonly db: Kysely<Keyed>;
  private readonly from: 'resource';

  constructor(
    db: Kysely<Database>,
    table: T,
    private readonly fromRow: (row: Selectable<Database[T]>) => R,
    private readonly acrossProjects = false,
  ) {
    this.db = db as unknown as Kysely<Keyed>;
    this.from = table as unknown as 'resource';
  }

  private rows(rows: readonly unknown[]): R[] {
    return rows.map((row) => this.fromRow(row as Selectable<Database[T]>));
  }

  async get(project: string, name: string): Promise<R | undefined> {
    const row = await this.db
      .selectFrom(this.from)
      .selectAll()
      .where('project', '=', project)
      .where('name', '=', name)
      .executeTakeFirst();
    return row === undefined ? undefined : this.rows([row])[0];
  }

  async list(project: string | undefined, page: PageRequest): Promise<Page<R>> {
    const limit = pageLimit(page);
    let q = this.db
      .selectFrom(this.from)
      .selectAll()
      .$if(this.acrossProjects, (qb) => qb.orderBy('project'))
      .orderBy('name')
      .limit(limit + 1);
    if (project !== undefined) q = q.where('project', '=', project);
    if (this.acrossProjects) {
      const after = decodeProjectPageToken(page.pageToken);
      if (after !== undefined) {
        q = q.where((eb) =>
          eb(eb.refTuple('project', 'name'), '>', eb.tuple(after.project, after.id)),
        );
      }
    } else {
      const after = decodePageToken(page.pageToken);
      if (after !== undefined) q = q.where('name', '>', after.id);
    }
    const rows = await q.execute();
    const items = rows.slice(0, limit);
    const last = items.at(-1);
    const out = this.rows(items);
    if (rows.length <= limit || last === undefined) return { items: out };
    const at = { at: 0, id: last.name };
    return {
      items: out,
      nextPageToken: encodePageToken(this.acrossProjects ? { ...at, project: last.project } : at),
    };
  }

  /** Every row of a project (or of every project), in list order. */
  async all(project?: string): Promise<R[]> {
    const rows = await this.db
      .selectFrom(this.from)
      .selectAll()
      .$if(project === undefined, (qb) => qb.orderBy('project'))
      .$if(project !== undefined, (qb) => qb.where('project', '=', project as string))
      .orderBy('name')
      .execute();
    return this.rows(rows);
  }

  async delete(project: string, name: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom(this.from)
      .where('project', '=', project)
      .where('name', '=', name)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }
}

/**
 * Creates the resource document, or replaces the one with the same (project, name); the
 * generation and `updated_at` move only when the document differs (key order aside: it is stored
 * with its keys sorted). `fresh` holds the columns a created row starts with beyond these.
 */
export async function upsertDocument<T extends 'policies' | 'guard_policies' | 'sources'>(
  kysely: Kysely<Database>,
  table: T,
  key: { project: string; name: string },
  resource: Record<string, unknown>,
  now: number,
  fresh: Partial<Pick<SourcesTable, 'paused'>> = {},
): Promise<{ row: Selectable<Database[T]>; created: boolean }> {
  const db = kysely as unknown as Kysely<Versioned>;
  const from = table as unknown as 'resource';
  const text = canonicalJson(resource);
  // Insert-if-absent, then update: unlike one upsert, this tells a create from a replace on
  // both dialects. A delete between the two statements sends us round again.
  for (;;) {
    const inserted = await db
      .insertInto(from)
      .values({ ...key, resource: text, generation: 1, ...fresh, created_at: now, updated_at: now })
      .onConflict((oc) => oc.columns(['project', 'name']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (inserted !== undefined) {
      return { row: inserted as Selectable<Database[T]>, created: true };
    }
    const updated = await db
      .updateTable(from)
      .set((eb) => ({
        resource: text,
        generation: eb
          .case()
          .when('resource', '=', text)
          .then(eb.ref('generation'))
          .else(eb('generation', '+', 1))
          .end(),
        updated_at: eb
          .case()
          .when('resource', '=', text)
          .then(eb.ref('updated_at'))
          .else(now)
          .end(),
      }))
      .where('project', '=', key.project)
      .where('name', '=', key.name)
      .returningAll()
      .executeTakeFirst();
    if (updated !== undefined) return { row: updated as Selectable<Database[T]>, created: false };
  }
}
