import { type Expression, type SqlBool, sql } from 'kysely';
import type { StoreDialect } from './ports.js';

/** Column encodings shared by the repositories (see schema.ts for why times are epoch ms). */

export { toIso, toMillis, toMillisOrNull } from './times.js';

/**
 * JSON with object keys sorted at every level: a resource applied again with its keys in another
 * order is the same resource and must not move the generation.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return v;
    const sorted: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k];
    return sorted;
  });
}

/**
 * `labels` (a JSON object column) holds every `key` = `value` pair; undefined for none. The same
 * text for the traces list, the scores list and score aggregates, so they filter labels alike.
 * On PostgreSQL it is one containment test: the planner estimates a conjunction of `->>`
 * comparisons (0.5% each) as so selective that it reads every trace and sorts instead of walking
 * the start-time index, which made two labels on a million traces take seconds instead of a
 * millisecond.
 */
export function labelsMatch(
  dialect: StoreDialect,
  labels: Readonly<Record<string, string>> | undefined,
): Expression<SqlBool> | undefined {
  const pairs = Object.entries(labels ?? {});
  if (pairs.length === 0) return undefined;
  if (dialect === 'postgres') {
    return sql<SqlBool>`labels::jsonb @> ${JSON.stringify(Object.fromEntries(pairs))}::jsonb`;
  }
  // SQLite's `->>` reads a plain key directly; it cannot address a key with a double quote or
  // one starting with `$` (a path), which are looked up among the object's members instead.
  return sql<SqlBool>`${sql.join(
    pairs.map(([key, value]) =>
      key.includes('"') || key.startsWith('$')
        ? sql`exists (select 1 from json_each(labels) where key = ${key} and value = ${value})`
        : sql`(labels ->> ${key}) = ${value}`,
    ),
    sql` and `,
  )}`;
}
