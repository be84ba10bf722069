import { type Expression, type SqlBool, sql } from 'kysely';
import { CoreErrors } from '../core/index.js';
import type { StoreDialect } from './ports.js';

/** Column encodings shared by the repositories (see schema.ts for why times are epoch ms). */

/** RFC 3339 → epoch ms; `field` names the argument in the error. */
export function toMillis(iso: string, field: string): number {
  const ms = Date.parse(iso);
  if (!Number.isFinite(ms)) {
    throw CoreErrors.INVALID_ARGUMENT(`${field} is not an RFC 3339 time`, {
      details: [{ path: field, message: 'expected an RFC 3339 time' }],
    });
  }
  return ms;
}

export function toMillisOrNull(iso: string | undefined, field: string): number | null {
  return iso === undefined ? null : toMillis(iso, field);
}

export function toIso(ms: number): string {
  return new Date(ms).toISOString();
}

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
 * `labels` (a JSON object column) has `key` = `value`; the same text as the traces list, so the
 * scores list filters labels the same way.
 */
export function labelEquals(
  dialect: StoreDialect,
  key: string,
  value: string,
): Expression<SqlBool> {
  return dialect === 'postgres'
    ? sql<SqlBool>`(labels::jsonb ->> ${key}) = ${value}`
    : sql<SqlBool>`json_extract(labels, ${`$."${key.replaceAll('"', '""')}"`}) = ${value}`;
}
