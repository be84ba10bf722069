import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';

/**
 * Langfuse's published API definitions (openapi-subset.json, extracted from the generated
 * OpenAPI file at tag v4.16.0: README.md) as validators for the fake: query parameters against
 * each operation's parameter list, bodies and answers against the component schemas. OpenAPI
 * 3.0's `nullable` becomes JSON Schema's `null` type. Requests are held to the schemas strictly:
 * a property the schema does not name is an error, as is a query parameter the operation does not
 * declare (Langfuse itself often ignores them silently, which is how client bugs hide).
 */

type Json = Record<string, unknown>;

interface Subset {
  source: { repository: string; path: string; tag: string; commit: string };
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Json> };
}

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema: Json;
}

interface Operation {
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content: Record<string, { schema: Json }> };
  responses: Record<string, { content?: Record<string, { schema: Json }> }>;
}

export const SPEC = JSON.parse(
  readFileSync(join(import.meta.dirname, 'openapi-subset.json'), 'utf8'),
) as Subset;

/** Schemas whose objects may hold only the properties they name. */
const STRICT = new Set([
  'ObservationV2',
  'ObservationsV2Response',
  'ObservationsV2Meta',
  'CreateScoreRequest',
  'CreateScoreResponse',
  'HealthResponse',
  'GetScoresV3Response',
  'GetScoresV3Meta',
]);

/** OpenAPI 3.0 → JSON Schema (draft 7) for Ajv. */
function convert(schema: unknown, strict: boolean): unknown {
  if (Array.isArray(schema)) return schema.map((s) => convert(s, strict));
  if (typeof schema !== 'object' || schema === null) return schema;
  const s = schema as Json;
  const out: Json = {};
  for (const [key, value] of Object.entries(s)) {
    if (key === 'nullable' || key === 'title') continue;
    if (key === 'format' && value !== 'date-time') continue;
    if (key === '$ref' && typeof value === 'string') {
      out.$ref = value.replace('#/components/schemas/', '#/definitions/');
    } else if (key === 'properties' && typeof value === 'object' && value !== null) {
      out.properties = Object.fromEntries(
        Object.entries(value).map(([k, v]) => [k, convert(v, false)]),
      );
    } else out[key] = convert(value, false);
  }
  if (strict && out.type === 'object' && out.properties !== undefined) {
    out.additionalProperties ??= false;
  }
  if (s.nullable === true) {
    if (typeof out.type === 'string') {
      out.type = [out.type, 'null'];
      if (Array.isArray(out.enum)) out.enum = [...out.enum, null];
    } else if (out.$ref !== undefined) {
      const { $ref, ...rest } = out;
      return { ...rest, anyOf: [{ $ref }, { type: 'null' }] };
    }
  }
  return out;
}

const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/i;

const ajv = new Ajv({ strict: false, allErrors: true });
ajv.addFormat('date-time', ISO_DATE_TIME);
ajv.addSchema(
  {
    $id: 'langfuse',
    definitions: Object.fromEntries(
      Object.entries(SPEC.components.schemas).map(([name, schema]) => [
        name,
        convert(schema, STRICT.has(name)),
      ]),
    ),
  },
  'langfuse',
);

const validators = new Map<string, ValidateFunction>();

function validatorOf(schemaName: string): ValidateFunction {
  let v = validators.get(schemaName);
  if (v === undefined) {
    const found = ajv.getSchema(`langfuse#/definitions/${schemaName}`);
    if (found === undefined) throw new Error(`no schema ${schemaName} in the spec subset`);
    v = found;
    validators.set(schemaName, v);
  }
  return v;
}

/** Problems of a value against a named component schema (empty when it conforms). */
export function schemaProblems(schemaName: string, value: unknown): string[] {
  const v = validatorOf(schemaName);
  if (v(value)) return [];
  return (v.errors ?? []).map(
    (e) =>
      `${schemaName}${e.instancePath || ''} ${e.message ?? 'is invalid'}${
        e.keyword === 'additionalProperties'
          ? ` (${String((e.params as { additionalProperty?: string }).additionalProperty)})`
          : ''
      }`,
  );
}

function operation(method: string, path: string): Operation {
  const op = SPEC.paths[path]?.[method.toLowerCase()];
  if (op === undefined) throw new Error(`${method} ${path} is not in the spec subset`);
  return op;
}

function resolve(schema: Json): Json {
  const ref = schema.$ref;
  if (typeof ref !== 'string') return schema;
  const name = ref.replace('#/components/schemas/', '');
  return SPEC.components.schemas[name] ?? {};
}

function scalarProblem(name: string, raw: string, schema: Json): string | undefined {
  const s = resolve(schema);
  if (Array.isArray(s.enum) && !s.enum.includes(raw)) {
    return `query ${name}=${JSON.stringify(raw)} is not one of ${s.enum.join(', ')}`;
  }
  switch (s.type) {
    case 'integer':
      return /^-?\d+$/.test(raw) ? undefined : `query ${name} must be an integer`;
    case 'number':
      return raw.trim() !== '' && Number.isFinite(Number(raw))
        ? undefined
        : `query ${name} must be a number`;
    case 'boolean':
      return raw === 'true' || raw === 'false' ? undefined : `query ${name} must be true or false`;
    case 'string':
      if (s.format === 'date-time' && !ISO_DATE_TIME.test(raw)) {
        return `query ${name} must be an ISO 8601 date-time`;
      }
      return undefined;
    default:
      return undefined;
  }
}

/** Problems of a request's query string against the operation's declared parameters. */
export function queryProblems(method: string, path: string, query: URLSearchParams): string[] {
  const params = new Map(
    (operation(method, path).parameters ?? [])
      .filter((p) => p.in === 'query')
      .map((p) => [p.name, p]),
  );
  const problems: string[] = [];
  for (const name of new Set(query.keys())) {
    const p = params.get(name);
    if (p === undefined) {
      problems.push(`query parameter ${name} is not in the spec of ${method} ${path}`);
      continue;
    }
    const values = query.getAll(name);
    const isArray = p.schema.type === 'array';
    if (!isArray && values.length > 1) problems.push(`query ${name} is given more than once`);
    const itemSchema = isArray ? ((p.schema.items as Json | undefined) ?? {}) : p.schema;
    for (const raw of values) {
      const problem = scalarProblem(name, raw, itemSchema);
      if (problem !== undefined) problems.push(problem);
    }
  }
  for (const p of params.values()) {
    if (p.required === true && !query.has(p.name)) problems.push(`query ${p.name} is required`);
  }
  return problems;
}

/** Problems of a JSON request body against the operation's request schema. */
export function bodyProblems(method: string, path: string, body: unknown): string[] {
  const schema = operation(method, path).requestBody?.content['application/json']?.schema;
  if (schema === undefined) return body === undefined ? [] : [`${method} ${path} takes no body`];
  const name = String(schema.$ref ?? '').replace('#/components/schemas/', '');
  return schemaProblems(name, body);
}

/** The schema name of an operation's answer for a status, when the spec gives one. */
export function responseSchemaOf(method: string, path: string, status: number): string | undefined {
  const schema = operation(method, path).responses[String(status)]?.content?.['application/json']
    ?.schema;
  const ref = schema?.$ref;
  return typeof ref === 'string' ? ref.replace('#/components/schemas/', '') : undefined;
}
