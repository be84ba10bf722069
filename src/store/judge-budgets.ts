import type { Kysely } from 'kysely';
import type { JudgeBudgetStore } from './ports.js';
import type { Database } from './schema.js';

export class KyselyJudgeBudgetStore implements JudgeBudgetStore {
  constructor(private readonly db: Kysely<Database>) {}

  async add(project: string, policy: string, day: string, tokens: number): Promise<void> {
    // One upsert adding to the stored count, so replicas spending at once lose no tokens.
    await this.db
      .insertInto('judge_budgets')
      .values({ project, policy, day, tokens })
      .onConflict((oc) =>
        oc.columns(['project', 'policy', 'day']).doUpdateSet((eb) => ({
          tokens: eb('judge_budgets.tokens', '+', eb.ref('excluded.tokens')),
        })),
      )
      .execute();
  }

  async used(project: string, policy: string, day: string): Promise<number> {
    const row = await this.db
      .selectFrom('judge_budgets')
      .select('tokens')
      .where('project', '=', project)
      .where('policy', '=', policy)
      .where('day', '=', day)
      .executeTakeFirst();
    return Number(row?.tokens ?? 0);
  }
}
