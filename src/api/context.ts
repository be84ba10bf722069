import type { Principal } from '../auth/index.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who is calling; set by the auth hook before any handler runs. */
    principal: Principal;
  }
}

/** Query string values as Fastify hands them: a string, or a list when repeated. */
export type Query = Record<string, string | string[] | undefined>;

export function one(query: Query, name: string): string | undefined {
  const v = query[name];
  return Array.isArray(v) ? v[v.length - 1] : v;
}
