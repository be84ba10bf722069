import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  MlflowStoreFake,
  readBody,
  type StoredTrace,
  sendError,
  sendJson,
} from '../mlflow/store.js';

/**
 * A fake Databricks workspace (README.md): the OAuth token endpoint, the MLflow v3 routes of
 * experiment traces with their span data in a separate fake cloud storage reached by signed URIs,
 * and the v4 Unity Catalog routes (long-running search, operations, batchGet, assessments). It
 * verifies what it receives and records every deviation in `violations`.
 */

export interface DatabricksFakeOptions {
  clientId?: string;
  clientSecret?: string;
  /** A personal access token the workspace accepts. */
  pat?: string;
  sqlWarehouseId?: string;
  /** Lifetime of issued OAuth tokens, seconds. */
  tokenLifetimeS?: number;
  /** Time the search operations run on (a test's controllable clock). */
  now?: () => number;
}

interface Operation {
  name: string;
  doneAtMs: number;
  response: Record<string, unknown> | string;
}

export class DatabricksFake {
  readonly store = new MlflowStoreFake();
  readonly violations = this.store.violations;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly pat: string;
  readonly sqlWarehouseId: string;
  /** Token exchanges made. */
  tokenRequests = 0;
  /** Valid bearer tokens: the PAT and the OAuth tokens not revoked. */
  private readonly valid = new Set<string>();
  /** Set: the token endpoint answers this instead (a 500, an HTML page). */
  tokenFault: { status: number; contentType: string; body: string } | undefined;
  /** Set: every workspace call answers 401 whatever the token. */
  rejectAll = false;
  /** How long a catalog-schema search runs, by `now`. */
  searchDurationMs = 0;
  /** Requests to the storage host: method, path, and the headers that matter. */
  readonly downloads: { path: string; authorization?: string; headers: Record<string, string> }[] =
    [];
  /** Signed URIs point here instead of the storage fake when set (a private address, say). */
  signedUriOverride: string | undefined;
  /** Paths of workspace requests, in order (`POST /oidc/v1/token`). */
  readonly seen: string[] = [];
  private readonly operations = new Map<string, Operation>();
  private readonly experiments = new Set<string>();
  private readonly signingKey = randomBytes(16);
  private readonly now: () => number;
  private tokenLifetimeS: number;
  url = '';
  storageUrl = '';

  private constructor(
    private readonly workspace: Server,
    private readonly storage: Server,
    options: DatabricksFakeOptions,
  ) {
    this.clientId = options.clientId ?? 'sp-client-1';
    this.clientSecret = options.clientSecret ?? `dose${randomBytes(12).toString('hex')}`;
    this.pat = options.pat ?? `dapi${randomBytes(16).toString('hex')}`;
    this.sqlWarehouseId = options.sqlWarehouseId ?? 'wh-0123';
    this.tokenLifetimeS = options.tokenLifetimeS ?? 3600;
    this.now = options.now ?? Date.now;
    this.valid.add(this.pat);
  }

  static async start(options: DatabricksFakeOptions = {}): Promise<DatabricksFake> {
    let fake: DatabricksFake | undefined;
    const workspace = createServer((req, res) => {
      fake?.workspaceRequest(req, res).catch((err: unknown) => {
        fake?.violations.push(`fake error: ${String(err)}`);
        sendError(res, 500, 'INTERNAL_ERROR', 'fake failed');
      });
    });
    const storage = createServer((req, res) => fake?.storageRequest(req, res));
    for (const s of [workspace, storage]) {
      await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    }
    fake = new DatabricksFake(workspace, storage, options);
    fake.url = `http://127.0.0.1:${(workspace.address() as AddressInfo).port}`;
    fake.storageUrl = `http://127.0.0.1:${(storage.address() as AddressInfo).port}`;
    return fake;
  }

  addExperiment(id: string): void {
    this.experiments.add(id);
  }

  setTokenLifetime(seconds: number): void {
    this.tokenLifetimeS = seconds;
  }

  /** Every OAuth token issued so far stops working (the PAT keeps working). */
  revokeTokens(): void {
    for (const t of this.valid) if (t !== this.pat) this.valid.delete(t);
  }

