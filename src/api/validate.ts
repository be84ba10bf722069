import type { z } from 'zod';
import { describeDetails, issuesToDetails } from '../core/index.js';
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
