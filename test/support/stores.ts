import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { Clock } from '../../src/core/index.js';
import { openStore, type Store, type StoreConfig } from '../../src/store/index.js';

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

/** A new schema on a PostgreSQL server: `url` selects it (as search_path), `drop` removes it. */
export interface PgSchema {
  name: string;
  url: string;
  /** A connection of its own to the server (on the default search_path unless set). */
  admin: pg.Client;
  drop(): Promise<void>;
}

export async function freshPgSchema(baseUrl: string): Promise<PgSchema> {
  const name = `ts_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  await admin.query(`create schema ${name}`);
  const url = new URL(baseUrl);
  url.searchParams.set('options', `-c search_path=${name}`);
  return {
    name,
    url: url.toString(),
    admin,
    async drop() {
      await admin.query(`drop schema ${name} cascade`);
      await admin.end();
    },
  };
}

export function storeVariants(): StoreVariant[] {
  const variants: StoreVariant[] = [
    { name: 'sqlite', open: async () => ({ overrides: {}, dispose: async () => undefined }) },
  ];
  if (PG_URL !== undefined && PG_URL !== '') {
    variants.push({
      name: 'postgres',
      async open() {
        const schema = await freshPgSchema(PG_URL);
        return {
          overrides: { store: { driver: 'postgres', url: schema.url, pool_size: 4 } },
          dispose: () => schema.drop(),
        };
      },
    });
  }
  return variants;
}

/** One empty database: `open` may be called again for another connection to it. */
export interface StoreTarget {
  open(clock: Clock): Promise<Store>;
  /** Drops the database (the stores opened on it are the caller's to close first). */
  cleanup(): Promise<void>;
}

/** Makes an empty database per test (store contract suites take one per dialect). */
export type StoreHarness = () => Promise<StoreTarget>;

/** SQLite in a new temp dir named `tmpPrefix…`. */
export function sqliteHarness(tmpPrefix: string): StoreHarness {
  return async () => {
    const root = mkdtempSync(join(tmpdir(), tmpPrefix));
    return {
      open: (clock) => openStore({ driver: 'sqlite' }, { clock, dataDir: join(root, 'data') }),
      cleanup: async () => rmSync(root, { recursive: true, force: true }),
    };
  };
}

/** A new schema on the PostgreSQL server at `baseUrl`. */
export function pgHarness(baseUrl: string, poolSize = 8): StoreHarness {
  return async () => {
    const schema = await freshPgSchema(baseUrl);
    return {
      open: (clock) =>
        openStore({ driver: 'postgres', url: schema.url, pool_size: poolSize }, { clock }),
      cleanup: () => schema.drop(),
    };
  };
}

/** A variant's empty database, with a new temp data dir named `tmpPrefix…` (SQLite's file). */
export async function variantTarget(
  variant: StoreVariant,
  tmpPrefix: string,
): Promise<StoreTarget> {
  const dataDir = mkdtempSync(join(tmpdir(), tmpPrefix));
  const opened = await variant.open();
  const config = (opened.overrides.store as StoreConfig | undefined) ?? { driver: 'sqlite' };
  return {
    open: (clock) => openStore(config, { clock, dataDir }),
    async cleanup() {
      await opened.dispose();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