  async close(): Promise<void> {
    for (const s of [this.workspace, this.storage]) {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
  }

  // -------------------------------------------------------------------------------------------
  // Workspace
  // -------------------------------------------------------------------------------------------

  private async workspaceRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://workspace');
    const body = await readBody(req);
    this.seen.push(`${req.method} ${url.pathname}`);
    if (url.pathname === '/oidc/v1/token') return this.token(req, body, res);
    const auth = req.headers.authorization ?? '';
    const token = auth.startsWith('Bearer ') ? auth.slice(7) : undefined;
    if (this.rejectAll || token === undefined || !this.valid.has(token)) {
      return sendError(res, 401, 'UNAUTHENTICATED', 'Invalid access token.');
    }
    let json: Record<string, unknown> = {};
    if (body.length > 0) {
      if (!(req.headers['content-type'] ?? '').startsWith('application/json')) {
        this.violations.push(`${url.pathname}: body without a JSON content type`);
      }
      json = JSON.parse(body.toString()) as Record<string, unknown>;
    }
    return this.route(req.method ?? 'GET', url, json, res);
  }

  /** The client-credentials grant: Basic client auth, form body, scope all-apis. */
  private token(req: IncomingMessage, body: Buffer, res: ServerResponse) {
    this.tokenRequests++;
    if (req.method !== 'POST') this.violations.push('token: not a POST');
    if (req.headers['content-type'] !== 'application/x-www-form-urlencoded') {
      this.violations.push(`token: content-type ${req.headers['content-type']}`);
    }
    const form = new URLSearchParams(body.toString());
    if (
      form.get('grant_type') !== 'client_credentials' ||
      form.get('scope') !== 'all-apis' ||
      [...form.keys()].length !== 2
    ) {
      this.violations.push(`token: form body ${body.toString()}`);
    }
    if (this.tokenFault !== undefined) {
      res.writeHead(this.tokenFault.status, { 'content-type': this.tokenFault.contentType });
      res.end(this.tokenFault.body);
      return;
    }
    const expected = `Basic ${Buffer.from(`${this.clientId}:${this.clientSecret}`).toString('base64')}`;
    if (req.headers.authorization !== expected) {
      return sendJson(res, 401, {
        error: 'invalid_client',
        error_description: 'Client authentication failed',
      });
    }
    const access = `dbx-oauth-${randomBytes(12).toString('hex')}`;
    this.valid.add(access);
    sendJson(res, 200, {
      access_token: access,
      token_type: 'Bearer',
      expires_in: this.tokenLifetimeS,
      scope: 'all-apis',
    });
  }

  private route(method: string, url: URL, json: Record<string, unknown>, res: ServerResponse) {
    const key = `${method} ${url.pathname}`;
    const arg = (m: RegExpExecArray, i: number) => decodeURIComponent(m[i] as string);
    const routes: [RegExp, (m: RegExpExecArray) => unknown][] = [
      [/^GET \/api\/2\.0\/mlflow\/experiments\/get$/, () => this.experiment(url, res)],
      [/^POST \/api\/3\.0\/mlflow\/traces\/search$/, () => this.v3Search(json, res)],
      [
        /^GET \/api\/2\.0\/mlflow\/traces\/([^/]+)\/credentials-for-data-download$/,
        (m) => this.downloadCredentials(arg(m, 1), res),
      ],
      [/^GET \/api\/3\.0\/mlflow\/traces\/([^/]+)$/, (m) => this.v3Info(arg(m, 1), res)],
      [
        /^POST \/api\/3\.0\/mlflow\/traces\/([^/]+)\/assessments$/,
        (m) => this.v3Create(arg(m, 1), json, res),
      ],
      [
        /^PATCH \/api\/3\.0\/mlflow\/traces\/([^/]+)\/assessments\/([^/]+)$/,
        (m) => this.v3Update(arg(m, 1), arg(m, 2), json, res),
      ],
      [/^POST \/api\/4\.0\/mlflow\/traces\/search-long-running$/, () => this.v4Search(json, res)],
      [
        /^GET \/api\/4\.0\/mlflow\/traces\/search\/operations\/([^/]+)$/,
        (m) => this.operation(arg(m, 1), res),
      ],
      [
        /^GET \/api\/4\.0\/mlflow\/traces\/([^/]+)\/batchGet$/,
        (m) => this.v4BatchGet(arg(m, 1), url, res),
      ],
      [
        /^(GET|POST|PATCH) \/api\/4\.0\/mlflow\/traces\/([^/]+)\/([^/]+)\/(info|assessments)(?:\/([^/]+))?$/,
        (m) => this.v4Trace(m, url, json, res),
      ],
    ];
    for (const [pattern, handle] of routes) {
      const m = pattern.exec(key);
      if (m !== null) {
        handle(m);
        return;
      }
    }
    sendError(res, 404, 'ENDPOINT_NOT_FOUND', 'No API found');
  }

  private experiment(url: URL, res: ServerResponse) {
    const id = url.searchParams.get('experiment_id') ?? '';
    if (!this.experiments.has(id)) {
      return sendError(res, 404, 'RESOURCE_DOES_NOT_EXIST', `No Experiment with id=${id} exists`);
    }
    sendJson(res, 200, {
      experiment: { experiment_id: id, name: `/Users/a@b.c/exp-${id}`, lifecycle_stage: 'active' },
    });
  }

