import { CoreErrors } from '../core/index.js';
import type { PageRequest } from './ports.js';

/**
 * Keyset paging: a token is the (time, id) of the last item served, opaque to callers, plus the
 * project where the order spans projects (the same id can exist in two).
 */

export const MAX_PAGE_SIZE = 1000;

export interface PagePosition {
  at: number;
  id: string;
  project?: string;
}

export function encodePageToken(pos: PagePosition): string {
  const parts = pos.project === undefined ? [pos.at, pos.id] : [pos.at, pos.id, pos.project];
  return Buffer.from(JSON.stringify(parts)).toString('base64url');
}

function malformed(): Error {
  return CoreErrors.INVALID_ARGUMENT('page_token is not a token this server issued', {
    details: [{ path: 'page_token', message: 'malformed page token' }],
  });
}

export function decodePageToken(token: string | undefined): PagePosition | undefined {
  if (token === undefined || token === '') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  if (
    Array.isArray(parsed) &&
    (parsed.length === 2 || (parsed.length === 3 && typeof parsed[2] === 'string')) &&
    Number.isSafeInteger(parsed[0]) &&
    typeof parsed[1] === 'string'
  ) {
    const pos: PagePosition = { at: parsed[0] as number, id: parsed[1] };
    if (parsed.length === 3) pos.project = parsed[2] as string;
    return pos;
  }
  throw malformed();
}

/** A token of a list ordered across projects: its project part is required. */
export function decodeProjectPageToken(
  token: string | undefined,
): Required<PagePosition> | undefined {
  const pos = decodePageToken(token);
  if (pos === undefined) return undefined;
  if (pos.project === undefined) throw malformed();
  return { at: pos.at, id: pos.id, project: pos.project };
}

export function pageLimit(page: PageRequest): number {
  if (!Number.isInteger(page.pageSize) || page.pageSize < 1) {
    throw CoreErrors.INVALID_ARGUMENT('page_size must be a positive integer', {
      details: [{ path: 'page_size', message: 'must be a positive integer' }],
    });
  }
  return Math.min(page.pageSize, MAX_PAGE_SIZE);
}
