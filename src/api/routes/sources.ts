import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { SourceService } from '../../sources/index.js';
import { named, resourceRoutes } from '../resource-routes.js';
import { parse } from '../validate.js';

export const BackfillBodySchema = z.strictObject({ since: z.iso.datetime({ offset: true }) });

/**
 * `/v1alpha1/sources`: the resource routes (get shows the status), and the verbs `:pause`,
 * `:resume`, `:backfill` with `{"since": RFC 3339}` (the `::` escape: see webhooks.ts).
 */
export async function sourceRoutes(
  app: FastifyInstance,
  { sources }: { sources: SourceService },
): Promise<void> {
  resourceRoutes(app, sources);

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