  private v3Info(id: string, res: ServerResponse) {
    const t = this.experimentTrace(id, res);
    if (t !== undefined) sendJson(res, 200, { trace: { trace_info: this.store.info(t) } });
  }

  private v3Create(id: string, json: Record<string, unknown>, res: ServerResponse) {
    const t = this.experimentTrace(id, res);
    if (t !== undefined) this.store.answerV3Create(t, json, res);
  }

  private v3Update(
    id: string,
    assessmentId: string,
    json: Record<string, unknown>,
    res: ServerResponse,
  ) {
    const t = this.experimentTrace(id, res);
    if (t !== undefined) this.store.answerV3Update(t, assessmentId, json, res);
  }

  private refuse(res: ServerResponse, why: string) {
    this.store.refuse(res, why);
  }

  private experimentTrace(id: string, res: ServerResponse): StoredTrace | undefined {
    const t = this.store.traces.get(id);
    if (t === undefined || t.location.includes('.')) {
      sendError(res, 404, 'RESOURCE_DOES_NOT_EXIST', 'Trace not found');
      return undefined;
    }
    return t;
  }

  private v3Search(json: Record<string, unknown>, res: ServerResponse) {
    const locations = Array.isArray(json.locations) ? json.locations : [];
    const ids: string[] = [];
    for (const l of locations as Record<string, unknown>[]) {
      const e = l.mlflow_experiment as { experiment_id?: unknown } | undefined;
      if (l.type !== 'MLFLOW_EXPERIMENT' || typeof e?.experiment_id !== 'string') {
        return this.refuse(res, 'v3 search: a location that is not an experiment');
      }
      ids.push(e.experiment_id);
    }
    const out = this.store.search(
      ids,
      json.filter,
      json.max_results,
      json.order_by,
      json.page_token,
    );
    if ('error' in out) return this.refuse(res, `v3 search: ${out.error}`);
    // No match is `{}`.
    if (out.hits.length === 0) return sendJson(res, 200, {});
    sendJson(res, 200, {
      traces: out.hits.map((t) => this.store.info(t)),
      ...(out.next === undefined ? {} : { next_page_token: out.next }),
    });
  }

  private signature(path: string): string {
    return createHmac('sha256', this.signingKey).update(path).digest('hex');
  }

  private downloadCredentials(id: string, res: ServerResponse) {
    const t = this.experimentTrace(id, res);
    if (t === undefined) return;
    const path = `/traces/${t.hex}/artifacts/traces.json`;
    const base = this.signedUriOverride ?? this.storageUrl;
    sendJson(res, 200, {
      credential_info: {
        signed_uri: `${base}${path}?X-Amz-Signature=${this.signature(path)}`,
        type: 'AWS_PRESIGNED_URL',
        headers: [{ name: 'x-amz-server-side-encryption', value: 'aws:kms' }],
      },
    });
  }

  // -------------------------------------------------------------------------------------------
  // Cloud storage
  // -------------------------------------------------------------------------------------------

  private storageRequest(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://storage');
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k] = v;
    this.downloads.push({
      path: url.pathname,
      ...(req.headers.authorization === undefined
        ? {}
        : { authorization: req.headers.authorization }),
      headers,
    });
    if (req.headers.authorization !== undefined) {
      this.violations.push('storage: the download carried an Authorization header');
    }
    if (req.headers['x-amz-server-side-encryption'] !== 'aws:kms') {
      this.violations.push('storage: the header the credential returned is missing');
    }
    if (url.searchParams.get('X-Amz-Signature') !== this.signature(url.pathname)) {
      res.writeHead(403, { 'content-type': 'application/xml' });
      res.end('<Error><Code>SignatureDoesNotMatch</Code></Error>');
      return;
    }
    const hex = /^\/traces\/([0-9a-f]{32})\/artifacts\/traces\.json$/.exec(url.pathname)?.[1];
    const t = [...this.store.traces.values()].find((x) => x.hex === hex);
    if (t === undefined) {
      res.writeHead(404, { 'content-type': 'application/xml' });
      res.end('<Error><Code>NoSuchKey</Code></Error>');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    if (t.artifactBytes === undefined) {
      res.end(this.store.artifact(t));
      return;
    }
    // A huge artifact, streamed until the client stops reading.
    let left = t.artifactBytes;
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    const write = () => {
      while (left > 0) {
        left -= chunk.length;
        if (!res.write(chunk)) {
          res.once('drain', write);
          return;
        }
      }
      res.end();
    };
    res.on('close', () => {
      left = 0;
    });
    write();
  }

