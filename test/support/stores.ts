import { randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * The databases an integration test runs on: SQLite always, PostgreSQL when TOUCHSTONE_TEST_PG
 * names a server. Each PostgreSQL use gets a fresh schema, dropped by `dispose`.
 */
export interface StoreVariant {
  name: 'sqlite' | 'postgres';
  /** Config overrides selecting the store (none for SQLite: the data dir's embedded file). */
  open(): Promise<{ overrides: Record<string, unknown>; dispose(): Promise<void> }>;
}

export const PG_URL = process.env.TOUCHSTONE_TEST_PG;

export function storeVariants(): StoreVariant[] {
  const variants: StoreVariant[] = [
    { name: 'sqlite', open: async () => ({ overrides: {}, dispose: async () => undefined }) },
  ];
  if (PG_URL !== undefined && PG_URL !== '') {
    variants.push({
      name: 'postgres',
      async open() {
        const schema = `ts_t_${randomBytes(6).toString('hex')}`;
        const admin = new pg.Client({ connectionString: PG_URL });
        await admin.connect();
        await admin.query(`create schema ${schema}`);
        const url = new URL(PG_URL);
        url.searchParams.set('options', `-c search_path=${schema}`);
        return {
          overrides: { store: { driver: 'postgres', url: url.toString(), pool_size: 4 } },
          async dispose() {
            await admin.query(`drop schema ${schema} cascade`);
            await admin.end();
          },
        };
      },
    });
  }
  return variants;
}
