import { z } from 'zod';
import { compileExpression } from '../cel/index.js';
import { durationMs } from '../config/index.js';
import {
  describeDetails,
  type ErrorDetail,
  issuesToDetails,
  RESOURCE_API_VERSION,
  RESOURCE_PROJECT_LABEL,
  ResourceNameSchema,
} from '../core/index.js';
import type { SourceRecord } from '../store/index.js';
import { SourceErrors } from './error-codes.js';

/**
 * The TraceSource resource: its schema (the same at apply, `validate_only`, `--dry-run` and in the
 * CLI) and the cross-field rules of the spec (variants, locations, auth). What needs the network
 * or the server's grants (endpoint rules, credential grants, policies existing) is checked by the
 * service.
 */

export const API_VERSION = RESOURCE_API_VERSION;
export const KIND = 'TraceSource';
export const PROJECT_LABEL = RESOURCE_PROJECT_LABEL;

export const CONNECTORS = ['mlflow', 'phoenix', 'langfuse'] as const;
export const VARIANTS = ['databricks', 'sagemaker', 'azureml'] as const;
/** Record fields an override may set (besides `metadata.<key>` and `labels.<key>`). */
export const OVERRIDE_FIELDS = ['input', 'output', 'reference', 'context'] as const;

const name = ResourceNameSchema;

const duration = (min: number, max: number, text: string) =>
  durationMs.refine((ms) => ms >= min && ms <= max, { message: text });

const HOUR = 3_600_000;

const CredentialsSchema = z.union([
  z.strictObject({
    env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'an environment variable name'),
  }),
  z.strictObject({
    file: z
      .string()
      .regex(
        /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}\/[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/,
        'written <secret>/<key> (names not starting with a dot)',
      ),
  }),
]);

export const SourceSpecSchema = z.strictObject({
  connector: z.enum(CONNECTORS),
  variant: z.enum(VARIANTS).optional(),
  endpoint: z
    .string()
    .max(2048)
    .refine((text) => /^https?:\/\//i.test(text) && URL.canParse(text), {
      message: 'an absolute http or https URL',
    }),
  locations: z.array(z.string().min(1).max(512)).max(100).default([]),
  credentials: CredentialsSchema.optional(),
  auth: z
    .strictObject({
      databricks: z
        .strictObject({
          clientId: z.string().min(1).optional(),
          sqlWarehouseId: z.string().min(1).optional(),
        })
        .optional(),
      sigv4: z
        .strictObject({ arn: z.string().regex(/^arn:[a-z-]+:sagemaker:/, 'a SageMaker ARN') })
        .optional(),
    })
    .optional(),
  backfill: z.strictObject({ since: duration(0, 8760 * HOUR, 'between 0 and 8760h') }).optional(),
  poll: z
    .strictObject({
      interval: duration(1000, 24 * HOUR, 'between 1s and 24h').prefault('30s'),
      maxRecordsPerSecond: z.int().min(1).max(100_000).optional(),
    })
    .prefault({}),
  maxTraceDuration: duration(1000, 24 * HOUR, 'between 1s and 24h').prefault('30m'),
  maxInProgressAge: duration(1000, 7 * 24 * HOUR, 'between 1s and 168h').prefault('1h'),
  policies: z.array(name).max(64).default([]),
  writeBack: z.strictObject({ enabled: z.boolean().default(false) }).prefault({}),
  traceLabels: z.record(z.string().min(1).max(128), z.string().max(1024)).default({}),
  overrides: z.record(z.string(), z.string().min(1).max(4096)).default({}),
  schedule: z.record(z.string(), z.unknown()).optional(),
  runSpec: z.record(z.string(), z.unknown()).optional(),
});
export type SourceSpec = z.infer<typeof SourceSpecSchema>;

export const SourceResourceSchema = z.strictObject({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(KIND),
  metadata: z.strictObject({
    name,
    labels: z.record(z.string(), z.string()).optional(),
    generation: z.number().optional(),
    createdAt: z.string().optional(),
    updatedAt: z.string().optional(),
  }),
  spec: z.unknown(),
  // Output-only: what `get` prints can be applied again unchanged.
  status: z.unknown().optional(),
});

export interface ParsedSource {
  name: string;
  project?: string;
  labels: Record<string, string>;
  /** As written (durations as text), stored and shown as applied. */
  rawSpec: Record<string, unknown>;
  spec: SourceSpec;
}

function invalid(details: ErrorDetail[]): never {
  throw SourceErrors.SOURCE_INVALID(`invalid source: ${describeDetails(details)}`, { details });
}

