import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AuditTrail } from '../../auth/index.js';
import { one, type Query } from '../context.js';
import { PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, parse } from '../validate.js';

export const AuditListQuerySchema = z.object({
  page_size: z.coerce.number().int().min(1).max(PAGE_SIZE_MAX).default(PAGE_SIZE_DEFAULT),
  page_token: z.string().optional(),
  project: z.string().min(1).optional(),
  /** A principal as entries name it: a key id or `<issuer>#<subject>`. */
  principal: z.string().min(1).optional(),
  /** Method and route, e.g. `POST /v1alpha1/policies`. */
  action: z.string().min(1).optional(),
  outcome: z.enum(['ok', 'denied', 'failed']).optional(),
  since: z.iso.datetime({ offset: true }).optional(),
  until: z.iso.datetime({ offset: true }).optional(),
});

/** `GET /v1alpha1/audit`: the audit trail, newest first (admins, their project's). */
export async function auditRoutes(
  app: FastifyInstance,
  { audit }: { audit: AuditTrail },
): Promise<void> {
  app.get('/v1alpha1/audit', async (request) => {
    const query = request.query as Query;
    const q = parse(
      AuditListQuerySchema,
      Object.fromEntries(Object.keys(AuditListQuerySchema.shape).map((k) => [k, one(query, k)])),
    );
    const { page_size, page_token, ...filter } = q;
    const defined = Object.fromEntries(Object.entries(filter).filter(([, v]) => v !== undefined));
    const result = await audit.list(request.principal, defined, {
      pageSize: page_size,
      ...(page_token === undefined ? {} : { pageToken: page_token }),
    });
    return {
      entries: result.items,
      ...(result.nextPageToken === undefined ? {} : { next_page_token: result.nextPageToken }),
    };
  });
}
