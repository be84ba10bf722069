import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { PolicyService } from '../../policies/index.js';
import { named, resourceRoutes } from '../resource-routes.js';
import { parse } from '../validate.js';

export const RescoreBodySchema = z.strictObject({
  since: z.iso.datetime({ offset: true }),
});

/**
 * `/v1alpha1/policies`: the resource routes, and `:rescore` with `{"since": RFC 3339}` (the `::`
 * escape: see webhooks.ts).
 */
export async function policyRoutes(
  app: FastifyInstance,
  { policies }: { policies: PolicyService },
): Promise<void> {
  resourceRoutes(app, policies);

  app.post('/v1alpha1/policies/:name(^[^/]+)::rescore', async (request) => {
    const { name, project } = named(request);
    const body = parse(RescoreBodySchema, request.body ?? {});
    return policies.rescore(request.principal, project, name, body.since);
  });
}
