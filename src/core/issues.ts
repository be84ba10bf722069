import type { z } from 'zod';
import type { ErrorDetail } from './errors.js';

/** Renders a path as `records[3].trajectory[0].type`. */
export function formatPath(prefix: string, path: readonly PropertyKey[]): string {
  let out = prefix;
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else out += out === '' ? String(seg) : `.${String(seg)}`;
  }
  return out === '' ? '(root)' : out;
}

/** zod issues → error details, one per field; unknown keys are named one by one. */
export function issuesToDetails(issues: readonly z.core.$ZodIssue[], prefix = ''): ErrorDetail[] {
  return issues.flatMap((issue) => {
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({
        path: formatPath(prefix, [...issue.path, key]),
        message: 'unknown field',
      }));
    }
    return [{ path: formatPath(prefix, issue.path), message: issue.message }];
  });
}

/** One line listing every detail, for messages. */
export function describeDetails(details: readonly ErrorDetail[]): string {
  return details.map((d) => `${d.path}: ${d.message}`).join('; ');
}

/** The details with repeats removed (the same path and message), in their first order. */
export function uniqueDetails(details: readonly ErrorDetail[]): ErrorDetail[] {
  const seen = new Set<string>();
  return details.filter((d) => {
    const key = `${d.path}\u0000${d.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/**
 * Each item of a list that `schema` accepts on its own, by index (undefined: refused), so the
 * good items of a list with a bad one can still be checked under their own index.
 */
export function eachValid<S extends z.ZodType>(
  list: unknown,
  schema: S,
): (z.infer<S> | undefined)[] {
  if (!Array.isArray(list)) return [];
  return list.map((item) => {
    const r = schema.safeParse(item);
    return r.success ? r.data : undefined;
  });
}
