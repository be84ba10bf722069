import type { Kysely } from 'kysely';
import { fromRow } from './policies.js';
import type { GuardPolicyRecord, GuardPolicyStore, Page, PageRequest } from './ports.js';
import { ResourceTable, upsertDocument } from './resource-table.js';
import type { Database } from './schema.js';

export class KyselyGuardPolicyStore implements GuardPolicyStore {
  private readonly table: ResourceTable<'guard_policies', GuardPolicyRecord>;

  constructor(private readonly db: Kysely<Database>) {
    this.table = new ResourceTable(db, 'guard_policies', fromRow);
  }

  async upsert(
    project: string,
    name: string,
    resource: Record<string, unknown>,
    now: number,
  ): Promise<{ policy: GuardPolicyRecord; created: boolean }> {
    const key = { project, name };
    const { row, created } = await upsertDocument(this.db, 'guard_policies', key, resource, now);
    return { policy: fromRow(row), created };
  }

  get(project: string, name: string): Promise<GuardPolicyRecord | undefined> {
    return this.table.get(project, name);
  }

  list(project: string, page: PageRequest): Promise<Page<GuardPolicyRecord>> {
    return this.table.list(project, page);
  }

  delete(project: string, name: string): Promise<boolean> {
    return this.table.delete(project, name);
  }
}
