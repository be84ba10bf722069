import type { FastifyInstance } from 'fastify';
import type { WebhookService } from '../../webhooks/index.js';
import type { Query } from '../context.js';
import { named, resourceRoutes } from '../resource-routes.js';
import { pageOf } from '../validate.js';

/**
 * `/v1alpha1/webhooks`: the resource routes, `:test`, deliveries. The custom verb is a literal
 * `:test` after the name: find-my-way reads `::` as an escaped colon, but only after a parameter
 * with an explicit pattern (`:name(^[^/]+)::test`); without one the colon joins the parameter's
 * name.
 */
export async function webhookRoutes(
  app: FastifyInstance,
  { webhooks }: { webhooks: WebhookService },
): Promise<void> {
  resourceRoutes(app, webhooks);

  app.post('/v1alpha1/webhooks/:name(^[^/]+)::test', async (request) => {
    const { name, project } = named(request);
    return webhooks.test(request.principal, project, name);
  });

  app.get('/v1alpha1/webhooks/:name/deliveries', async (request) => {
    const { name } = named(request);
    const { project, page } = pageOf(request.query as Query);
    const result = await webhooks.deliveries(request.principal, project, name, page);
    return {
      deliveries: result.items,
      ...(result.nextPageToken === undefined ? {} : { next_page_token: result.nextPageToken }),
    };
  });
}
