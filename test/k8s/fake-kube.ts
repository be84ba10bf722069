import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Ajv, type ValidateFunction } from 'ajv';
import { crd, KINDS } from '../../scripts/gen-k8s.js';

/**
 * An in-process Kubernetes API server, enough for the operator: the touchstone.dev custom
 * resources (list with resourceVersion, watch streaming with 410 Gone once history is
 * compacted, get, create, merge patch with resourceVersion preconditions, delete with finalizers
 * and deletionTimestamp, the status subresource), Secrets, Events and coordination.k8s.io
 * Leases. Every custom resource it stores is checked against its CRD's schema, so the fake and
 * the CRDs cannot drift apart. Plain HTTP on loopback; the client needs `skipTLSVerify`.
 */

type Json = Record<string, unknown>;

interface Stored {
  object: Json;
  /** `<group>/<plural>`: what a watch of that collection sees. */
  collection: string;
}

interface Watcher {
  collection: string;
  namespace: string | undefined;
  res: ServerResponse;
}

export interface WatchedEvent {
  type: string;
  object: Json;
  rv: number;
}

const meta = (o: Json) => o.metadata as Json;

/** RFC 7386: objects merge, null deletes, everything else replaces. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const out: Json =
    typeof target === 'object' && target !== null && !Array.isArray(target)
      ? { ...(target as Json) }
      : {};
  for (const [k, v] of Object.entries(patch as Json)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function status(code: number, reason: string, message: string): Json {
  return { kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message };
}

/** A Lease's times are MicroTime: the API server refuses any other number of fractional digits. */
function leaseProblem(lease: Json): string | undefined {
  const spec = (lease.spec ?? {}) as Json;
  for (const field of ['acquireTime', 'renewTime']) {
    const value = spec[field];
    if (value !== undefined && !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/.test(String(value))) {
      return `spec.${field}: parsing time "${String(value)}": not a MicroTime`;
    }
  }
  return undefined;
}

