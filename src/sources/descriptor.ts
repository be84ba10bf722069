import type { ResourceDescriptor } from '../resources/index.js';
import { KIND, SourceResourceSchema, SourceSpecSchema } from './resource.js';

/** The TraceSource resource: `/v1alpha1/sources`, `touchstone source`. */
export const SOURCE_RESOURCE: ResourceDescriptor = {
  kind: KIND,
  title: 'Source',
  singular: 'source',
  plural: 'sources',
  access: { read: 'sources.read', write: 'sources.write' },
  // The service checks the envelope, then the spec with its own schema.
  bodies: { SourceResource: SourceResourceSchema.extend({ spec: SourceSpecSchema }) },
  envelope: true,
  idempotentDelete: false,
  withhold: [],
};
