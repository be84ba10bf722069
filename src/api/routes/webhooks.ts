import type { FastifyInstance } from 'fastify';
import type { WebhookService } from '../../webhooks/index.js';
import { one, type Query } from '../context.js';
import { applyOptions, pageOf } from '../validate.js';

/**
 * `/v1alpha1/webhooks`: apply, list, get, delete, `:test`, deliveries. The custom verb is a
 * literal `:test` after the name: find-my-way reads `::` as an escaped colon, but only after a
 * parameter with an explicit pattern (`:name(^[^/]+)::test`); without one the colon joins the
 * parameter's name.
 */
export async function webhookRoutes(
  app: FastifyInstance,
  { webhooks }: { webhooks: WebhookService },
): Promise<void> {
  // A generated signing secret is returned once: never stored with the outcome, never replayed.
  const apply = { idempotency: 'webhooks.apply', idempotencyWithhold: ['secret'] };
  app.post('/v1alpha1/webhooks', { config: apply }, async (request) => {
    return webhooks.apply(request.principal, request.body, applyOptions(request.query as Query));
  });

  app.get('/v1alpha1/webhooks', async (request) => {
    const { project, page } = pageOf(request.query as Query);
    const result = await webhooks.list(request.principal, project, page);
    return {
      webhooks: result.items,
      ...(result.nextPageToken === undefined ? {} : { next_page_token: result.nextPageToken }),
    };
  });

  app.get('/v1alpha1/webhooks/:name', async (request) => {
    const { name } = request.params as { name: string };
    return webhooks.get(request.principal, one(request.query as Query, 'project'), name);
  });

  app.delete(
    '/v1alpha1/webhooks/:name',
    { config: { idempotency: 'webhooks.delete' } },
    async (request) => {
      const { name } = request.params as { name: string };
      return webhooks.delete(request.principal, one(request.query as Query, 'project'), name);
    },
  );

  app.post('/v1alpha1/webhooks/:name(^[^/]+)::test', async (request) => {
    const { name } = request.params as { name: string };
    return webhooks.test(request.principal, one(request.query as Query, 'project'), name);
  });

  app.get('/v1alpha1/webhooks/:name/deliveries', async (request) => {
    const { name } = request.params as { name: string };
    const { project, page } = pageOf(request.query as Query);
    const result = await webhooks.deliveries(request.principal, project, name, page);
    return {
      deliveries: result.items,
      ...(result.nextPageToken === undefined ? {} : { next_page_token: result.nextPageToken }),
    };
  });
}
