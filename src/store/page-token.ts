import { CoreErrors } from '../core/index.js';
import type { PageRequest } from './ports.js';

/** Keyset paging: a token is the (time, id) of the last item served, opaque to callers. */

export const MAX_PAGE_SIZE = 1000;

export interface PagePosition {
  at: number;
  id: string;
}

export function encodePageToken(pos: PagePosition): string {
  return Buffer.from(JSON.stringify([pos.at, pos.id])).toString('base64url');
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
    parsed.length === 2 &&
    Number.isSafeInteger(parsed[0]) &&
    typeof parsed[1] === 'string'
  ) {
    return { at: parsed[0] as number, id: parsed[1] };
  }
  throw CoreErrors.INVALID_ARGUMENT('page_token is not a token this server issued', {
    details: [{ path: 'page_token', message: 'malformed page token' }],
  });
}

export function pageLimit(page: PageRequest): number {
  if (!Number.isInteger(page.pageSize) || page.pageSize < 1) {
    throw CoreErrors.INVALID_ARGUMENT('page_size must be a positive integer', {
      details: [{ path: 'page_size', message: 'must be a positive integer' }],
    });
  }
  return Math.min(page.pageSize, MAX_PAGE_SIZE);
}
