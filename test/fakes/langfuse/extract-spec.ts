/**
 * Regenerates openapi-subset.json from Langfuse's generated OpenAPI file
 * (`web/public/generated/api/openapi.yml` in langfuse/langfuse, or `/generated/api/openapi.yml`
 * on a running Langfuse): the operations the connector and the fake use, and the schemas they
 * reference, with descriptions and examples left out (structure only).
 *
 *   npx tsx test/fakes/langfuse/extract-spec.ts path/to/openapi.yml v4.16.0 <commit> \
 *     > test/fakes/langfuse/openapi-subset.json
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

export const OPERATIONS: readonly [string, string][] = [
  ['/api/public/v2/observations', 'get'],
  ['/api/public/scores', 'post'],
  ['/api/public/v3/scores', 'get'],
  ['/api/public/health', 'get'],
  ['/api/public/score-configs', 'get'],
  ['/api/public/score-configs', 'post'],
  ['/api/public/score-configs/{configId}', 'patch'],
];

/** Prose and examples; an operation's `tags` and `operationId` are dropped separately. */
const DROPPED = new Set(['description', 'example', 'examples']);

function strip(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(strip);
  if (typeof v !== 'object' || v === null) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) if (!DROPPED.has(k)) out[k] = strip(x);
  return out;
}

function refsOf(v: unknown, into: Set<string>): void {
  if (Array.isArray(v)) for (const x of v) refsOf(x, into);
  else if (typeof v === 'object' && v !== null) {
    for (const [k, x] of Object.entries(v)) {
      if (k === '$ref' && typeof x === 'string') into.add(x.replace('#/components/schemas/', ''));
      else refsOf(x, into);
    }
  }
}

export function extract(
  openapiText: string,
  version: string,
  commit: string,
): Record<string, unknown> {
  const doc = parse(openapiText, { maxAliasCount: -1 }) as {
    paths: Record<string, Record<string, unknown>>;
    components: { schemas: Record<string, unknown>; securitySchemes?: unknown };
  };
  const paths: Record<string, Record<string, unknown>> = {};
  const wanted = new Set<string>();
  for (const [path, method] of OPERATIONS) {
    const raw = doc.paths[path]?.[method];
    if (raw === undefined) throw new Error(`${method} ${path} is not in the file`);
    const { tags: _tags, operationId: _id, ...rest } = raw as Record<string, unknown>;
    const op = strip(rest);
    paths[path] = { ...(paths[path] ?? {}), [method]: op };
    refsOf(op, wanted);
  }
  const schemas: Record<string, unknown> = {};
  const queue = [...wanted];
  while (queue.length > 0) {
    const name = queue.shift() as string;
    if (name in schemas) continue;
    const schema = strip(doc.components.schemas[name]);
    if (schema === undefined) throw new Error(`schema ${name} is not in the file`);
    schemas[name] = schema;
    const more = new Set<string>();
    refsOf(schema, more);
    queue.push(...more);
  }
  return {
    source: {
      repository: 'https://github.com/langfuse/langfuse',
      path: 'web/public/generated/api/openapi.yml',
      tag: version,
      commit,
    },
    openapi: (doc as unknown as { openapi: string }).openapi,
    paths,
    components: { schemas, securitySchemes: strip(doc.components.securitySchemes) },
  };
}

if (process.argv[1]?.endsWith('extract-spec.ts')) {
  const [file, version, commit] = process.argv.slice(2);
  if (file === undefined || version === undefined || commit === undefined) {
    console.error('usage: extract-spec.ts OPENAPI_YML VERSION COMMIT');
  } else {
    const out = extract(readFileSync(file, 'utf8'), version, commit);
    console.log(JSON.stringify(out, null, 2));
  }
}
