/**
 * Generates what the Helm chart must share with the code: the CustomResourceDefinitions (their
 * spec schemas from the zod schemas the API validates with) and the chart's values.schema.json
 * (`server.config` from the config schema). Run by `npm run docs`; test/k8s/crds.test.ts fails
 * when the committed files differ.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { z } from 'zod';
import { ConfigSchema } from '../src/config/schema.js';
import { RESOURCE_PROJECT_LABEL, ResourceNameSchema } from '../src/core/index.js';
import { PolicySpecSchema } from '../src/policies/resource.js';
import { RunSpecSchema } from '../src/runs/spec.js';
import { SourceSpecSchema } from '../src/sources/resource.js';
import { WebhookResourceSchema } from '../src/webhooks/resource.js';
import { ChartValuesSchema } from './chart-values.js';
import { type Json, structuralSchema, withGoPatterns } from './structural-schema.js';

export const CHART_DIR = 'deploy/helm/touchstone';
export const GROUP = 'touchstone.dev';
export const VERSION = 'v1alpha1';

/** The schema of what a writer may put in the spec (defaults are the server's to fill in). */
function specSchemaOf(schema: z.ZodType): Json {
  return structuralSchema(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Json);
}

/** A key of a Kubernetes Secret in the resource's namespace. */
const SecretKeyRefSchema = z
  .strictObject({
    name: z.string().min(1).max(253).describe('Name of a Secret in the same namespace.'),
    key: z.string().min(1).max(253).describe('Key within that Secret.'),
  })
  .describe('A key of a Kubernetes Secret; the value never sits in the resource.');

/**
 * The Webhook's spec in a cluster: the API's fields, with the signing secret named by a Secret
 * reference rather than written inline.
 */
const WebhookCrdSpecSchema = WebhookResourceSchema.shape.spec.omit({ secret: true }).extend({
  secretRef: SecretKeyRefSchema.optional(),
});

const int = { type: 'integer', format: 'int64' };
const time = { type: 'string', format: 'date-time' };
const text = { type: 'string' };

/** metav1.Condition, as every status here lists them (Ready, Synced, …). */
const conditions = {
  type: 'array',
  'x-kubernetes-list-type': 'map',
  'x-kubernetes-list-map-keys': ['type'],
  items: {
    type: 'object',
    required: ['type', 'status', 'lastTransitionTime', 'reason', 'message'],
    properties: {
      type: { type: 'string', maxLength: 316 },
      status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
      observedGeneration: { ...int, minimum: 0 },
      lastTransitionTime: time,
      reason: { type: 'string', maxLength: 1024 },
      message: { type: 'string', maxLength: 32768 },
    },
  },
};

function status(description: string, properties: Json): Json {
  return {
    type: 'object',
    description,
    properties: {
      observedGeneration: { ...int, description: 'The generation last sent to the server.' },
      conditions,
      ...properties,
    },
  };
}

interface Kind {
  kind: string;
  plural: string;
  shortNames: string[];
  description: string;
  spec: Json;
  status: Json;
  columns: Json[];
}

const age = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

