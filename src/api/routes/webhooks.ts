import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { WebhookService } from '../../webhooks/index.js';
import { one, type Query } from '../context.js';
import { PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, parse } from '../validate.js';

const PageQuerySchema = z.object({
  project: z.string().min(1).optional(),
  page_size: z.coerce.number().int().min(1).max(PAGE_SIZE_MAX).default(PAGE_SIZE_DEFAULT),
  page_token: z.string().optional(),
});

const ApplyQuerySchema = z.object({
  project: z.string().min(1).optional(),
  validate_only: z.enum(['true', 'false']).optional(),
});

function pageOf(query: Query) {
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
  app.post('/v1alpha1/webhooks', async (request) => {
    const query = request.query as Query;
    const q = parse(ApplyQuerySchema, {
      project: one(query, 'project'),
      validate_only: one(query, 'validate_only'),
    });
    return webhooks.apply(request.principal, request.body, {
      ...(q.project === undefined ? {} : { project: q.project }),
      validateOnly: q.validate_only === 'true',
    });
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

  app.delete('/v1alpha1/webhooks/:name', async (request) => {
    const { name } = request.params as { name: string };
    return webhooks.delete(request.principal, one(request.query as Query, 'project'), name);
  });

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
