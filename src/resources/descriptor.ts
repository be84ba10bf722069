import type { z } from 'zod';
import type { Permission } from '../auth/index.js';

/**
 * What names a declarative resource everywhere it appears: its REST path and list key, its
 * permissions and audit actions, its OpenAPI operations and bodies, its CLI words. One value per
 * resource, defined in the resource's own area; the kit's service, routes, OpenAPI operations and
 * CLI verbs are built from it, so a new resource copies none of them.
 */
export interface ResourceDescriptor {
  /** `OnlineEvalPolicy`, `TraceSource`, `Webhook`: the `kind` of its documents. */
  kind: string;
  /** `Policy`: the word in operation ids and summaries. */
  title: string;
  /** `policy`: the audit target's key, the CLI's noun and its messages. */
  singular: string;
  /** `policies`: the path `/v1alpha1/<plural>`, the list key and the audit actions' prefix. */
  plural: string;
  /** What reading (get, list) and writing (apply, delete, the resource's verbs) need. */
  access: { read: Permission; write: Permission };
  /**
   * The JSON bodies apply accepts, by the OpenAPI component name each is published as (more than
   * one: any of them).
   */
  bodies: Record<string, z.ZodType>;
  /** Whether answers are the declarative envelope (`apiVersion`, `kind`, `metadata`, `spec`). */
  envelope: boolean;
  /** Whether delete, too, honours Idempotency-Key (apply always does). */
  idempotentDelete: boolean;
  /** Fields of the apply answer shown once: never stored with an idempotent outcome. */
  withhold: readonly string[];
}
