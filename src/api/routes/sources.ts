import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { SourceService } from '../../sources/index.js';
import { one, type Query } from '../context.js';
import { applyOptions, pageOf, parse } from '../validate.js';

export const BackfillBodySchema = z.strictObject({ since: z.iso.datetime({ offset: true }) });

/**
 * `/v1alpha1/sources`: apply (`validate_only`), list, get (with status), delete, and the verbs
 * `:pause`, `:resume`, `:backfill` with `{"since": RFC 3339}` (the `::` escape: see webhooks.ts).
 */
export async function sourceRoutes(
  app: FastifyInstance,
  { sources }: { sources: SourceService },
): Promise<void> {
  app.post('/v1alpha1/sources', { config: { idempotency: 'sources.apply' } }, async (request) =>
    sources.apply(request.principal, request.body, applyOptions(request.query as Query)),
  );

  app.get('/v1alpha1/sources', async (request) => {
    const { project, page } = pageOf(request.query as Query);
    const result = await sources.list(request.principal, project, page);
    return {
      sources: result.items,
      ...(result.nextPageToken === undefined ? {} : { next_page_token: result.nextPageToken }),
    };
  });

  const named = (request: { params: unknown; query: unknown }) => ({
    name: (request.params as { name: string }).name,
    project: one(request.query as Query, 'project'),
  });

  app.get('/v1alpha1/sources/:name', async (request) => {
    const { name, project } = named(request);
    return sources.get(request.principal, project, name);
  });

  app.delete('/v1alpha1/sources/:name', async (request) => {
    const { name, project } = named(request);
    return sources.delete(request.principal, project, name);
  });

  app.post('/v1alpha1/sources/:name(^[^/:]+)::pause', async (request) => {
    const { name, project } = named(request);
    return sources.pause(request.principal, project, name);
  });

  app.post('/v1alpha1/sources/:name(^[^/:]+)::resume', async (request) => {
    const { name, project } = named(request);
    return sources.resume(request.principal, project, name);
  });

  app.post('/v1alpha1/sources/:name(^[^/:]+)::backfill', async (request) => {
    const { name, project } = named(request);
    const body = parse(BackfillBodySchema, request.body ?? {});
    return sources.backfill(request.principal, project, name, body.since);
  });
}
