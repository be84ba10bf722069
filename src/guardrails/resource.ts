import { z } from 'zod';
import { parseDuration } from '../config/index.js';
import {
  describeDetails,
  type ErrorDetail,
  issuesToDetails,
  RESOURCE_API_VERSION,
  RESOURCE_PROJECT_LABEL,
  StoredResourceMetadataSchema,
} from '../core/index.js';
import { PII_DETECTORS, SECRET_DETECTORS } from '../redaction/index.js';
import { GuardErrors } from './error-codes.js';

/**
 * The GuardPolicy resource: an ordered list of checks, each with an action (mask or reject), a
 * deadline per check and for the whole decision, and `failOpen`. docs/guardrails.md
 */

export const GUARD_KIND = 'GuardPolicy';

/** The whole decision's deadline when the policy sets none; well under the gateway's 10 s. */
export const DEFAULT_DEADLINE = '2s';
/** The longest deadline a policy may set: the gateway gives up on the webhook at 10 s. */
export const MAX_DEADLINE_MS = 9000;
export const MAX_CHECKS = 32;
export const MAX_PATTERNS = 256;
export const MAX_PATTERN_LENGTH = 1024;

const duration = z
  .string()
  .max(32)
  .refine(
    (text) => {
      const ms = parseDuration(text);
      return ms !== undefined && ms > 0 && ms <= MAX_DEADLINE_MS;
    },
    `a duration above 0 and at most ${MAX_DEADLINE_MS / 1000}s, such as 250ms or 2s`,
  );

const phases = z
  .array(z.enum(['request', 'response']))
  .min(1)
  .max(2)
  .optional();

const common = {
  /** A name for reasons, metrics and decision traces; default `<type>-<index>`. */
  name: z
    .string()
    .regex(/^[a-z0-9][a-z0-9_.-]{0,62}$/, 'lowercase letters, digits, `_ . -`, at most 63')
    .optional(),
  action: z.enum(['mask', 'reject']),
  timeout: duration.optional(),
  /** The phases the check runs in; default both. */
  phases,
};

const pattern = z.string().min(1).max(MAX_PATTERN_LENGTH);

export const GuardCheckSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('pii'),
    ...common,
    /** Default: every PII detector. */
    detectors: z.array(z.enum(PII_DETECTORS)).min(1).max(PII_DETECTORS.length).optional(),
  }),
  z.strictObject({
    type: z.literal('secrets'),
    ...common,
    /** Default: every secret detector. */
    detectors: z.array(z.enum(SECRET_DETECTORS)).min(1).max(SECRET_DETECTORS.length).optional(),
  }),
  z.strictObject({
    type: z.literal('regex'),
    ...common,
    /** RE2 patterns; a match anywhere in a message or a string argument is a hit. */
    patterns: z.array(pattern).min(1).max(MAX_PATTERNS),
    caseInsensitive: z.boolean().optional(),
  }),
  z.strictObject({
    type: z.literal('injection'),
    ...common,
    /** Sum of the weights of the phrases found (each counted once) that makes a hit; default 1. */
    threshold: z.number().positive().max(100).optional(),
  }),
  z.strictObject({
    type: z.literal('cel'),
    ...common,
    /** True means hit. Sees `mcp`, `principal`, `action` (the phase) and `resource`. */
    condition: z.string().min(1).max(4096),
  }),
  z.strictObject({
    type: z.literal('judge'),
    ...common,
    /** What a safe exchange is, in words (or a built-in rubric of the llm-judge evaluator). */
    rubric: z.string().trim().min(1).max(8000),
    /** A judge from `judges`; default `default_judge`. */
    judge: z.string().min(1).max(64).optional(),
    /** Normalized score (0–1) below which the check hits; default 0.5. */
    passThreshold: z.number().min(0).max(1).optional(),
  }),
]);
export type GuardCheckSpec = z.infer<typeof GuardCheckSchema>;
export type GuardCheckType = GuardCheckSpec['type'];

export const GuardSpecSchema = z.strictObject({
  checks: z.array(GuardCheckSchema).min(1).max(MAX_CHECKS),
  /** The whole decision's deadline. */
  deadline: duration.default(DEFAULT_DEADLINE),
  /** When a check cannot decide (error, timeout, unevaluable CEL): allow (true) or block. */
  failOpen: z.boolean().default(false),
  /** The status of a reject by a check; a decision that cannot be made rejects with 503. */
  rejectStatus: z.number().int().min(400).max(599).default(403),
  /** Record every decision as a trace of the project (service `touchstone-guard`). */
  record: z.boolean().default(false),
});
export type GuardSpec = z.infer<typeof GuardSpecSchema>;

export const GuardPolicyResourceSchema = z.strictObject({
  apiVersion: z.literal(RESOURCE_API_VERSION),
  kind: z.literal(GUARD_KIND),
  metadata: StoredResourceMetadataSchema,
  spec: GuardSpecSchema,
});

/** A guard policy as applied: its identity and its spec with defaults filled in. */
export interface ParsedGuardPolicy {
  name: string;
  /** From the `touchstone.dev/project` label, when set. */
  project?: string;
  labels: Record<string, string>;
  spec: GuardSpec;
}

export function invalidGuard(details: ErrorDetail[]): never {
  throw GuardErrors.GUARD_POLICY_INVALID(`invalid guard policy: ${describeDetails(details)}`, {
    details,
  });
}

/** Validates the resource's shape (its patterns, CEL and judges are checked by compiling it). */
export function parseGuardPolicy(input: unknown): ParsedGuardPolicy {
  const r = GuardPolicyResourceSchema.safeParse(input);
  if (!r.success) invalidGuard(issuesToDetails(r.error.issues));
  const labels = r.data.metadata.labels ?? {};
  const project = labels[RESOURCE_PROJECT_LABEL];
  return {
    name: r.data.metadata.name,
    ...(project === undefined ? {} : { project }),
    labels,
    spec: r.data.spec,
  };
}

/** The stored form: the declarative resource with defaults filled and the project label set. */
export function guardPolicyResource(
  policy: ParsedGuardPolicy,
  project: string,
): Record<string, unknown> {
  return {
    apiVersion: RESOURCE_API_VERSION,
    kind: GUARD_KIND,
    metadata: {
      name: policy.name,
      labels: { ...policy.labels, [RESOURCE_PROJECT_LABEL]: project },
    },
    spec: policy.spec,
  };
}
