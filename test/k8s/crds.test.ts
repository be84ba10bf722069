import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { run as evaluateCel } from '@bufbuild/cel';
import { Ajv } from 'ajv';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { z } from 'zod';
import {
  CHART_DIR,
  crd,
  crdFiles,
  KINDS,
  VALUES_SCHEMA,
  valuesSchemaText,
} from '../../scripts/gen-k8s.js';
import { PolicySpecSchema } from '../../src/policies/resource.js';
import { RunSpecSchema } from '../../src/runs/spec.js';
import { parseSource, SourceSpecSchema } from '../../src/sources/resource.js';
import { parseWebhook } from '../../src/webhooks/resource.js';
import { structuralProblems } from './structural.js';

type Json = { [key: string]: unknown };

function schemaOf(kind: string): Json {
  const k = KINDS.find((x) => x.kind === kind);
  if (k === undefined) throw new Error(`no kind ${kind}`);
  const versions = (crd(k).spec as Json).versions as Json[];
  return ((versions[0] as Json).schema as Json).openAPIV3Schema as Json;
}

/** The CRD schema as the API server applies it to a custom resource (offline, with Ajv). */
function crdValidator(kind: string) {
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  return ajv.compile(schemaOf(kind));
}

const example = (name: string) =>
  parse(readFileSync(join('deploy/examples', `${name}.yaml`), 'utf8')) as Json;

/** What the server's API takes for this custom resource (its metadata as the API knows it). */
function asApiResource(cr: Json, kind: string): Json {
  const meta = cr.metadata as Json;
  return { ...cr, kind, metadata: { name: meta.name, labels: meta.labels } };
}

