import type { ResourceDescriptor } from '../resources/index.js';
import { KIND, PolicyResourceSchema } from './resource.js';

/** The OnlineEvalPolicy resource: `/v1alpha1/policies`, `touchstone policy`. */
export const POLICY_RESOURCE: ResourceDescriptor = {
  kind: KIND,
  title: 'Policy',
  singular: 'policy',
  plural: 'policies',
  access: { read: 'policies.read', write: 'policies.write' },
  bodies: { PolicyResource: PolicyResourceSchema },
  envelope: true,
  idempotentDelete: false,
  withhold: [],
};
