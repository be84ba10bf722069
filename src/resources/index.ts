/**
 * @module resources
 * The resource kit: what every declarative resource (policies, sources, webhooks) shares — its
 * descriptor (kind, plural, bodies, permissions) and the service over its table (apply with
 * `validateOnly`, get, list, delete; project scoping, authorization, audit). The REST routes,
 * OpenAPI operations and CLI verbs are built from the same descriptor in api/ and cli/.
 * A resource keeps only its own hooks and verbs in its area.
 */
export type { ResourceDescriptor } from './descriptor.js';
export {
  type ApplyOptions,
  type ParsedResource,
  type ResourceOperations,
  ResourceService,
  type ResourceServiceDeps,
  sinceMs,
} from './service.js';
