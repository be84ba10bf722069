import { PassThrough } from 'node:stream';
import { Command } from 'commander';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { httpStatusOf, toErrorBody } from '../api/errors.js';
import { OPENAPI_PATH, resourceOperations } from '../api/openapi.js';
import { resourceRoutes } from '../api/resource-routes.js';
import { OPEN_PRINCIPAL, type Principal } from '../auth/index.js';
import { resourceCommand } from '../cli/resources.js';
import { CoreErrors, isTouchstoneError, ResourceNameSchema } from '../core/index.js';
import type { ResourceRows } from '../store/index.js';
import type { ResourceDescriptor } from './descriptor.js';
import { ResourceService } from './service.js';

/**
 * A resource that exists only here, defined as a new one would be: a descriptor, a schema, and
 * its hooks. Routes, OpenAPI operations and CLI verbs come from the kit, none written for it.
 */
const GadgetSchema = z.strictObject({
  name: ResourceNameSchema,
  project: ResourceNameSchema.optional(),
  size: z.number().int().min(1),
});
type Gadget = z.infer<typeof GadgetSchema>;

interface GadgetRecord {
  project: string;
  name: string;
  size: number;
  createdAt: string;
}

const GADGET: ResourceDescriptor = {
  kind: 'Gadget',
  title: 'Gadget',
  singular: 'gadget',
  plural: 'gadgets',
  access: { read: 'datasets.read', write: 'datasets.write' },
  bodies: { Gadget: GadgetSchema },
  envelope: false,
  idempotentDelete: false,
  withhold: [],
};

/** The gadgets' table: no database has one, so it lives in memory behind the same port. */
class GadgetRows implements ResourceRows<GadgetRecord> {
  readonly rows = new Map<string, GadgetRecord>();

  async get(project: string, name: string) {
    return this.rows.get(`${project}/${name}`);
  }

  async list(project: string, page: { pageSize: number; pageToken?: string }) {
    const all = [...this.rows.values()]
      .filter((r) => r.project === project && r.name > (page.pageToken ?? ''))
      .sort((a, b) => (a.name < b.name ? -1 : 1));
    const items = all.slice(0, page.pageSize);
    const last = items.at(-1);
    return all.length > page.pageSize && last !== undefined
      ? { items, nextPageToken: last.name }
      : { items };
  }

  async delete(project: string, name: string) {
    return this.rows.delete(`${project}/${name}`);
  }
}

type Applied = GadgetRecord & { created?: boolean };

class GadgetService extends ResourceService<Gadget, GadgetRecord, GadgetRecord, Applied> {
  readonly audit: object[];
  readonly table: GadgetRows;

  constructor() {
    const audit: object[] = [];
    const table = new GadgetRows();
    super(
      GADGET,
      {
        clock: { now: () => Date.parse('2026-01-02T03:04:05Z') },
        logger: { info: (line) => audit.push(line) },
      },
      table,
    );
    this.audit = audit;
    this.table = table;
  }

  protected parse(input: unknown): Gadget {
    const r = GadgetSchema.safeParse(input);
    if (!r.success) throw CoreErrors.INVALID_ARGUMENT('invalid gadget');
    return r.data;
  }

  protected async check(gadget: Gadget): Promise<void> {
    if (gadget.size > 10) throw CoreErrors.INVALID_ARGUMENT('a gadget is at most 10 big');
  }

  protected preview(g: Gadget, project: string, existing: GadgetRecord | undefined, now: string) {
    return { project, name: g.name, size: g.size, createdAt: existing?.createdAt ?? now };
  }

  protected async write(g: Gadget, project: string, now: number): Promise<Applied> {
    const created = !this.table.rows.has(`${project}/${g.name}`);
    const record = { ...this.preview(g, project, undefined, new Date(now).toISOString()) };
    this.table.rows.set(`${project}/${g.name}`, record);
    return { ...record, created };
  }

  protected view(record: GadgetRecord) {
    return record;
  }

  protected notFound(project: string, name: string) {
    return CoreErrors.NOT_FOUND(`no gadget "${name}" in project "${project}"`);
  }
}

async function server(service: GadgetService, principal: Principal = OPEN_PRINCIPAL) {
  const app = Fastify();
  app.decorateRequest('principal');
  app.addHook('onRequest', async (request) => {
    request.principal = principal;
  });
  app.setErrorHandler((err, _request, reply) => {
    if (!isTouchstoneError(err)) throw err;
    return reply.status(httpStatusOf(err.kind)).send(toErrorBody(err, 'r'));
  });
  resourceRoutes(app, service);
  await app.ready();
  return app;
}