export class FakeKube {
  private rv = 0;
  /** Watches from before this version get 410 Gone (history compacted). */
  private oldestRv = 0;
  private readonly objects = new Map<string, Stored>();
  private readonly history: (WatchedEvent & { collection: string })[] = [];
  private readonly watchers = new Set<Watcher>();
  private readonly validators = new Map<string, ValidateFunction>();
  /** Requests seen, `METHOD path`, for assertions. */
  readonly requests: string[] = [];
  /** Watch requests answered with 410 Gone. */
  gone = 0;

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<FakeKube> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const fake = new FakeKube(server, `http://127.0.0.1:${port}`);
    const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
    for (const k of KINDS) {
      const versions = (crd(k).spec as Json).versions as Json[];
      const schema = ((versions[0] as Json).schema as Json).openAPIV3Schema as Json;
      fake.validators.set(`touchstone.dev/${k.plural}`, ajv.compile(schema));
    }
    server.on('request', (req, res) => fake.handle(req, res));
    return fake;
  }

  /** A kubeconfig (YAML) pointing at this server. */
  kubeconfig(): string {
    return [
      'apiVersion: v1',
      'kind: Config',
      'clusters: [{name: fake, cluster: {server: "URL", insecure-skip-tls-verify: true}}]',
      'users: [{name: fake, user: {token: fake-token}}]',
      'contexts: [{name: fake, context: {cluster: fake, user: fake}}]',
      'current-context: fake',
      '',
    ]
      .join('\n')
      .replace('URL', this.url);
  }

  async close(): Promise<void> {
    for (const w of this.watchers) w.res.end();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  /** Ends every open watch (as an API server does at its timeout). */
  endWatches(): void {
    for (const w of this.watchers) w.res.end();
    this.watchers.clear();
  }

  /** Forgets the history: watches from an older version get 410 Gone. Ends open watches. */
  compact(): void {
    this.oldestRv = this.rv;
    this.history.length = 0;
    this.endWatches();
  }

  // ---- test-side access -------------------------------------------------------------------

  private key(collection: string, namespace: string, name: string): string {
    return `${collection}/${namespace}/${name}`;
  }

  get(collection: string, namespace: string, name: string): Json | undefined {
    return this.objects.get(this.key(collection, namespace, name))?.object;
  }

  list(collection: string): Json[] {
    return [...this.objects.values()]
      .filter((s) => s.collection === collection)
      .map((s) => s.object);
  }

  /** Creates or replaces (with a new generation when the spec changed) as a client would. */
  apply(collection: string, object: Json): Json {
    const m = meta(object);
    const key = this.key(collection, String(m.namespace), String(m.name));
    const existing = this.objects.get(key)?.object;
    if (existing === undefined) return this.create(collection, object);
    const updated = { ...existing, ...object, metadata: { ...meta(existing), ...m } };
    return this.update(collection, existing, updated);
  }

  putSecret(namespace: string, name: string, data: Record<string, string>): void {
    const encoded = Object.fromEntries(
      Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
    );
    this.apply('/secrets', {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name, namespace },
      data: encoded,
    });
  }

  /** Marks for deletion (finalizers) or deletes, as `kubectl delete` does. */
  delete(collection: string, namespace: string, name: string): Json | undefined {
    const existing = this.get(collection, namespace, name);
    if (existing === undefined) return undefined;
    const finalizers = (meta(existing).finalizers ?? []) as string[];
    if (finalizers.length === 0) {
      this.remove(collection, existing);
      return existing;
    }
    if (meta(existing).deletionTimestamp !== undefined) return existing;
    return this.update(collection, existing, {
      ...existing,
      metadata: {
        ...meta(existing),
        deletionTimestamp: new Date().toISOString(),
        generation: Number(meta(existing).generation ?? 1) + 1,
      },
    });
  }

  events(namespace?: string): Json[] {
    return this.list('/events').filter(
      (e) => namespace === undefined || meta(e).namespace === namespace,
    );
  }

  // ---- storage ------------------------------------------------------------------------------

  private validate(collection: string, object: Json): string | undefined {
    if (collection === 'coordination.k8s.io/leases') return leaseProblem(object);
    const validate = this.validators.get(collection);
    if (validate === undefined || validate(object)) return undefined;
    return (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`).join(', ');
  }

  private create(collection: string, object: Json): Json {
    const m = meta(object);
    const stored = {
      ...object,
      metadata: {
        ...m,
        name: m.name ?? `${String(m.generateName ?? 'x-')}${randomUUID().slice(0, 5)}`,
        uid: randomUUID(),
        generation: 1,
        creationTimestamp: new Date().toISOString(),
        resourceVersion: String(++this.rv),
      },
    };
    const sm = meta(stored);
    this.objects.set(this.key(collection, String(sm.namespace), String(sm.name)), {
      object: stored,
      collection,
    });
    this.emit(collection, 'ADDED', stored);
    return stored;
  }

  private update(collection: string, _old: Json, next: Json): Json {
    const m = meta(next);
    const stored = { ...next, metadata: { ...m, resourceVersion: String(++this.rv) } };
    if (m.deletionTimestamp !== undefined && ((m.finalizers ?? []) as string[]).length === 0) {
      this.remove(collection, stored);
      return stored;
    }
    this.objects.set(this.key(collection, String(m.namespace), String(m.name)), {
      object: stored,
      collection,
    });
    this.emit(collection, 'MODIFIED', stored);
    return stored;
  }

  private remove(collection: string, object: Json): void {
    const m = meta(object);
    this.objects.delete(this.key(collection, String(m.namespace), String(m.name)));
    this.emit(collection, 'DELETED', {
      ...object,
      metadata: { ...m, resourceVersion: String(++this.rv) },
    });
  }

  private emit(collection: string, type: string, object: Json): void {
    const rv = Number(meta(object).resourceVersion);
    this.history.push({ collection, type, object, rv });
    for (const w of this.watchers) {
      if (
        w.collection === collection &&
        (w.namespace === undefined || w.namespace === meta(object).namespace)
      ) {
        w.res.write(`${JSON.stringify({ type, object })}\n`);
      }
    }
  }

  // ---- HTTP -----------------------------------------------------------------------------------

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.url);
    this.requests.push(`${req.method} ${url.pathname}`);
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString();
    const body = text === '' ? undefined : (JSON.parse(text) as Json);
    const send = (code: number, value: unknown) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    const route = this.route(url.pathname);
    if (route === undefined) {
      send(404, status(404, 'NotFound', `no route ${url.pathname}`));
      return;
    }
    const { collection, namespace, name, sub } = route;
    const method = req.method ?? 'GET';
    if (name === undefined && method === 'GET') {
      if (url.searchParams.get('watch') === 'true') {
        this.watch(
          collection,
          namespace,
          Number(url.searchParams.get('resourceVersion') ?? 0),
          res,
        );
        return;
      }
      const items = this.list(collection).filter(
        (o) => namespace === undefined || meta(o).namespace === namespace,
      );
      send(200, {
        kind: 'List',
        apiVersion: 'v1',
        metadata: { resourceVersion: String(this.rv) },
        items,
      });
      return;
    }
    if (name === undefined && method === 'POST') {
      const object = { ...body, metadata: { ...meta(body ?? {}), namespace } };
      const m = meta(object);
      if (m.name !== undefined && this.get(collection, String(namespace), String(m.name))) {
        send(409, status(409, 'AlreadyExists', `${String(m.name)} already exists`));
        return;
      }
      const invalid = this.validate(collection, object);
      if (invalid !== undefined) {
        send(422, status(422, 'Invalid', invalid));
        return;
      }
      send(201, this.create(collection, object));
      return;
    }
    const existing = name === undefined ? undefined : this.get(collection, String(namespace), name);
    if (existing === undefined) {
      send(404, status(404, 'NotFound', `${collection} ${String(name)} not found`));
      return;
    }
    if (method === 'GET') {
      send(200, existing);
      return;
    }
    if (method === 'DELETE') {
      send(200, this.delete(collection, String(namespace), String(name)));
      return;
    }
    const precondition = ((body?.metadata ?? {}) as Json).resourceVersion;
    if (precondition !== undefined && precondition !== meta(existing).resourceVersion) {
      send(
        409,
        status(
          409,
          'Conflict',
          'the object has been modified; please apply your changes to the latest version',
        ),
      );
      return;
    }
    let next: Json;
    if (method === 'PUT') {
      next = { ...(body ?? {}), metadata: { ...meta(existing), ...meta(body ?? {}) } };
      const invalid = this.validate(collection, next);
      if (invalid !== undefined) {
        send(422, status(422, 'Invalid', invalid));
        return;
      }
    } else if (
      method === 'PATCH' &&
      req.headers['content-type'] === 'application/merge-patch+json'
    ) {
      const { metadata: patchMeta, ...rest } = body ?? {};
      if (sub === 'status') {
        next = { ...existing, status: mergePatch(existing.status, (rest as Json).status) };
      } else {
        const { status: _ignored, ...spec } = rest as Json;
        next = mergePatch(existing, spec) as Json;
        const { resourceVersion: _rv, ...metaPatch } = (patchMeta ?? {}) as Json;
        next.metadata = mergePatch(meta(existing), metaPatch);
        if (JSON.stringify(next.spec) !== JSON.stringify(existing.spec)) {
          meta(next).generation = Number(meta(existing).generation ?? 1) + 1;
        }
      }
    } else {
      send(415, status(415, 'UnsupportedMediaType', `${String(req.headers['content-type'])}`));
      return;
    }
    const invalid = this.validate(collection, next);
    if (invalid !== undefined) {
      send(422, status(422, 'Invalid', invalid));
      return;
    }
    send(200, this.update(collection, existing, next));
  }

  private watch(
    collection: string,
    namespace: string | undefined,
    from: number,
    res: ServerResponse,
  ): void {
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    if (from < this.oldestRv) {
      this.gone++;
      res.end(
        `${JSON.stringify({ type: 'ERROR', object: status(410, 'Expired', 'too old resource version') })}\n`,
      );
      return;
    }
    for (const e of this.history) {
      if (
        e.collection === collection &&
        e.rv > from &&
        (namespace === undefined || meta(e.object).namespace === namespace)
      ) {
        res.write(`${JSON.stringify({ type: e.type, object: e.object })}\n`);
      }
    }
    const watcher = { collection, namespace, res };
    this.watchers.add(watcher);
    // `res`, not `req`: the request's close fires once its body has been read.
    res.on('close', () => this.watchers.delete(watcher));
  }

  /** `/apis/<group>/<version>[/namespaces/<ns>]/<plural>[/<name>[/status]]` and `/api/v1/…`. */
  private route(path: string):
    | {
        collection: string;
        namespace: string | undefined;
        name: string | undefined;
        sub: string | undefined;
      }
    | undefined {
    const parts = path.split('/').filter((p) => p !== '');
    let rest: string[];
    let group: string;
    if (parts[0] === 'api' && parts[1] === 'v1') {
      group = '';
      rest = parts.slice(2);
    } else if (parts[0] === 'apis' && parts.length >= 4) {
      group = parts[1] as string;
      rest = parts.slice(3);
    } else {
      return undefined;
    }
    let namespace: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    const [plural, name, sub] = rest;
    if (plural === undefined) return undefined;
    return { collection: `${group}/${plural}`, namespace, name, sub };
  }
}
