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
  StoredResourceMetadataSchema,
} from '../core/index.js';
import type { SourceRecord } from '../store/index.js';
import type { ConnectorFactory } from './connector.js';
import { BUILTIN_CONNECTORS, type ConnectorRegistry } from './connectors/index.js';
import { SourceErrors } from './error-codes.js';
import { cronProblem, MAX_WINDOW_RECORDS } from './schedule.js';

/**
 * The TraceSource resource: its schema (the same at apply, `validate_only`, `--dry-run` and in the
 * CLI) and the cross-field rules of the spec. The connector named owns its part (locations, auth,
 * variants' rules) through its declaration (connectors/); here are the rules every source
 * shares (overrides, scheduled mode, write-back needing the capability). What needs the network
 * or the server's grants (endpoint rules, credential grants, policies existing) is checked by the
 * service.
 */

export const API_VERSION = RESOURCE_API_VERSION;
export const KIND = 'TraceSource';
export const PROJECT_LABEL = RESOURCE_PROJECT_LABEL;

/** Connector types and variants of this build, in declaration order. */
export const CONNECTORS = BUILTIN_CONNECTORS.types();
export const VARIANTS = BUILTIN_CONNECTORS.variants();
/** Record fields an override may set (besides `metadata.<key>` and `labels.<key>`). */
export const OVERRIDE_FIELDS = ['input', 'output', 'reference', 'context'] as const;

const name = ResourceNameSchema;

const duration = (min: number, max: number, text: string) =>
  durationMs.refine((ms) => ms >= min && ms <= max, { message: text });

const MINUTE = 60_000;
const HOUR = 3_600_000;

/** `spec.schedule` (scheduled mode): when windows end, how long they are, and their limits. */
const ScheduleSchema = z.strictObject({
  cron: z
    .string()
    .max(256)
    .superRefine((text, ctx) => {
      const problem = cronProblem(text);
      if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
    }),
  window: duration(MINUTE, 168 * HOUR, 'between 1m and 168h'),
  startingDeadline: duration(MINUTE, 24 * HOUR, 'between 1m and 24h').prefault('1h'),
  maxRecords: z.int().min(1).max(MAX_WINDOW_RECORDS).default(MAX_WINDOW_RECORDS),
});

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

/** `spec.auth`: one optional key per declaration that owns one (`databricks`, `sigv4`). */
function authSchema(connectors: ConnectorRegistry) {
  const keys = connectors
    .list()
    .flatMap((f) => (f.manifest.auth === undefined ? [] : [f.manifest.auth]));
  return z.strictObject(Object.fromEntries(keys.map((a) => [a.key, a.schema.optional()])));
}

/** The spec's schema over the connectors of `connectors`. */
function specSchema(connectors: ConnectorRegistry) {
  return z.strictObject({
    connector: z.enum(connectors.types() as [string, ...string[]]),
    variant: z.enum(connectors.variants() as [string, ...string[]]).optional(),
    endpoint: z
      .string()
      .max(2048)
      .refine((text) => /^https?:\/\//i.test(text) && URL.canParse(text), {
        message: 'an absolute http or https URL',
      }),
    locations: z.array(z.string().min(1).max(512)).max(100).default([]),
    credentials: CredentialsSchema.optional(),
    auth: authSchema(connectors).optional(),
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
    schedule: ScheduleSchema.optional(),
    runSpec: z.record(z.string(), z.unknown()).optional(),
  });
}

const specSchemas = new WeakMap<ConnectorRegistry, ReturnType<typeof specSchema>>();

function specSchemaOf(connectors: ConnectorRegistry): ReturnType<typeof specSchema> {
  let schema = specSchemas.get(connectors);
  if (schema === undefined) {
    schema = specSchema(connectors);
    specSchemas.set(connectors, schema);
  }
  return schema;
}

export const SourceSpecSchema = specSchemaOf(BUILTIN_CONNECTORS);
export type SourceSpec = z.infer<typeof SourceSpecSchema>;