  // -------------------------------------------------------------------------------------------
  // Unity Catalog (v4)
  // -------------------------------------------------------------------------------------------

  private schemas(json: Record<string, unknown>): string[] | string {
    const out: string[] = [];
    for (const l of (Array.isArray(json.locations) ? json.locations : []) as Record<
      string,
      unknown
    >[]) {
      const uc = l.uc_schema as { catalog_name?: unknown; schema_name?: unknown } | undefined;
      if (
        l.type !== 'UC_SCHEMA' ||
        typeof uc?.catalog_name !== 'string' ||
        typeof uc.schema_name !== 'string'
      ) {
        return 'a location that is not a UC_SCHEMA';
      }
      out.push(`${uc.catalog_name}.${uc.schema_name}`);
    }
    return out;
  }

  private v4Search(json: Record<string, unknown>, res: ServerResponse) {
    if (json.sql_warehouse_id !== this.sqlWarehouseId) {
      return sendError(
        res,
        400,
        'INVALID_PARAMETER_VALUE',
        'Could not resolve a SQL warehouse ID. Please provide one.',
      );
    }
    const schemas = this.schemas(json);
    if (typeof schemas === 'string') return this.refuse(res, `v4 search: ${schemas}`);
    const out = this.store.search(
      schemas,
      json.filter,
      json.max_results,
      json.order_by,
      json.page_token,
    );
    if ('error' in out) return this.refuse(res, `v4 search: ${out.error}`);
    // The long-running handler gives a token with every non-empty page, the last one too.
    const response: Record<string, unknown> = {
      trace_infos: out.hits.map((t) => this.store.info(t)),
      ...(out.hits.length > 0
        ? {
            next_page_token: out.next ?? out.end,
          }
        : {}),
    };
    const name = `op-${randomBytes(8).toString('hex')}`;
    this.operations.set(name, { name, doneAtMs: this.now() + this.searchDurationMs, response });
    sendJson(res, 200, { name, done: false });
  }

  private operation(name: string, res: ServerResponse) {
    const op = this.operations.get(name);
    if (op === undefined) return sendError(res, 404, 'RESOURCE_DOES_NOT_EXIST', 'no operation');
    if (this.now() < op.doneAtMs) return sendJson(res, 200, { name, done: false });
    sendJson(res, 200, { name, done: true, response: op.response });
  }

  private v4BatchGet(location: string, url: URL, res: ServerResponse) {
    if (url.searchParams.get('sql_warehouse_id') !== this.sqlWarehouseId) {
      return this.refuse(res, 'v4 batchGet without the warehouse id');
    }
    const entries: string[] = [];
    for (const hex of url.searchParams.getAll('trace_ids')) {
      const t = this.store.traces.get(`trace:/${location}/${hex}`);
      if (t !== undefined) entries.push(this.store.batchEntry(t));
    }
    sendJson(res, 200, `{"traces": [${entries.join(', ')}]}`);
  }

  private v4Trace(
    m: RegExpExecArray,
    url: URL,
    json: Record<string, unknown>,
    res: ServerResponse,
  ) {
    const [, method, location, hex, what, assessmentId] = m;
    if (url.searchParams.get('sql_warehouse_id') !== this.sqlWarehouseId) {
      return this.refuse(res, `v4 ${what} without the warehouse id`);
    }
    const t = this.store.traces.get(`trace:/${decodeURIComponent(location as string)}/${hex}`);
    if (t === undefined) return sendError(res, 404, 'RESOURCE_DOES_NOT_EXIST', 'Trace not found');
    if (what === 'info' && method === 'GET') {
      return sendJson(res, 200, { trace: { trace_info: this.store.info(t) } });
    }
    if (what === 'assessments' && method === 'POST' && assessmentId === undefined) {
      if ('assessment' in json) return this.refuse(res, 'v4 create: a wrapped assessment');
      const made = this.store.createAssessment(t, json);
      if (typeof made === 'string') return this.refuse(res, `v4 create: ${made}`);
      return sendJson(res, 200, made);
    }
    if (what === 'assessments' && method === 'PATCH' && assessmentId !== undefined) {
      if ('assessment' in json) return this.refuse(res, 'v4 update: a wrapped assessment');
      const out = this.store.updateAssessment(
        t,
        decodeURIComponent(assessmentId),
        json,
        url.searchParams.get('update_mask'),
      );
      if (out === 'not-found')
        return sendError(res, 404, 'RESOURCE_DOES_NOT_EXIST', 'no such assessment');
      if (typeof out === 'string') return this.refuse(res, `v4 update: ${out}`);
      return sendJson(res, 200, out);
    }
    sendError(res, 404, 'ENDPOINT_NOT_FOUND', 'No API found');
  }
}
