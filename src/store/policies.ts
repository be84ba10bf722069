import type { Kysely, Selectable } from 'kysely';
import { toIso } from './columns.js';
import type { Page, PageRequest, PolicyRecord, PolicyStore } from './ports.js';
import { ResourceTable, upsertDocument } from './resource-table.js';
import type { Database, PoliciesTable } from './schema.js';

/** A policy row as its record (guard policies share the columns). */
export function fromRow(row: Selectable<PoliciesTable>): PolicyRecord {
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
  private readonly table: ResourceTable<'policies', PolicyRecord>;

  constructor(private readonly db: Kysely<Database>) {
    this.table = new ResourceTable(db, 'policies', fromRow);
  }

  async upsert(
    project: string,
    name: string,
    resource: Record<string, unknown>,
    now: number,
  ): Promise<{ policy: PolicyRecord; created: boolean }> {
    const { row, created } = await upsertDocument(
      this.db,
      'policies',
      { project, name },
      resource,
      now,
    );
    return { policy: fromRow(row), created };
  }

  get(project: string, name: string): Promise<PolicyRecord | undefined> {
    return this.table.get(project, name);
  }

  list(project: string, page: PageRequest): Promise<Page<PolicyRecord>> {
    return this.table.list(project, page);
  }

  listAll(project: string): Promise<PolicyRecord[]> {
    return this.table.all(project);
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

  delete(project: string, name: string): Promise<boolean> {
    return this.table.delete(project, name);
  }
}