describe('custom resource definitions', () => {
  it('are the committed files: regenerate with `npm run docs` after changing an API schema', () => {
    for (const [path, content] of crdFiles()) expect(readFileSync(path, 'utf8')).toBe(content);
    expect(readFileSync(VALUES_SCHEMA, 'utf8')).toBe(valuesSchemaText());
  });

  it('are valid CustomResourceDefinitions with structural schemas', () => {
    for (const [path, content] of crdFiles()) {
      const object = parse(content);
      expect(() => new CustomResourceDefinition(object).validate(), path).not.toThrow();
      const schema = object.spec.versions[0].schema.openAPIV3Schema;
      expect(structuralProblems(schema), path).toEqual([]);
    }
  });

  it("the check catches what the API server refuses: zod's own JSON Schema is not structural", () => {
    const raw = z.toJSONSchema(SourceSpecSchema, { io: 'input' }) as Json;
    const { $schema: _, ...root } = raw;
    const problems = structuralProblems(root);
    expect(problems).toContain('.credentials: type inside a junctor');
    expect(problems).toContain('.credentials: no type');
    expect(problems).toContain('.traceLabels: unknown keyword propertyNames');
    expect(problems).toContain(': additionalProperties false');
  });

  it('live in the chart crds/ directory, one per kind, in touchstone.dev/v1alpha1', () => {
    expect([...crdFiles().keys()].sort()).toEqual(
      [
        'evalruns.touchstone.dev',
        'onlineevalpolicies.touchstone.dev',
        'tracesources.touchstone.dev',
        'webhooks.touchstone.dev',
      ].map((n) => join(CHART_DIR, 'crds', `${n}.yaml`)),
    );
    for (const k of KINDS) {
      const spec = crd(k).spec as Json;
      expect(spec.group).toBe('touchstone.dev');
      expect(((spec.versions as Json[])[0] as Json).name).toBe('v1alpha1');
    }
  });

  it('have a status subresource and the printer columns the cluster listing shows', () => {
    const columns = (kind: string) => {
      const k = KINDS.find((x) => x.kind === kind)!;
      const version = ((crd(k).spec as Json).versions as Json[])[0] as Json;
      expect(version.subresources).toEqual({ status: {} });
      return (version.additionalPrinterColumns as Json[]).map((c) => [c.name, c.jsonPath]);
    };
    expect(columns('TraceSource')).toEqual(
      expect.arrayContaining([
        ['Phase', '.status.phase'],
        ['Pulled', '.status.pulled'],
        ['Scored', '.status.scored'],
        ['Watermark', '.status.watermark'],
        ['Lag', '.status.lagSeconds'],
      ]),
    );
    expect(columns('EvalRun')).toEqual(
      expect.arrayContaining([
        ['Status', '.status.phase'],
        ['Gates Passed', '.status.gatesPassed'],
      ]),
    );
    expect(columns('OnlineEvalPolicy')).toEqual(
      expect.arrayContaining([['Alerts Firing', '.status.alertsFiring']]),
    );
  });

  it("printer columns point at fields of the kind's schema", () => {
    for (const k of KINDS) {
      const schema = schemaOf(k.kind);
      for (const column of k.columns.filter((c) => !String(c.jsonPath).startsWith('.metadata'))) {
        let node: Json | undefined = schema;
        for (const part of String(column.jsonPath).split('.').slice(1)) {
          node = (node?.properties as Json | undefined)?.[part] as Json | undefined;
        }
        expect(node?.type, `${k.kind} ${column.name}`).toBeDefined();
      }
    }
  });

  it('the spec schema is the API schema: a field the API adds appears in the CRD', () => {
    const spec = schemaOf('TraceSource').properties as Json;
    const fields = Object.keys((spec.spec as Json).properties as Json);
    expect(fields).toEqual(Object.keys(SourceSpecSchema.shape));
  });

  it('hold no secret: a Webhook names a Secret key, a source names its credential', () => {
    const webhook = (schemaOf('Webhook').properties as Json).spec as Json;
    expect(Object.keys(webhook.properties as Json)).not.toContain('secret');
    expect((webhook.properties as Json).secretRef).toMatchObject({ required: ['name', 'key'] });
    const credentials = ((schemaOf('TraceSource').properties as Json).spec as Json)
      .properties as Json;
    expect(Object.keys((credentials.credentials as Json).properties as Json)).toEqual([
      'env',
      'file',
    ]);
  });

  it('accept the examples, which the API accepts too', () => {
    const cases: [string, string, (cr: Json) => unknown][] = [
      ['tracesource', 'TraceSource', (cr) => parseSource(asApiResource(cr, 'TraceSource'))],
      ['onlineevalpolicy', 'OnlineEvalPolicy', (cr) => PolicySpecSchema.parse(cr.spec)],
      ['evalrun', 'EvalRun', (cr) => RunSpecSchema.parse(cr.spec)],
      [
        'webhook',
        'Webhook',
        (cr) => {
          // The operator sends the Secret's value in place of the reference.
          const { secretRef: _, ...spec } = cr.spec as Json;
          const parsed = parseWebhook({
            ...asApiResource(cr, 'Webhook'),
            spec: { ...spec, secret: 'sixteen-characters-at-least' },
          });
          if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
        },
      ],
    ];
    for (const [file, kind, api] of cases) {
      const cr = example(file);
      expect(cr.kind).toBe(kind);
      const validate = crdValidator(kind);
      expect(validate(cr), `${file}: ${JSON.stringify(validate.errors)}`).toBe(true);
      expect(() => api(cr), file).not.toThrow();
    }
  });

  it('refuse what the API refuses in shape (both credential forms, an unknown connector, a zero rate, no endpoint) and check names by CEL', () => {
    const validate = crdValidator('TraceSource');
    const source = example('tracesource');
    const spec = source.spec as Json;
    const bad = [
      { ...source, spec: { ...spec, credentials: { env: 'KEYS', file: 'langfuse/keys' } } },
      { ...source, spec: { ...spec, connector: 'datadog' } },
      { ...source, spec: { ...spec, poll: { maxRecordsPerSecond: 0 } } },
      { ...source, spec: { ...spec, endpoint: undefined } },
    ];
    for (const cr of bad) expect(validate(JSON.parse(JSON.stringify(cr)))).toBe(false);
    const run = crdValidator('EvalRun');
    const evalrun = example('evalrun');
    const target = { kind: 'command', argv: ['node'], url: 'http://x' };
    expect(run({ ...evalrun, spec: { ...(evalrun.spec as Json), target } })).toBe(false);
    // The name rule is CEL, which the API server evaluates: here a CEL engine evaluates it.
    const rules = schemaOf('TraceSource')['x-kubernetes-validations'] as Json[];
    const admits = (name: string) =>
      evaluateCel(String(rules[0]?.rule), {
        self: new Map([['metadata', new Map([['name', name]])]]),
      });
    expect(['prod-langfuse', 'a_b.c'].map(admits)).toEqual([true, true]);
    expect(['Bad_Name', 'a'.repeat(64), '-lead'].map(admits)).toEqual([false, false, false]);
  });
});

describe('docs/kubernetes.md', () => {
  it('shows custom resources the CRDs and the API both accept', () => {
    const text = readFileSync('docs/kubernetes.md', 'utf8');
    const blocks = [...text.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1] ?? '');
    const resources = blocks
      .flatMap((b) => b.split(/^---$/m))
      .map((doc) => parse(doc) as Json | null)
      .filter((doc): doc is Json => doc?.apiVersion === 'touchstone.dev/v1alpha1');
    expect(resources.map((r) => r.kind).sort()).toEqual([
      'EvalRun',
      'OnlineEvalPolicy',
      'TraceSource',
      'Webhook',
    ]);
    for (const cr of resources) {
      const validate = crdValidator(String(cr.kind));
      expect(validate(cr), `${cr.kind}: ${JSON.stringify(validate.errors)}`).toBe(true);
    }
    const spec = (kind: string) => resources.find((r) => r.kind === kind)?.spec;
    const source = resources.find((r) => r.kind === 'TraceSource') as Json;
    expect(() => parseSource(asApiResource(source, 'TraceSource'))).not.toThrow();
    expect(() => PolicySpecSchema.parse(spec('OnlineEvalPolicy'))).not.toThrow();
    expect(() => RunSpecSchema.parse(spec('EvalRun'))).not.toThrow();
  });
});