export const KINDS: Kind[] = [
  {
    kind: 'TraceSource',
    plural: 'tracesources',
    shortNames: ['tsrc'],
    description:
      'A trace store Touchstone pulls traces from and scores (docs/sources.md). Credentials are named, never held: `file: <secret>/<key>` is a key of a Secret the chart mounts (`sources.secrets`).',
    spec: specSchemaOf(SourceSpecSchema),
    status: status('The source status the server reports (docs/sources.md).', {
      phase: text,
      lagSeconds: { type: 'number', nullable: true },
      recordsPerSecond: { type: 'number' },
      watermark: time,
      deferred: int,
      pulled: int,
      scored: int,
      deadLetters: int,
      lastError: text,
      lastWriteBack: time,
      lastScheduled: time,
      lastRunId: text,
      missedWindows: int,
    }),
    columns: [
      { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
      { name: 'Pulled', type: 'integer', jsonPath: '.status.pulled' },
      { name: 'Scored', type: 'integer', jsonPath: '.status.scored' },
      { name: 'Watermark', type: 'date', jsonPath: '.status.watermark' },
      {
        name: 'Lag',
        type: 'number',
        jsonPath: '.status.lagSeconds',
        description: 'Seconds since the last complete pull began.',
      },
      age,
    ],
  },
  {
    kind: 'OnlineEvalPolicy',
    plural: 'onlineevalpolicies',
    shortNames: ['oep'],
    description:
      'Which traces to score, with which evaluators, and when to alert (docs/policies.md).',
    spec: specSchemaOf(PolicySpecSchema),
    status: status('The policy status the server reports.', {
      alertsFiring: { ...int, description: 'Alerts of this policy now firing.' },
      alerts: {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            metric: text,
            firing: { type: 'boolean' },
            mean: { type: 'number' },
            n: int,
            changedAt: time,
          },
        },
      },
    }),
    columns: [
      { name: 'Alerts Firing', type: 'integer', jsonPath: '.status.alertsFiring' },
      { name: 'Disabled', type: 'boolean', jsonPath: '.spec.disabled' },
      age,
    ],
  },
  {
    kind: 'EvalRun',
    plural: 'evalruns',
    shortNames: ['erun'],
    description: 'An offline evaluation run: records, target, evaluators, gates (docs/runs.md).',
    spec: specSchemaOf(RunSpecSchema),
    status: status('The run as the server reports it.', {
      runId: text,
      phase: {
        type: 'string',
        enum: ['Pending', 'Running', 'Succeeded', 'Failed', 'Error', 'Cancelled'],
      },
      gatesPassed: int,
      gatesTotal: int,
      gates: {
        type: 'array',
        items: {
          type: 'object',
          properties: { gate: text, passed: { type: 'boolean' }, value: { type: 'number' } },
        },
      },
      finishedAt: time,
    }),
    columns: [
      { name: 'Status', type: 'string', jsonPath: '.status.phase' },
      { name: 'Gates Passed', type: 'integer', jsonPath: '.status.gatesPassed' },
      { name: 'Gates', type: 'integer', jsonPath: '.status.gatesTotal' },
      { name: 'Run', type: 'string', jsonPath: '.status.runId', priority: 1 },
      age,
    ],
  },
  {
    kind: 'Webhook',
    plural: 'webhooks',
    shortNames: ['tswh'],
    description:
      'A signed HTTP callback for run, trace-scoring and alert events (docs/webhooks.md). The signing secret is a key of a Secret (`secretRef`), never inline.',
    spec: specSchemaOf(WebhookCrdSpecSchema),
    status: status('The webhook as the server reports it (never its secret).', {
      secretSet: { type: 'boolean' },
    }),
    columns: [
      { name: 'URL', type: 'string', jsonPath: '.spec.url' },
      { name: 'Disabled', type: 'boolean', jsonPath: '.spec.disabled' },
      age,
    ],
  },
];

/** A resource name is narrower than a Kubernetes name: the API would refuse the rest. */
function nameRule(): Json {
  const { pattern } = z.toJSONSchema(ResourceNameSchema) as { pattern: string };
  return {
    rule: `self.metadata.name.matches('${pattern}')`,
    message: 'names are 1–63 lowercase letters, digits, _ . - starting with a letter or digit',
  };
}

export function crd(k: Kind): Json {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${k.plural}.${GROUP}`,
      labels: { 'app.kubernetes.io/part-of': 'touchstone' },
    },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: {
        kind: k.kind,
        listKind: `${k.kind}List`,
        plural: k.plural,
        singular: k.kind.toLowerCase(),
        shortNames: k.shortNames,
        categories: ['touchstone'],
      },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: k.columns,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: `${k.description} The label ${RESOURCE_PROJECT_LABEL} names the project.`,
              required: ['spec'],
              'x-kubernetes-validations': [nameRule()],
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: k.spec,
                status: k.status,
              },
            },
          },
        },
      ],
    },
  };
}

const HEADER =
  "# Generated by `npm run docs` (scripts/gen-k8s.ts) from the API's schemas; do not edit.\n";

export function crdFiles(): Map<string, string> {
  return new Map(
    KINDS.map((k) => [
      join(CHART_DIR, 'crds', `${k.plural}.${GROUP}.yaml`),
      HEADER + stringify(crd(k), { lineWidth: 0 }),
    ]),
  );
}

/** `server.config`: the server's config file, as the config schema takes it. */
function serverConfigSchema(): Json {
  const schema = z.toJSONSchema(ConfigSchema, { io: 'input', unrepresentable: 'any' }) as Json;
  const { $schema: _, ...rest } = schema;
  return {
    ...rest,
    description:
      'The server configuration file (docs/configuration.md), rendered once into a ConfigMap shared by every replica.',
  };
}

/** values.schema.json: the chart's keys, with `server.config` checked as the server checks it. */
export function valuesSchemaText(): string {
  const chart = z.toJSONSchema(ChartValuesSchema, { io: 'input' }) as Json;
  const props = chart.properties as Json;
  const server = props.server as Json;
  const merged = {
    ...chart,
    properties: {
      ...props,
      server: {
        ...server,
        properties: { ...(server.properties as Json), config: serverConfigSchema() },
      },
    },
  };
  return `${JSON.stringify(withGoPatterns(merged), null, 2)}\n`;
}

export const VALUES_SCHEMA = join(CHART_DIR, 'values.schema.json');

/** Writes every generated chart file; returns their paths. */
export function writeK8s(): string[] {
  const files = new Map([...crdFiles(), [VALUES_SCHEMA, valuesSchemaText()]]);
  for (const [path, content] of files) writeFileSync(path, content);
  return [...files.keys()];
}

if (process.argv[1]?.endsWith('gen-k8s.ts')) {
  console.log(`wrote ${writeK8s().join(', ')}`);
}
