import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ResourceOperations } from '../resources/index.js';
import { one, type Query } from './context.js';
import { applyOptions, pageOf } from './validate.js';

/** The name and project of a request on `/v1alpha1/<plural>/:name…`. */
export function named(request: FastifyRequest): { name: string; project: string | undefined } {
  return {
    name: (request.params as { name: string }).name,
    project: one(request.query as Query, 'project'),
  };
}

/**
 * The REST routes every declarative resource has (DESIGN §5), from its descriptor: apply
 * (`validate_only`, Idempotency-Key), list (paged, under the plural's key), get and delete by
 * name. A resource's route file adds only its own verbs; openapi.ts describes these four from
 * the same descriptor.
 */
export function resourceRoutes(app: FastifyInstance, service: ResourceOperations): void {
  const { resource } = service;
  const { plural } = resource;
  const apply = {
    idempotency: `${plural}.apply`,
    ...(resource.withhold.length === 0 ? {} : { idempotencyWithhold: resource.withhold }),
  };
  app.post(`/v1alpha1/${plural}`, { config: apply }, async (request) =>
    service.apply(request.principal, request.body, applyOptions(request.query as Query)),
  );

  app.get(`/v1alpha1/${plural}`, async (request) => {
    const { project, page } = pageOf(request.query as Query);
    const result = await service.list(request.principal, project, page);
    return {
      [plural]: result.items,
      ...(result.nextPageToken === undefined ? {} : { next_page_token: result.nextPageToken }),
    };
  });

  app.get(`/v1alpha1/${plural}/:name`, async (request) => {
    const { name, project } = named(request);
    return service.get(request.principal, project, name);
  });

  const remove = resource.idempotentDelete ? { config: { idempotency: `${plural}.delete` } } : {};
  app.delete(`/v1alpha1/${plural}/:name`, remove, async (request) => {
    const { name, project } = named(request);
    return service.delete(request.principal, project, name);
  });
}
