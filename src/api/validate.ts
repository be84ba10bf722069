import { z } from 'zod';
import { describeDetails, issuesToDetails } from '../core/index.js';
import { one, type Query } from './context.js';
import { ApiErrors } from './error-codes.js';

/** Parses a request part with a zod schema; every problem is reported with its path. */
export function parse<S extends z.ZodType>(schema: S, value: unknown, where = ''): z.infer<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const details = issuesToDetails(result.error.issues, where);
  throw ApiErrors.BODY_INVALID(`invalid request: ${describeDetails(details)}`, { details });
}

export const PAGE_SIZE_DEFAULT = 50;
export const PAGE_SIZE_MAX = 1000;

export const PageQuerySchema = z.object({
  project: z.string().min(1).optional(),
  page_size: z.coerce.number().int().min(1).max(PAGE_SIZE_MAX).default(PAGE_SIZE_DEFAULT),
  page_token: z.string().optional(),
});

/** `project`, `page_size`, `page_token` of a resource list. */
export function pageOf(query: Query) {
  const q = parse(PageQuerySchema, {
    project: one(query, 'project'),
    page_size: one(query, 'page_size'),
    page_token: one(query, 'page_token'),
  });
  return {
    project: q.project,
    page: {
      pageSize: q.page_size,
      ...(q.page_token === undefined ? {} : { pageToken: q.page_token }),
    },
  };
}

export const ApplyQuerySchema = z.object({
  project: z.string().min(1).optional(),
  validate_only: z.enum(['true', 'false']).optional(),
});

/** `project` and `validate_only` of an apply (DESIGN §5). */
export function applyOptions(query: Query): { project?: string; validateOnly: boolean } {
  const q = parse(ApplyQuerySchema, {
    project: one(query, 'project'),
    validate_only: one(query, 'validate_only'),
  });
  return {
    ...(q.project === undefined ? {} : { project: q.project }),
    validateOnly: q.validate_only === 'true',
  };
}

/**
 * Parses a query string with a strict object schema (the last value of a repeated parameter);
 * parameters it does not know are refused by name, except the repeatable ones in `repeatable`,
 * which the caller reads itself.
 */
export function parseQuery<S extends z.ZodObject>(
  schema: S,
  query: Query,
  repeatable: readonly string[] = [],
): z.infer<S> {
  const unknown = Object.keys(query).filter((k) => !repeatable.includes(k) && !(k in schema.shape));
  if (unknown.length > 0) {
    throw ApiErrors.BODY_INVALID(`unknown query parameter ${unknown.join(', ')}`, {
      details: unknown.map((k) => ({ path: k, message: 'unknown query parameter' })),
    });
  }
  return parse(
    schema,
    Object.fromEntries(Object.keys(schema.shape).map((k) => [k, one(query, k)])),
  );
}
