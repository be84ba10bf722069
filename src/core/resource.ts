import { z } from 'zod';

/**
 * What every declarative resource (OnlineEvalPolicy, TraceSource, Webhook, Run) shares: its
 * `apiVersion`, the label naming its project, and the grammar of its names.
 */

export const RESOURCE_API_VERSION = 'touchstone.dev/v1alpha1';
export const RESOURCE_PROJECT_LABEL = 'touchstone.dev/project';

/** A resource or project name: also a path segment and a label value, hence the narrow grammar. */
export const ResourceNameSchema = z
  .string()
  .regex(
    /^[a-z0-9][a-z0-9_.-]{0,62}$/,
    'names are 1–63 lowercase letters, digits, _ . - starting with a letter or digit',
  );

/**
 * The `metadata` of a stored resource as applied: its name and labels, and the output-only fields
 * `get` prints (generation, times), accepted and ignored so that what `get` prints applies again
 * unchanged.
 */
export const StoredResourceMetadataSchema = z.strictObject({
  name: ResourceNameSchema,
  labels: z.record(z.string(), z.string()).optional(),
  generation: z.number().optional(),
  createdAt: z.string().optional(),
  updatedAt: z.string().optional(),
});