describe('resource kit: a new resource is a descriptor, a schema and its hooks', () => {
  it('gets apply (validate_only), list (paged), get and delete routes, audited by name', async () => {
    const service = new GadgetService();
    const app = await server(service);
    const post = (body: unknown, query = '') =>
      app.inject({ method: 'POST', url: `/v1alpha1/gadgets${query}`, payload: body as object });

    const dry = await post({ name: 'a', size: 1 }, '?validate_only=true');
    expect(dry.statusCode).toBe(200);
    expect(dry.json()).toEqual({
      project: 'default',
      name: 'a',
      size: 1,
      createdAt: '2026-01-02T03:04:05.000Z',
    });
    expect(service.table.rows.size).toBe(0);
    expect((await post({ name: 'a', size: 11 }, '?validate_only=true')).statusCode).toBe(400);
    expect((await post({ name: 'a', size: 1, colour: 'red' })).statusCode).toBe(400);

    for (const name of ['c', 'a', 'b']) {
      expect((await post({ name, size: 2 })).json()).toMatchObject({ name, created: true });
    }
    expect((await post({ name: 'a', size: 3 })).json()).toMatchObject({ size: 3, created: false });
    expect((await post({ name: 'x', size: 1, project: 'other' })).json().project).toBe('other');

    const first = await app.inject({ url: '/v1alpha1/gadgets?page_size=2' });
    expect(first.json().gadgets.map((g: GadgetRecord) => g.name)).toEqual(['a', 'b']);
    const token = first.json().next_page_token as string;
    const rest = await app.inject({ url: `/v1alpha1/gadgets?page_size=2&page_token=${token}` });
    expect(rest.json()).toEqual({ gadgets: [expect.objectContaining({ name: 'c' })] });
    const other = await app.inject({ url: '/v1alpha1/gadgets?project=other' });
    expect(other.json().gadgets.map((g: GadgetRecord) => g.name)).toEqual(['x']);

    expect((await app.inject({ url: '/v1alpha1/gadgets/a' })).json().size).toBe(3);
    const deleted = await app.inject({ method: 'DELETE', url: '/v1alpha1/gadgets/a' });
    expect(deleted.json()).toMatchObject({ name: 'a', size: 3 });
    const gone = await app.inject({ url: '/v1alpha1/gadgets/a' });
    expect(gone.statusCode).toBe(404);
    expect(gone.json().error.code).toBe('NOT_FOUND');

    const actions = service.audit.map((l) => (l as { audit: { action: string } }).audit.action);
    expect(actions).toContain('gadgets.apply');
    expect(actions).toContain('gadgets.delete');
    expect(service.audit.at(-1)).toMatchObject({ audit: { gadget: 'a' }, outcome: 'ok' });
    await app.close();
  });

  it("checks the descriptor's permissions and scopes a key to its project", async () => {
    const reader: Principal = {
      ...OPEN_PRINCIPAL,
      project: 'p1',
      permissions: new Set(['datasets.read']),
    };
    const service = new GadgetService();
    const app = await server(service, reader);
    const apply = await app.inject({
      method: 'POST',
      url: '/v1alpha1/gadgets',
      payload: { name: 'a', size: 1 },
    });
    expect(apply.statusCode).toBe(403);
    expect((await app.inject({ url: '/v1alpha1/gadgets?project=p2' })).statusCode).toBe(403);
    expect((await app.inject({ url: '/v1alpha1/gadgets' })).json()).toEqual({ gadgets: [] });
    await app.close();
  });

  it('is described in OpenAPI by the same descriptor', () => {
    const ops = resourceOperations(GADGET);
    expect(ops.map((op) => [op.method, op.path, op.operationId, op.access])).toEqual([
      ['post', '/v1alpha1/gadgets', 'applyGadget', 'datasets.write'],
      ['get', '/v1alpha1/gadgets', 'listGadgets', 'datasets.read'],
      ['get', '/v1alpha1/gadgets/{name}', 'getGadget', 'datasets.read'],
      ['delete', '/v1alpha1/gadgets/{name}', 'deleteGadget', 'datasets.write'],
    ]);
    expect(ops[0]?.body).toEqual(['Gadget']);
    expect(OPENAPI_PATH).toBe('/v1alpha1/openapi.json');
  });

  it('gets the CLI verbs apply -f [--dry-run], list, get and delete', async () => {
    const service = new GadgetService();
    const run = async (args: string[], stdin = '') => {
      const out = new PassThrough();
      let text = '';
      out.on('data', (chunk) => {
        text += String(chunk);
      });
      const io = { env: {}, stdout: out, stderr: new PassThrough(), onShutdownSignal() {} };
      const program = new Command().exitOverride();
      resourceCommand<GadgetRecord, Applied>(program, io, () => stdin, {
        noun: 'gadget',
        plural: 'gadgets',
        description: 'Manage gadgets.',
        // Local mode: the command runs on the service itself.
        scope: (_flags, _io, _remote, local) => local(service, OPEN_PRINCIPAL),
        apply: {
          description: 'Create or replace gadgets.',
          file: 'Gadget documents',
          project: 'project',
          dryRun: 'check without storing',
          line: (g, verb) => `${verb}: gadget ${g.name} (size ${g.size})`,
        },
        list: {
          description: 'List gadgets.',
          headers: ['NAME', 'SIZE'],
          row: (g) => [g.name, String(g.size)],
        },
        get: { description: 'Show a gadget.' },
        delete: { description: 'Delete a gadget.', line: (_g, name) => `deleted gadget ${name}` },
      });
      await program.parseAsync(['node', 'touchstone', ...args]);
      return text;
    };
    const docs = 'name: a\nsize: 1\n---\nname: b\nsize: 2\n';
    expect(await run(['gadget', 'apply', '-f', '-', '--dry-run'], docs)).toBe(
      'valid: gadget a (size 1)\nvalid: gadget b (size 2)\n',
    );
    expect(service.table.rows.size).toBe(0);
    expect(await run(['gadget', 'apply', '-f', '-'], docs)).toBe(
      'created: gadget a (size 1)\ncreated: gadget b (size 2)\n',
    );
    expect(await run(['gadget', 'list'])).toBe('NAME  SIZE\na     1\nb     2\n');
    expect(JSON.parse(await run(['gadget', 'get', 'b']))).toMatchObject({ name: 'b', size: 2 });
    expect(await run(['gadget', 'delete', 'b'])).toBe('deleted gadget b\n');
    expect(await run(['gadget', 'list', '--json'])).toContain('"name": "a"');
  });
});
