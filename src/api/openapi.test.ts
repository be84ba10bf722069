import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { OPERATIONS, openApiDocument } from './openapi.js';

type Doc = {
  paths: Record<string, Record<string, { requestBody?: unknown }>>;
  components: { schemas: Record<string, object> };
};

const doc = openApiDocument() as Doc;

/** The document's component schemas compiled as JSON Schema 2020-12 (refs between them kept). */
function componentValidator(name: string) {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  ajv.addSchema({ $id: 'doc', components: doc.components }, 'doc');
  return ajv.compile({ $ref: `doc#/components/schemas/${name}` });
}

describe('OpenAPI document', () => {
  it('is valid OpenAPI 3.1 by an independent validator', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('has one path item per operation and a unique operationId each', () => {
    const ids = OPERATIONS.map((op) => op.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const op of OPERATIONS) expect(doc.paths[op.path]?.[op.method]).toBeDefined();
  });

  it('every component schema compiles as JSON Schema 2020-12', () => {
    for (const name of Object.keys(doc.components.schemas)) {
      expect(() => componentValidator(name), name).not.toThrow();
    }
  });

  it("request schemas are the handlers' own: accepted and refused bodies agree with them", () => {
    const run = componentValidator('Run');
    expect(
      run({ name: 'r', dataset: { records: [{ output: 'a' }] }, evaluators: [{ ref: 'x' }] }),
    ).toBe(true);
    // An unknown field is refused by the strict schema the run service parses with.
    expect(run({ name: 'r', dataset: { records: [] }, evaluators: [], extra: 1 })).toBe(false);

    const annotation = componentValidator('AnnotationRequest');
    expect(annotation({ name: 'correct', passed: true })).toBe(true);
    expect(annotation({ name: 'correct', value: 2 })).toBe(false);

    const policy = componentValidator('PolicyResource');
    expect(
      policy({
        apiVersion: 'touchstone.dev/v1alpha1',
        kind: 'OnlineEvalPolicy',
        metadata: { name: 'p' },
        spec: { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] },
      }),
    ).toBe(true);
    expect(
      policy({ apiVersion: 'v1', kind: 'OnlineEvalPolicy', metadata: { name: 'p' }, spec: {} }),
    ).toBe(false);

    const source = componentValidator('SourceResource');
    // The spec is checked with the source's own spec schema: an unknown connector is refused.
    expect(
      source({
        apiVersion: 'touchstone.dev/v1alpha1',
        kind: 'TraceSource',
        metadata: { name: 's' },
        spec: { connector: 'zipkin', endpoint: 'http://127.0.0.1:5000' },
      }),
    ).toBe(false);
  });

  it('marks a query parameter required only when the handler needs it', () => {
    type Param = { name: string; required?: boolean };
    const list = doc.paths['/v1alpha1/traces']?.get as { parameters: Param[] };
    expect(list.parameters.filter((p) => p.required).map((p) => p.name)).toEqual([]);
    expect(list.parameters.map((p) => p.name)).toEqual(
      expect.arrayContaining(['project', 'since', 'outcome', 'page_size', 'labels']),
    );
  });

  it('documents the error body, bearer auth and Idempotency-Key', () => {
    const text = JSON.stringify(doc);
    expect(doc.components.schemas.Error).toBeDefined();
    expect(text).toContain('"scheme":"bearer"');
    const annotate = doc.paths['/v1alpha1/traces/{traceId}/annotations']?.post as {
      parameters: { $ref?: string }[];
    };
    expect(annotate.parameters.map((p) => p.$ref)).toContain(
      '#/components/parameters/IdempotencyKey',
    );
  });
});
