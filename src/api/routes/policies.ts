import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { PolicyService } from '../../policies/index.js';
import { one, type Query } from '../context.js';
import { applyOptions, pageOf, parse } from '../validate.js';

export const RescoreBodySchema = z.strictObject({
  since: z.iso.datetime({ offset: true }),
});

/**
 * `/v1alpha1/policies`: apply (`validate_only`), list, get, delete, `:rescore` with
 * `{"since": RFC 3339}` (the `::` escape: see webhooks.ts).
 */
export async function policyRoutes(
  app: FastifyInstance,
  { policies }: { policies: PolicyService },
): Promise<void> {
  app.post('/v1alpha1/policies', { config: { idempotency: 'policies.apply' } }, async (request) =>
    policies.apply(request.principal, request.body, applyOptions(request.query as Query)),
  );

  app.get('/v1alpha1/policies', async (request) => {
    const { project, page } = pageOf(request.query as Query);
    const result = await policies.list(request.principal, project, page);
    return {
      policies: result.items,
      ...(result.nextPageToken === undefined ? {} : { next_page_token: result.nextPageToken }),
    };
  });

  app.get('/v1alpha1/policies/:name', async (request) => {
    const { name } = request.params as { name: string };
    return policies.get(request.principal, one(request.query as Query, 'project'), name);
  });

  app.delete('/v1alpha1/policies/:name', async (request) => {
    const { name } = request.params as { name: string };
    return policies.delete(request.principal, one(request.query as Query, 'project'), name);
  });

  app.post('/v1alpha1/policies/:name(^[^/]+)::rescore', async (request) => {
    const { name } = request.params as { name: string };
    const body = parse(RescoreBodySchema, request.body ?? {});
    return policies.rescore(
      request.principal,
      one(request.query as Query, 'project'),
      name,
      body.since,
    );
  });
}