/** The spec's own rules between fields; each violation with its path and the spec's outcome. */
function crossFieldRules(spec: SourceSpec): void {
  const { variant, connector } = spec;
  if (variant === 'azureml') {
    throw SourceErrors.SOURCE_VARIANT_REFUSED(
      'variant "azureml" is not supported: Azure Machine Learning sources are refused',
      { details: [{ path: 'spec.variant', message: 'azureml is refused' }] },
    );
  }
  if (variant !== undefined && connector !== 'mlflow') {
    invalid([{ path: 'spec.variant', message: 'a variant applies only to connector mlflow' }]);
  }
  const details: ErrorDetail[] = [];
  if (connector === 'phoenix' && spec.locations.length !== 1) {
    details.push({ path: 'spec.locations', message: 'phoenix takes exactly one project' });
  }
  if (connector === 'langfuse' && spec.locations.length > 1) {
    details.push({ path: 'spec.locations', message: 'langfuse takes at most one environment' });
  }
  if (connector === 'mlflow' && spec.locations.length === 0) {
    details.push({ path: 'spec.locations', message: 'name at least one experiment (name or id)' });
  }
  if (variant === 'databricks') {
    const ids = spec.locations.filter((l) => /^\d+$/.test(l));
    const schemas = spec.locations.filter((l) => /^[^.\s]+\.[^.\s]+$/.test(l));
    if (ids.length > 0 && schemas.length > 0) {
      throw SourceErrors.SOURCE_LOCATIONS_MIXED(
        'a source reads either experiment ids or catalog schemas, not both: make two sources',
        {
          details: [
            { path: 'spec.locations', message: 'mixes experiment ids and catalog schemas' },
          ],
        },
      );
    }
    spec.locations.forEach((l, i) => {
      if (!/^\d+$/.test(l) && !/^[^.\s]+\.[^.\s]+$/.test(l)) {
        throw SourceErrors.SOURCE_UNSUPPORTED(
          `location "${l}" is not supported on databricks: use numeric experiment ids or catalog.schema`,
          {
            details: [
              {
                path: `spec.locations[${i}]`,
                message: 'experiment names and table prefixes are unsupported',
              },
            ],
          },
        );
      }
    });
    if (schemas.length > 0 && spec.auth?.databricks?.sqlWarehouseId === undefined) {
      details.push({
        path: 'spec.auth.databricks.sqlWarehouseId',
        message: 'required for catalog-schema locations',
      });
    }
    if (
      spec.auth?.databricks?.clientId !== undefined &&
      !spec.endpoint.toLowerCase().startsWith('https://')
    ) {
      throw SourceErrors.SOURCE_ENDPOINT_REFUSED(
        'a databricks service principal needs an https endpoint',
        {
          details: [
            { path: 'spec.endpoint', message: 'must be https with auth.databricks.clientId' },
          ],
        },
      );
    }
  }
  if (variant === 'sagemaker' && spec.auth?.sigv4 === undefined) {
    details.push({ path: 'spec.auth.sigv4.arn', message: 'required for sagemaker' });
  }
  for (const target of Object.keys(spec.overrides)) {
    const ok =
      (OVERRIDE_FIELDS as readonly string[]).includes(target) ||
      /^(metadata|labels)\.[A-Za-z0-9_.-]{1,128}$/.test(target);
    if (!ok) {
      details.push({
        path: `spec.overrides.${target}`,
        message: 'targets are input, output, reference, context, metadata.<key> or labels.<key>',
      });
    }
  }
  if (spec.schedule !== undefined || spec.runSpec !== undefined) {
    details.push({
      path: spec.schedule !== undefined ? 'spec.schedule' : 'spec.runSpec',
      message: 'scheduled mode is not supported yet: remove schedule and runSpec',
    });
  }
  if (details.length > 0) invalid(details);
  for (const [target, expr] of Object.entries(spec.overrides)) {
    // Overrides see what selectors see plus `input`/`output` as text; any result type is allowed.
    compileExpression(expr, 'override', `spec.overrides.${target}`);
  }
}

export function parseSource(input: unknown): ParsedSource {
  const r = SourceResourceSchema.safeParse(input);
  if (!r.success) invalid(issuesToDetails(r.error.issues));
  const spec = SourceSpecSchema.safeParse(r.data.spec);
  if (!spec.success) invalid(issuesToDetails(spec.error.issues, 'spec'));
  crossFieldRules(spec.data);
  const labels = r.data.metadata.labels ?? {};
  const project = labels[PROJECT_LABEL];
  return {
    name: r.data.metadata.name,
    ...(project === undefined ? {} : { project }),
    labels,
    rawSpec: r.data.spec as Record<string, unknown>,
    spec: spec.data,
  };
}

/** The stored form: the resource as written, with the project label set. */
export function sourceResource(source: ParsedSource, project: string): Record<string, unknown> {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: source.name, labels: { ...source.labels, [PROJECT_LABEL]: project } },
    spec: source.rawSpec,
  };
}

/** The resource as the API shows it, with its generation, times and (when given) status. */
export function sourceView(
  record: SourceRecord,
  status?: Record<string, unknown>,
): Record<string, unknown> {
  const resource = record.resource as { metadata: Record<string, unknown> };
  return {
    ...resource,
    metadata: {
      ...resource.metadata,
      generation: record.generation,
      createdAt: record.createdAt,
      updatedAt: record.updatedAt,
    },
    ...(status === undefined ? {} : { status }),
  };
}
