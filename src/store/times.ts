import { CoreErrors } from '../core/index.js';

/**
 * Times as the columns hold them (epoch ms, see schema.ts) and as the API gives them (RFC 3339).
 * No query builder here: a worker thread encoding rows (append-encoding.ts) loads this file.
 */

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
