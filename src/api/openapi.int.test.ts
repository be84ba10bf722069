import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import { idempotentRoutes } from './idempotency/index.js';
import { OPERATIONS, openApiDocument } from './openapi.js';

/**
 * Registered routes the document leaves out on purpose: the web UI's files (not an API) and the
 * Connect/gRPC services, which their .proto files describe (proto/).
 */
const NOT_REST = new Set([
  'GET /ui',
  'GET /ui/*',
  'POST /touchstone.v1alpha1.DatasetService/UploadDataset',
  'POST /touchstone.v1alpha1.DatasetService/ImportDataset',
  'POST /touchstone.v1alpha1.RunService/DeleteRun',
  // The tool protocol (docs/mcp.md): JSON-RPC, not REST.
  'POST /mcp',
  'GET /mcp',
  'DELETE /mcp',
]);

/** `/:name(^[^/]+)::verb` → `/{name}:verb` (`::` is find-my-way's escaped colon). */
const openApiPath = (route: string) =>
  route.replace(/\/:(\w+)(\([^)]*\))?/g, '/{$1}').replaceAll('::', ':');

/**
 * Every `METHOD /path` the server registers, read from Fastify's route tree (HEAD, which Fastify
 * adds to each GET, left out), in OpenAPI's path form.
 */
function registeredRoutes(tree: string): string[] {
  const prefixes: string[] = [];
  const routes: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^([│ ]*)[├└]── (\S+)(?: \(([A-Z, ]+)\))?$/u.exec(line);
    if (m === null) continue;
    const depth = (m[1] as string).length / 4;
    const parent = prefixes[depth - 1] ?? '';
    // The tree prints a wildcard child without the slash before it.
    const segment = m[2] === '*' && !parent.endsWith('/') ? '/*' : (m[2] as string);
    const path = parent + segment;
    prefixes[depth] = path;
    prefixes.length = depth + 1;
    for (const method of (m[3] ?? '').split(', ').filter((x) => x !== '' && x !== 'HEAD')) {
      routes.push(`${method} ${openApiPath(path)}`);
    }
  }
  return routes;
}

describe('OpenAPI document and the live server', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await testApp();
    await t.app.server.ready();
  });
  afterAll(() => t.close());

  it('describes every registered REST route, and only those', () => {
    const registered = registeredRoutes(t.app.server.printRoutes({ commonPrefix: false }));
    // The Connect services answer every method; one per service path stands for them.
    const rest = registered.filter(
      (r) => !NOT_REST.has(r) && !/^[A-Z]+ \/touchstone\.v1alpha1\./.test(r),
    );
    expect(registered).toEqual(expect.arrayContaining([...NOT_REST]));
    const documented = OPERATIONS.map((op) => `${op.method.toUpperCase()} ${op.path}`);
    expect(rest.sort()).toEqual(documented.sort());
  });

  it('lists Idempotency-Key on exactly the routes that honour it', () => {
    const marked = idempotentRoutes(t.app.server).map((r) => `${r.method} ${openApiPath(r.url)}`);
    const documented = OPERATIONS.filter((op) => op.idempotent).map(
      (op) => `${op.method.toUpperCase()} ${op.path}`,
    );
    expect(documented.sort()).toEqual(marked.sort());
  });

  it("answers match the document's response schemas (the resource envelope, the error body)", async () => {
    type JsonContent = { content: { 'application/json': { schema: object } } };
    type Responses = { responses: Record<string, JsonContent> };
    const doc = openApiDocument() as {
      paths: Record<string, Record<string, Responses>>;
      components: object;
    };
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    ajv.addSchema({ components: doc.components }, 'doc');
    const matches = (path: string, method: string, status: string, body: unknown) => {
      const operation = doc.paths[path]?.[method] as Responses;
      const { schema } = (operation.responses[status] as JsonContent).content['application/json'];
      // Refs inside the operation point into the document registered as `doc`.
      const validate = ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/', '"doc#/')));
      return validate(body) || validate.errors;
    };
    const policy = {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name: 'described' },
      spec: { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] },
    };
    const applied = await t.app.server.inject({
      method: 'POST',
      url: '/v1alpha1/policies',
      payload: policy,
    });
    expect(applied.statusCode).toBe(200);
    expect(matches('/v1alpha1/policies', 'post', '200', applied.json())).toBe(true);
    const got = await t.app.server.inject({ url: '/v1alpha1/policies/described' });
    expect(matches('/v1alpha1/policies/{name}', 'get', '200', got.json())).toBe(true);
    const missing = await t.app.server.inject({ url: '/v1alpha1/policies/absent' });
    expect(missing.statusCode).toBe(404);
    expect(matches('/v1alpha1/policies/{name}', 'get', 'default', missing.json())).toBe(true);
    // And a wrong answer would be caught: the envelope needs its apiVersion.
    const { apiVersion: _, ...bare } = got.json();
    expect(matches('/v1alpha1/policies/{name}', 'get', '200', bare)).not.toBe(true);
  });

  it('serves the document at GET /v1alpha1/openapi.json', async () => {
    const res = await t.app.server.inject({ url: '/v1alpha1/openapi.json' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.json()).toEqual(openApiDocument());
  });
});