export const SourceResourceSchema = z.strictObject({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(KIND),
  metadata: StoredResourceMetadataSchema,
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

/**
 * The declaration a spec names: a refused variant is refused here, a variant on a type that has
 * no such variant is invalid.
 */
function declarationOf(spec: SourceSpec, connectors: ConnectorRegistry): ConnectorFactory {
  const { variant, connector } = spec;
  const refused = connectors
    .list()
    .find((f) => f.refused !== undefined && f.manifest.variant === variant);
  if (variant !== undefined && refused !== undefined) {
    throw SourceErrors.SOURCE_VARIANT_REFUSED(
      `variant "${variant}" is not supported: ${refused.refused}`,
      { details: [{ path: 'spec.variant', message: `${variant} is refused` }] },
    );
  }
  const factory = connectors.get(connector, variant);
  if (factory === undefined && variant === undefined) {
    invalid([{ path: 'spec.variant', message: `connector ${connector} needs a variant` }]);
  }
  if (factory === undefined) {
    const owners = connectors
      .list()
      .filter((f) => f.manifest.variant === variant)
      .map((f) => f.manifest.type);
    invalid([
      {
        path: 'spec.variant',
        message: `a variant applies only to connector ${owners.join(' or ')}`,
      },
    ]);
  }
  return factory;
}

/** Run-spec fields a scheduled source may not set: the window's traces are the dataset. */
const WINDOW_OWNED = ['dataset', 'target', 'harness', 'environment'] as const;

/**
 * Scheduled mode's rules: `schedule` and `runSpec` go together, the run spec grades the window's
 * traces as they are (evaluators, no dataset, target, harness, environment or further trials),
 * and online scoring's fields (policies, backfill, writeBack) do not apply.
 */
function scheduledModeRules(spec: SourceSpec): ErrorDetail[] {
  const { schedule, runSpec } = spec;
  if (schedule === undefined && runSpec === undefined) return [];
  if (schedule === undefined) {
    return [{ path: 'spec.schedule', message: 'runSpec is used only with schedule; set both' }];
  }
  if (runSpec === undefined) {
    return [
      { path: 'spec.runSpec', message: 'a scheduled source needs a run spec with evaluators' },
    ];
  }
  const details: ErrorDetail[] = [];
  const evaluators = runSpec.evaluators;
  if (!Array.isArray(evaluators) || evaluators.length === 0) {
    details.push({ path: 'spec.runSpec.evaluators', message: 'list at least one evaluator' });
  }
  for (const field of WINDOW_OWNED) {
    if (runSpec[field] !== undefined) {
      details.push({
        path: `spec.runSpec.${field}`,
        message: `not allowed in scheduled mode: the window's traces are the records`,
      });
    }
  }
  if (runSpec.trials !== undefined && runSpec.trials !== 1) {
    details.push({ path: 'spec.runSpec.trials', message: 'scheduled runs have one trial' });
  }
  const online: [boolean, string][] = [
    [spec.policies.length > 0, 'spec.policies'],
    [spec.backfill !== undefined, 'spec.backfill'],
    [spec.writeBack.enabled, 'spec.writeBack.enabled'],
  ];
  for (const [set, path] of online) {
    if (set) {
      details.push({
        path,
        message: 'not allowed with schedule: a scheduled source evaluates windows as runs',
      });
    }
  }
  return details;
}

/** The spec's own rules between fields; each violation with its path and the spec's outcome. */
function crossFieldRules(spec: SourceSpec, connectors: ConnectorRegistry): void {
  const { manifest } = declarationOf(spec, connectors);
  manifest.rules?.(spec);
  const config = manifest.config.safeParse(spec);
  const details: ErrorDetail[] = config.success ? [] : issuesToDetails(config.error.issues, 'spec');
  if (spec.writeBack.enabled && !manifest.capabilities.includes('write-back')) {
    details.push({
      path: 'spec.writeBack.enabled',
      message: `connector ${spec.connector} does not write back`,
    });
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
  details.push(...scheduledModeRules(spec));
  if (details.length > 0) invalid(details);
  for (const [target, expr] of Object.entries(spec.overrides)) {
    // Overrides see what selectors see plus `input`/`output` as text; any result type is allowed.
    compileExpression(expr, 'override', `spec.overrides.${target}`);
  }
}

/**
 * Validates a TraceSource resource: the generic spec, then the rules and config schema of the
 * connector it names (from `connectors`, this build's by default).
 */
export function parseSource(
  input: unknown,
  connectors: ConnectorRegistry = BUILTIN_CONNECTORS,
): ParsedSource {
  const r = SourceResourceSchema.safeParse(input);
  if (!r.success) invalid(issuesToDetails(r.error.issues));
  const spec = specSchemaOf(connectors).safeParse(r.data.spec);
  if (!spec.success) invalid(issuesToDetails(spec.error.issues, 'spec'));
  crossFieldRules(spec.data, connectors);
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
