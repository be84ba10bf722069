import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { CreateKeySchema, type KeyService } from '../../auth/index.js';
import { one, type Query } from '../context.js';
import { PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, parse } from '../validate.js';

export const KeyPageQuerySchema = z.object({
  page_size: z.coerce.number().int().min(1).max(PAGE_SIZE_MAX).default(PAGE_SIZE_DEFAULT),
  page_token: z.string().optional(),
});

export async function keyRoutes(
  app: FastifyInstance,
  { keys }: { keys: KeyService },
): Promise<void> {
  // The generated secret is returned once: never stored, never replayed.
  const create = { idempotency: 'keys.create', idempotencyWithhold: ['secret'] };
  app.post('/v1alpha1/keys', { config: create }, async (request) => {
    const body = parse(CreateKeySchema, request.body);
    return keys.create(request.principal, body);
  });

  app.get('/v1alpha1/keys', async (request) => {
    const query = request.query as Query;
    const page = parse(KeyPageQuerySchema, {
      page_size: one(query, 'page_size'),
      page_token: one(query, 'page_token'),
    });
    const result = await keys.list(request.principal, one(query, 'project'), {
      pageSize: page.page_size,
      ...(page.page_token === undefined ? {} : { pageToken: page.page_token }),
    });
    return {
      keys: result.items,
      ...(result.nextPageToken === undefined ? {} : { next_page_token: result.nextPageToken }),
    };
  });

  app.delete('/v1alpha1/keys/:id', async (request) => {
    const { id } = request.params as { id: string };
    return { key: await keys.revoke(request.principal, id) };
  });
}
