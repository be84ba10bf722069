import type { Kysely, Selectable } from 'kysely';
import { canonicalJson, toIso } from './columns.js';
import { decodePageToken, encodePageToken, pageLimit } from './page-token.js';
import type { Page, PageRequest, PolicyRecord, PolicyStore } from './ports.js';
import type { Database, PoliciesTable } from './schema.js';

function fromRow(row: Selectable<PoliciesTable>): PolicyRecord {
  return {
    project: row.project,
    name: row.name,
    resource: JSON.parse(row.resource) as Record<string, unknown>,
    generation: row.generation,
    createdAt: toIso(row.created_at),
    updatedAt: toIso(row.updated_at),
  };
}

export class KyselyPolicyStore implements PolicyStore {
  constructor(private readonly db: Kysely<Database>) {}

  async upsert(
    project: string,
    name: string,
    resource: Record<string, unknown>,
    now: number,
  ): Promise<{ policy: PolicyRecord; created: boolean }> {
    const text = canonicalJson(resource);
    // Insert-if-absent, then update: unlike one upsert, this tells a create from a replace on
    // both dialects. A delete between the two statements sends us round again.
    for (;;) {
      const inserted = await this.db
        .insertInto('policies')
        .values({ project, name, resource: text, generation: 1, created_at: now, updated_at: now })
        .onConflict((oc) => oc.columns(['project', 'name']).doNothing())
        .returningAll()
        .executeTakeFirst();
      if (inserted !== undefined) return { policy: fromRow(inserted), created: true };
      const updated = await this.db
        .updateTable('policies')
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
        .where('project', '=', project)
        .where('name', '=', name)
        .returningAll()
        .executeTakeFirst();
      if (updated !== undefined) return { policy: fromRow(updated), created: false };
    }
  }

  async get(project: string, name: string): Promise<PolicyRecord | undefined> {
    const row = await this.db
      .selectFrom('policies')
      .selectAll()
      .where('project', '=', project)
      .where('name', '=', name)
      .executeTakeFirst();
    return row === undefined ? undefined : fromRow(row);
  }

  async list(project: string, page: PageRequest): Promise<Page<PolicyRecord>> {
    const limit = pageLimit(page);
    const after = decodePageToken(page.pageToken);
    let q = this.db
      .selectFrom('policies')
      .selectAll()
      .where('project', '=', project)
      .orderBy('name')
      .limit(limit + 1);
    if (after !== undefined) q = q.where('name', '>', after.id);
    const rows = await q.execute();
    const items = rows.slice(0, limit);
    const last = items.at(-1);
    const out = items.map(fromRow);
    if (rows.length <= limit || last === undefined) return { items: out };
    return { items: out, nextPageToken: encodePageToken({ at: 0, id: last.name }) };
  }

  async listAll(project: string): Promise<PolicyRecord[]> {
    const rows = await this.db
      .selectFrom('policies')
      .selectAll()
      .where('project', '=', project)
      .orderBy('name')
      .execute();
    return rows.map(fromRow);
  }

  async versions(): Promise<{ project: string; name: string; generation: number }[]> {
    return this.db
      .selectFrom('policies')
      .select(['project', 'name', 'generation'])
      .orderBy('project')
      .orderBy('name')
      .execute();
  }

  async projectsWithPolicies(projects: readonly string[]): Promise<Set<string>> {
    if (projects.length === 0) return new Set();
    const rows = await this.db
      .selectFrom('policies')
      .select('project')
      .distinct()
      .where('project', 'in', [...new Set(projects)])
      .execute();
    return new Set(rows.map((r) => r.project));
  }

  async delete(project: string, name: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('policies')
      .where('project', '=', project)
      .where('name', '=', name)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }
}
