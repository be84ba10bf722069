import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { RunService } from '../../runs/index.js';
import { one, type Query } from '../context.js';
import { applyOptions, pageOf, parseQuery } from '../validate.js';

export const RunGetQuerySchema = z.object({
  project: z.string().min(1).optional(),
  view: z.enum(['basic', 'full']).default('full'),
});

/**
 * `/v1alpha1/runs`: create (plain or declarative spec; `?project=`, `?validate_only=true`),
 * list, get, results, `:cancel`, delete (the `::` escape: see webhooks.ts). Create and delete
 * are retryable writes: they honour `Idempotency-Key`.
 */
export async function runRoutes(
  app: FastifyInstance,
  { runs }: { runs: RunService },
): Promise<void> {
  app.post('/v1alpha1/runs', { config: { idempotency: 'runs.create' } }, async (request) =>
    runs.create(request.principal, request.body, applyOptions(request.query as Query)),
  );

  app.get('/v1alpha1/runs', async (request) => {
    const { project, page } = pageOf(request.query as Query);
    const result = await runs.list(request.principal, project, page);
    return {
      runs: result.items,
      ...(result.nextPageToken === undefined ? {} : { next_page_token: result.nextPageToken }),
    };
  });

  const target = (request: { params: unknown; query: unknown }) => ({
    id: (request.params as { id: string }).id,
    project: one(request.query as Query, 'project'),
  });

  // `view=basic` leaves out the spec (what pollers want); `full`, the default, includes it.
  app.get('/v1alpha1/runs/:id', async (request) => {
    const { id } = target(request);
    const { project, view } = parseQuery(RunGetQuerySchema, request.query as Query);
    return view === 'basic'
      ? runs.progress(request.principal, project, id)
      : runs.get(request.principal, project, id);
  });

  app.get('/v1alpha1/runs/:id/results', async (request) => {
    const { id } = target(request);
    const { project, page } = pageOf(request.query as Query);
    const result = await runs.results(request.principal, project, id, page);
    return {
      results: result.items,
      ...(result.nextPageToken === undefined ? {} : { next_page_token: result.nextPageToken }),
    };
  });

  app.post('/v1alpha1/runs/:id(^[^/:]+)::cancel', async (request) => {
    const { id, project } = target(request);
    return runs.cancel(request.principal, project, id);
  });

  app.delete('/v1alpha1/runs/:id', { config: { idempotency: 'runs.delete' } }, async (request) => {
    const { id, project } = target(request);
    return runs.delete(request.principal, project, id);
  });
}
