import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { FakeScoreConfigs } from './score-configs.js';
import { bodyProblems, queryProblems, responseSchemaOf, SPEC, schemaProblems } from './spec.js';

/**
 * A contract fake of Langfuse's public API (v4.16.0; README.md): the routes the connector uses,
 * built from Langfuse's published API definitions. Every request is checked against the spec
 * (query parameters, body schema, Basic auth) and against the server's own rules the spec only
 * describes (limits, score targets, value/dataType agreement); a request that breaks them is
 * answered 400 as Langfuse does *and* recorded in `violations`, so a test fails on it. Every
 * answer the fake sends is itself checked against the spec's response schema.
 *
 * Behaviour copied from the server: v2 observations newest first (start time, a hash of the
 * trace id, id — all descending) with a keyset `meta.cursor` (base64 JSON) left out on the last
 * page; field groups (default `core,basic`); metadata values cut to 200 characters unless named in
 * `expandMetadata`; IO served as raw strings; scores upserted by `id`, visible to reads after a
 * configurable lag; `GET /api/public/v3/scores` with comma-list filters and the BOOLEAN value read
 * back as a boolean; score configs (score-configs.ts), which an `ANNOTATION` score must name; a
 * 404 on v2 observations in the `v3-without-v2` mode (a Langfuse v3 server
 * without the v4 preview opt-in); 429 with Retry-After while `throttle` is set.
 */

const CONFIG_PATH = /^\/api\/public\/score-configs\/([^/]+)$/;

/** The spec's path of a request path (`…/score-configs/{configId}` for one config). */
function specPath(path: string): string {
  return CONFIG_PATH.test(path) ? '/api/public/score-configs/{configId}' : path;
}

export interface FakeObservation {
  id: string;
  traceId: string | null;
  type: string;
  startTime: string;
  endTime?: string | null;
  parentObservationId?: string | null;
  /** The SDK's app-root mark: a root although it has a parent. */
  isAppRoot?: boolean;
  name?: string | null;
  level?: 'DEBUG' | 'DEFAULT' | 'WARNING' | 'ERROR';
  statusMessage?: string | null;
  version?: string | null;
  environment?: string;
  userId?: string | null;
  sessionId?: string | null;
  completionStartTime?: string | null;
  input?: string | null;
  output?: string | null;
  /** Values are strings, as Langfuse stores them. */
  metadata?: Record<string, string>;
  providedModelName?: string | null;
  internalModelId?: string | null;
  modelParameters?: Record<string, unknown> | null;
  usageDetails?: Record<string, number>;
  costDetails?: Record<string, number>;
  totalCost?: number | null;
  promptName?: string | null;
  promptVersion?: number | null;
  traceName?: string | null;
  tags?: string[];
  release?: string | null;
}

export interface FakeScore {
  id: string;
  name: string;
  dataType: 'NUMERIC' | 'BOOLEAN' | 'CATEGORICAL' | 'TEXT' | 'CORRECTION';
  /** As written: a number for NUMERIC and BOOLEAN (0/1), a string otherwise. */
  value: number | string;
  source: 'API' | 'ANNOTATION' | 'EVAL';
  environment: string;
  traceId?: string;
  observationId?: string;
  sessionId?: string;
  datasetRunId?: string;
  comment?: string;
  metadata?: unknown;
  configId?: string;
  queueId?: string;
  createdAt: string;
  updatedAt: string;
  /** Epoch ms from which reads see this version. */
  visibleAt: number;
  /** Times it was written (1 = created, more = upserted). */
  writes: number;
}

export interface LangfuseFakeOptions {
  publicKey?: string;
  secretKey?: string;
  /**
   * `v3-preview`: a Langfuse v3 server with the v4 preview opt-in (v2 observations served, but
   * `isRootObservation` neither filtered by nor served: it came with v4.0.0);
   * `v3-without-v2`: a v3 server without the opt-in (v2 observations answer 404).
   */
  mode?: Mode;
  /** Delay before a written score shows in reads. Default 0. */
  scoreVisibilityLagMs?: number;
}

export interface SeenRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  body?: unknown;
  authorized: boolean;
  /** The public key it was authorized with. */
  publicKey?: string;
}

export type Mode = 'v4' | 'v3-preview' | 'v3-without-v2';

const PROJECT_ID = 'cm0fakeproject';
const METADATA_PREVIEW = 200;
const FIELD_GROUPS: Record<string, readonly string[]> = {
  core: ['id', 'traceId', 'startTime', 'endTime', 'projectId', 'parentObservationId', 'type'],
  basic: [
    'name',
    'level',
    'statusMessage',
    'version',
    'environment',
    'bookmarked',
    'public',
    'userId',
    'sessionId',
    'isRootObservation',
  ],
  time: ['completionStartTime', 'createdAt', 'updatedAt'],
  io: ['input', 'output'],
  metadata: ['metadata'],
  model: ['providedModelName', 'internalModelId', 'modelParameters'],
  usage: ['usageDetails', 'costDetails', 'totalCost', 'usagePricingTierName'],
  prompt: ['promptId', 'promptName', 'promptVersion'],
  metrics: ['latency', 'timeToFirstToken'],
  trace_context: ['tags', 'release', 'traceName'],
};
const OBSERVATION_TYPES = [
  'SPAN',
  'GENERATION',
  'EVENT',
  'AGENT',
  'TOOL',
  'CHAIN',
  'RETRIEVER',
  'EVALUATOR',
  'EMBEDDING',
  'GUARDRAIL',
];

/** FNV-1a, 32 bit: stands in for ClickHouse's xxHash32 in the ordering (any stable hash does). */
function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

function ms(iso: string): number {
  return Date.parse(iso);
}

/** Langfuse's environment rule: lower case, leading `langfuse` prefixes removed, else default. */
function environmentName(v: unknown): string {
  if (typeof v !== 'string') return 'default';
  const stripped = v
    .toLowerCase()
    .replace(/^(?:langfuse[-_]?)+/, '')
    .slice(0, 40);
  return stripped !== '' && /^[a-z0-9-_]+$/.test(stripped) ? stripped : 'default';
}

class HttpError {
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
    readonly headers: Record<string, string> = {},
  ) {}
}

export class LangfuseFake {
  readonly publicKey: string;
  readonly secretKey: string;
  mode: Mode;
  scoreVisibilityLagMs: number;
  /** Answer 429 with this Retry-After to every authorized request after `after` more of them. */
  throttle: { after: number; retryAfterSeconds: number } | undefined;
  readonly observations: FakeObservation[] = [];
  readonly scores = new Map<string, FakeScore>();
  /** Score configs (`GET`/`POST /api/public/score-configs`, `PATCH …/{configId}`). */
  readonly scoreConfigs = new FakeScoreConfigs(() => this.now());
  readonly requests: SeenRequest[] = [];
  /** Requests that broke the spec, and answers of the fake that did (a bug here). */
  readonly violations: string[] = [];
  /** The epoch ms of "now" for score times and visibility (tests may move it). */
  now: () => number = () => Date.now();
  /**
   * While true, every `GET /api/public/v2/observations` is held unanswered (a store slow to
   * answer a listing) until `releaseListings()`; `heldListings` counts the requests held so far.
   */
  holdListings = false;
  heldListings = 0;
  /** The public key of each listing held, in order. */
  readonly heldFrom: (string | undefined)[] = [];
  /**
   * Public keys accepted besides `publicKey` (with the same secret, for the same project): one
   * per client lets a test tell its clients' requests apart (`credentialOf`).
   */
  readonly otherPublicKeys = new Set<string>();
  private held: (() => void)[] = [];

  private constructor(
    private readonly server: Server,
    readonly url: string,
    options: LangfuseFakeOptions,
  ) {
    this.publicKey = options.publicKey ?? 'pk-lf-fake-0001';
    this.secretKey = options.secretKey ?? 'sk-lf-fake-secret-0001';
    this.mode = options.mode ?? 'v4';
    this.scoreVisibilityLagMs = options.scoreVisibilityLagMs ?? 0;
  }

  static async start(options: LangfuseFakeOptions = {}): Promise<LangfuseFake> {
    let fake: LangfuseFake | undefined;
    const server = createServer((req, res) => {
      fake?.handle(req, res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    fake = new LangfuseFake(server, `http://127.0.0.1:${port}`, options);
    return fake;
  }

  /** The credential the connector is given: `<public key>:<secret key>`. */
  get credential(): string {
    return `${this.publicKey}:${this.secretKey}`;
  }

  /** A credential of the same project under another public key, accepted from now on. */
  credentialOf(publicKey: string): string {
    this.otherPublicKeys.add(publicKey);
    return `${publicKey}:${this.secretKey}`;
  }

  get version(): string {
    return this.mode === 'v4' ? SPEC.source.tag.replace(/^v/, '') : '3.179.0';
  }

  add(...observations: FakeObservation[]): void {
    this.observations.push(...observations);
  }

  /** Scores readable now (upserted ones once). */
  visibleScores(): FakeScore[] {
    const now = this.now();
    return [...this.scores.values()].filter((s) => s.visibleAt <= now);
  }

  /** Answers the held listings (to clients still there) and stops holding new ones. */
  releaseListings(): void {
    this.holdListings = false;
    for (const answer of this.held.splice(0)) answer();
  }

  requestsTo(path: string): SeenRequest[] {
    return this.requests.filter((r) => r.path === path);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  // ------------------------------------------------------------------------------------------

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (this.holdListings && (req.url ?? '').startsWith('/api/public/v2/observations')) {
        this.heldListings++;
        this.heldFrom.push(this.publicKeyOf(req.headers.authorization));
        this.held.push(() => this.answer(req, res, chunks));
        return;
      }
      this.answer(req, res, chunks);
    });
  }

  private answer(req: IncomingMessage, res: ServerResponse, chunks: Buffer[]): void {
    const url = new URL(req.url ?? '/', this.url);
    const method = req.method ?? 'GET';
    const text = Buffer.concat(chunks).toString('utf8');
    const seen: SeenRequest = {
      method,
      path: url.pathname,
      query: url.searchParams,
      authorized: this.authorized(req.headers.authorization),
    };
    const publicKey = this.publicKeyOf(req.headers.authorization);
    if (seen.authorized && publicKey !== undefined) seen.publicKey = publicKey;
    this.requests.push(seen);
    try {
      if (text !== '') {
        try {
          seen.body = JSON.parse(text);
        } catch {
          this.refuse(`${method} ${url.pathname}: the body is not JSON`);
        }
      }
      const out = this.route(method, url.pathname, url.searchParams, seen);
      this.send(res, 200, out, method, specPath(url.pathname));
    } catch (err) {
      if (err instanceof HttpError) {
        this.send(res, err.status, err.body, method, url.pathname, err.headers);
        return;
      }
      this.violations.push(`fake error: ${err instanceof Error ? err.message : String(err)}`);
      this.send(res, 500, { message: 'Internal Server Error', error: 'fake error' });
    }
  }

  private send(
    res: ServerResponse,
    status: number,
    body: unknown,
    method?: string,
    path?: string,
    headers: Record<string, string> = {},
  ): void {
    if (status === 200 && method !== undefined && path !== undefined) {
      const schema = responseSchemaOf(method, path, 200);
      if (schema !== undefined) {
        for (const p of schemaProblems(schema, body)) this.violations.push(`fake answer: ${p}`);
      }
    }
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
    res.end(JSON.stringify(body));
  }

  /** A request that breaks the contract: recorded, and answered 400 as Langfuse would. */
  private refuse(problem: string, issues?: unknown): never {
    this.violations.push(problem);
    throw new HttpError(400, { message: 'Invalid request data', error: issues ?? [problem] });
  }

  private authorized(header: string | undefined): boolean {
    const publicKey = this.publicKeyOf(header);
    return (
      publicKey !== undefined &&
      (publicKey === this.publicKey || this.otherPublicKeys.has(publicKey)) &&
      decodedBasic(header) === `${publicKey}:${this.secretKey}`
    );
  }

  private publicKeyOf(header: string | undefined): string | undefined {
    const decoded = decodedBasic(header);
    const colon = decoded?.indexOf(':') ?? -1;
    return colon > 0 ? decoded?.slice(0, colon) : undefined;
  }

  private route(method: string, path: string, query: URLSearchParams, seen: SeenRequest): unknown {
    const configId = CONFIG_PATH.exec(path)?.[1];
    path = specPath(path);
    const known = SPEC.paths[path]?.[method.toLowerCase()];
    if (known === undefined) {
      throw new HttpError(404, { message: 'Not found', error: 'LangfuseNotFoundError' });
    }
    const problems = [
      ...queryProblems(method, path, query),
      ...(method === 'POST' || method === 'PATCH' ? bodyProblems(method, path, seen.body) : []),
    ];
    if (path === '/api/public/health') {
      if (problems.length > 0) this.refuse(problems.join('; '));
      return { status: 'OK', version: this.version };
    }
    if (!seen.authorized) {
      // Auth comes before validation and rate limits on Langfuse's routes.
      throw new HttpError(401, { message: 'Unauthorized: invalid public or secret key' });
    }
    if (this.throttle !== undefined) {
      if (this.throttle.after <= 0) {
        const wait = this.throttle.retryAfterSeconds;
        throw new HttpError(
          429,
          {
            message: 'Rate limit exceeded',
            code: 'rate_limited',
            details: { retryAfterSeconds: wait },
          },
          { 'retry-after': String(wait) },
        );
      }
      this.throttle.after--;
    }
    if (problems.length > 0) this.refuse(`${method} ${path}: ${problems.join('; ')}`);
    if (path === '/api/public/v2/observations') return this.observationsV2(query);
    if (path === '/api/public/scores')
      return this.createScore(seen.body as Record<string, unknown>);
    if (path === '/api/public/score-configs') return this.scoreConfigRoute(method, query, seen);
    if (configId !== undefined) {
      const updated = this.scoreConfigs.update(
        decodeURIComponent(configId),
        seen.body as Record<string, unknown>,
      );
      if (updated === undefined) {
        throw new HttpError(404, { message: 'Score config not found within authorized project' });
      }
      if (Array.isArray(updated)) this.refuse(`PATCH score config: ${updated.join('; ')}`);
      return updated;
    }
    return this.scoresV3(query);
  }

  private scoreConfigRoute(method: string, query: URLSearchParams, seen: SeenRequest): unknown {
    if (method === 'GET') {
      const page = this.scoreConfigs.list(query);
      if (typeof page === 'string') this.refuse(`GET score-configs: ${page}`);
      return page;
    }
    const created = this.scoreConfigs.create(seen.body as Record<string, unknown>);
    if (Array.isArray(created)) this.refuse(`POST score-configs: ${created.join('; ')}`);
    return created;
  }

  // ------------------------------------------------------------------------------------------
  // GET /api/public/v2/observations
  // ------------------------------------------------------------------------------------------

  private observationsV2(query: URLSearchParams): unknown {
    if (this.mode === 'v3-without-v2') {
      throw new HttpError(404, {
        message:
          'Observations API v2 is not available here: this Langfuse v3 deployment has not opted in to the v4 preview',
        error: 'LangfuseNotFoundError',
      });
    }
    const get = (k: string) => query.get(k) ?? undefined;
    if (get('parseIoAsJson') === 'true') this.refuse('parseIoAsJson=true is retired (400)');
    if (query.has('filter')) {
      this.refuse('the fake does not model `filter` (it silently overrides every other filter)');
    }
    const limit = query.has('limit') ? Number(get('limit')) : 50;
    if (limit < 0 || limit > 1000) this.refuse(`limit ${limit} is outside 0..1000`);
    const type = get('type');
    if (type !== undefined && !OBSERVATION_TYPES.includes(type)) {
      this.refuse(`type ${type} is not an observation type`);
    }
    const groups = new Set(['core']);
    for (const g of (get('fields') ?? 'core,basic').split(',').map((x) => x.trim())) {
      if (g in FIELD_GROUPS) groups.add(g);
    }
    const expand = new Set(
      (get('expandMetadata') ?? '')
        .split(',')
        .map((k) => k.trim())
        .filter((k) => k !== ''),
    );
    const environments = query.getAll('environment');
    const from = get('fromStartTime');
    const to = get('toStartTime');
    // v3 servers drop the parameter silently (their query schema does not know it).
    const isRoot = this.mode === 'v4' ? get('isRootObservation') : undefined;
    const parent = get('parentObservationId');
    const matches = (o: FakeObservation): boolean => {
      const root = (o.parentObservationId ?? null) === null || o.isAppRoot === true;
      const start = ms(o.startTime);
      if (from !== undefined && start < ms(from)) return false;
      if (to !== undefined && start >= ms(to)) return false;
      if (isRoot !== undefined && root !== (isRoot === 'true')) return false;
      if (parent !== undefined && (o.parentObservationId ?? '') !== parent) return false;
      if (environments.length > 0 && !environments.includes(o.environment ?? 'default')) {
        return false;
      }
      const exact: [string, unknown][] = [
        ['traceId', o.traceId],
        ['name', o.name],
        ['userId', o.userId],
        ['sessionId', o.sessionId],
        ['type', o.type],
        ['level', o.level ?? 'DEFAULT'],
        ['version', o.version],
      ];
      return exact.every(([k, v]) => get(k) === undefined || get(k) === v);
    };
    const key = (o: FakeObservation): [number, number, string] => [
      ms(o.startTime),
      hash32(o.traceId ?? ''),
      o.id,
    ];
    const desc = (a: [number, number, string], b: [number, number, string]): number =>
      b[0] - a[0] || b[1] - a[1] || (a[2] < b[2] ? 1 : a[2] > b[2] ? -1 : 0);
    let rows = this.observations.filter(matches).sort((a, b) => desc(key(a), key(b)));
    const cursor = get('cursor');
    if (cursor !== undefined) {
      let position: { lastStartTimeTo: string; lastTraceId: string; lastId: string };
      try {
        position = JSON.parse(Buffer.from(cursor, 'base64').toString('utf8'));
      } catch {
        return this.refuse('Invalid cursor format');
      }
      const after: [number, number, string] = [
        ms(position.lastStartTimeTo),
        hash32(position.lastTraceId),
        position.lastId,
      ];
      rows = rows.filter((o) => desc(after, key(o)) < 0);
    }
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    const meta =
      rows.length > limit && last !== undefined
        ? {
            cursor: Buffer.from(
              JSON.stringify({
                lastStartTimeTo: new Date(ms(last.startTime)).toISOString(),
                lastTraceId: last.traceId ?? '',
                lastId: last.id,
              }),
            ).toString('base64'),
          }
        : {};
    return { data: page.map((o) => this.project(o, groups, expand)), meta };
  }

  /** One observation as the v2 API serves it: the requested field groups only. */
  private project(o: FakeObservation, groups: Set<string>, expand: Set<string>): unknown {
    const metadata: Record<string, string> = {};
    for (const [k, v] of Object.entries(o.metadata ?? {})) {
      metadata[k] = expand.has(k) ? v : [...v].slice(0, METADATA_PREVIEW).join('');
    }
    const full: Record<string, unknown> = {
      id: o.id,
      traceId: o.traceId,
      startTime: new Date(ms(o.startTime)).toISOString(),
      endTime: o.endTime === undefined || o.endTime === null ? null : o.endTime,
      projectId: PROJECT_ID,
      parentObservationId: o.parentObservationId ?? null,
      type: o.type,
      name: o.name ?? null,
      level: o.level ?? 'DEFAULT',
      statusMessage: o.statusMessage ?? null,
      version: o.version ?? null,
      environment: o.environment ?? 'default',
      bookmarked: false,
      public: false,
      userId: o.userId ?? null,
      sessionId: o.sessionId ?? null,
      isRootObservation: (o.parentObservationId ?? null) === null || o.isAppRoot === true,
      completionStartTime: o.completionStartTime ?? null,
      createdAt: o.startTime,
      updatedAt: o.endTime ?? o.startTime,
      input: o.input ?? null,
      output: o.output ?? null,
      metadata,
      providedModelName: o.providedModelName ?? null,
      internalModelId: o.internalModelId ?? null,
      modelParameters: o.modelParameters ?? {},
      usageDetails: o.usageDetails ?? {},
      costDetails: o.costDetails ?? {},
      totalCost: o.totalCost ?? null,
      usagePricingTierName: null,
      promptId: null,
      promptName: o.promptName ?? null,
      promptVersion: o.promptVersion ?? null,
      latency:
        o.endTime === undefined || o.endTime === null
          ? null
          : (ms(o.endTime) - ms(o.startTime)) / 1000,
      timeToFirstToken: null,
      tags: o.tags ?? [],
      release: o.release ?? null,
      traceName: o.traceName ?? null,
    };
    const out: Record<string, unknown> = {};
    for (const g of groups) for (const f of FIELD_GROUPS[g] ?? []) out[f] = full[f];
    if (this.mode !== 'v4') delete out.isRootObservation;
    // Enrichment fields: always present, null unless the model group was asked for.
    const model = groups.has('model');
    out.modelId = model ? (o.internalModelId ?? null) : null;
    out.inputPrice = null;
    out.outputPrice = null;
    out.totalPrice = null;
    return out;
  }

  // ------------------------------------------------------------------------------------------
  // POST /api/public/scores
  // ------------------------------------------------------------------------------------------

  private createScore(body: Record<string, unknown>): unknown {
    const problems: string[] = [];
    const has = (k: string) => body[k] !== undefined && body[k] !== null && body[k] !== '';
    if (typeof body.name !== 'string' || body.name === '') problems.push('name must not be empty');
    const trace = has('traceId');
    const session = has('sessionId');
    const run = has('datasetRunId');
    const observation = has('observationId');
    const target =
      (trace && !session && !run) ||
      (session && !trace && !run && !observation) ||
      (run && !trace && !session && !observation);
    if (!target) {
      problems.push(
        'give exactly one of traceId (observationId only with it), sessionId or datasetRunId',
      );
    }
    const value = body.value;
    let dataType = body.dataType as FakeScore['dataType'] | undefined;
    switch (dataType) {
      case 'NUMERIC':
        if (typeof value !== 'number') problems.push('a NUMERIC value is a number');
        break;
      case 'BOOLEAN':
        if (value !== 0 && value !== 1) problems.push('a BOOLEAN value is the number 0 or 1');
        break;
      case 'CATEGORICAL':
        if (typeof value !== 'string') problems.push('a CATEGORICAL value is a string');
        break;
      case 'TEXT':
        if (typeof value !== 'string' || value.length < 1 || value.length > 500) {
          problems.push('a TEXT value is a string of 1 to 500 characters');
        }
        break;
      case 'CORRECTION':
        if (typeof value !== 'string') problems.push('a CORRECTION value is a string');
        if (has('configId')) problems.push('a CORRECTION score takes no configId');
        break;
      default:
        dataType = typeof value === 'number' ? 'NUMERIC' : 'CATEGORICAL';
    }
    const source = (body.source as FakeScore['source'] | undefined) ?? 'API';
    if (source === 'ANNOTATION' && !has('configId') && dataType !== 'CORRECTION') {
      problems.push('an ANNOTATION score needs a configId');
    }
    let name = body.name as string;
    if (has('configId') && problems.length === 0) {
      // Langfuse checks the score against its config and gives it the config's name. A config
      // the fake does not hold is not checked: the definitions' own examples name made-up ones.
      const checked = this.scoreConfigs.checkScore(String(body.configId), {
        ...(body.dataType === undefined ? {} : { dataType: String(body.dataType) }),
        value,
      });
      if (checked === undefined) {
        // Accepted as written.
      } else if (Array.isArray(checked)) problems.push(...checked);
      else {
        name = checked.name;
        dataType = checked.dataType;
      }
    }
    if (problems.length > 0) this.refuse(`POST /api/public/scores: ${problems.join('; ')}`);
    const id = typeof body.id === 'string' && body.id !== '' ? body.id : randomUUID();
    const now = this.now();
    const before = this.scores.get(id);
    const score: FakeScore = {
      id,
      name,
      dataType,
      value: value as number | string,
      source,
      environment: environmentName(body.environment),
      createdAt: before?.createdAt ?? new Date(now).toISOString(),
      updatedAt: new Date(now).toISOString(),
      visibleAt: now + this.scoreVisibilityLagMs,
      writes: (before?.writes ?? 0) + 1,
    };
    for (const k of [
      'traceId',
      'observationId',
      'sessionId',
      'datasetRunId',
      'comment',
      'configId',
      'queueId',
    ] as const) {
      if (typeof body[k] === 'string' && body[k] !== '') score[k] = body[k] as string;
    }
    if (body.metadata !== undefined && body.metadata !== null) score.metadata = body.metadata;
    this.scores.set(id, score);
    return { id };
  }

  // ------------------------------------------------------------------------------------------
  // GET /api/public/v3/scores
  // ------------------------------------------------------------------------------------------

  private scoresV3(query: URLSearchParams): unknown {
    const list = (k: string) =>
      (query.get(k) ?? '')
        .split(',')
        .map((v) => v.trim())
        .filter((v) => v !== '');
    if (query.has('userId') || query.has('traceTags')) {
      this.refuse('userId and traceTags are not supported by v3 scores');
    }
    const limit = query.has('limit') ? Number(query.get('limit')) : 50;
    if (limit < 1 || limit > 100) this.refuse(`limit ${limit} is outside 1..100`);
    if (list('observationId').length > 0 && list('traceId').length === 0) {
      this.refuse('observationId requires traceId');
    }
    const fields = new Set(['core', ...list('fields')]);
    for (const f of fields) {
      if (!['core', 'details', 'subject', 'annotation'].includes(f)) {
        this.refuse(`unknown field group ${f}`);
      }
    }
    const filters: [string, (s: FakeScore) => string | undefined][] = [
      ['id', (s) => s.id],
      ['name', (s) => s.name],
      ['source', (s) => s.source],
      ['dataType', (s) => s.dataType],
      ['environment', (s) => s.environment],
      ['traceId', (s) => s.traceId],
      ['observationId', (s) => s.observationId],
      ['sessionId', (s) => s.sessionId],
      ['configId', (s) => s.configId],
    ];
    const rows = this.visibleScores()
      .filter((s) =>
        filters.every(([k, get]) => {
          const wanted = list(k);
          return wanted.length === 0 || wanted.includes(get(s) ?? '');
        }),
      )
      .sort((a, b) => (a.updatedAt < b.updatedAt ? 1 : a.updatedAt > b.updatedAt ? -1 : 0));
    const offset = query.has('cursor')
      ? Number(Buffer.from(query.get('cursor') ?? '', 'base64url').toString('utf8'))
      : 0;
    const page = rows.slice(offset, offset + limit);
    const data = page.map((s) => {
      const out: Record<string, unknown> = {
        id: s.id,
        projectId: PROJECT_ID,
        name: s.name,
        dataType: s.dataType,
        value: s.dataType === 'BOOLEAN' ? s.value === 1 : s.value,
        source: s.source,
        timestamp: s.createdAt,
        environment: s.environment,
        createdAt: s.createdAt,
        updatedAt: s.updatedAt,
      };
      if (fields.has('details')) {
        out.comment = s.comment ?? null;
        out.configId = s.configId ?? null;
        if (s.metadata !== undefined) out.metadata = s.metadata;
      }
      if (fields.has('annotation')) {
        out.authorUserId = null;
        out.queueId = s.queueId ?? null;
      }
      if (fields.has('subject')) {
        out.subject =
          s.observationId !== undefined
            ? { kind: 'observation', id: s.observationId, traceId: s.traceId ?? null }
            : s.sessionId !== undefined
              ? { kind: 'session', id: s.sessionId }
              : s.datasetRunId !== undefined
                ? { kind: 'experiment', id: s.datasetRunId }
                : { kind: 'trace', id: s.traceId ?? '' };
      }
      return out;
    });
    const more = offset + limit < rows.length;
    return {
      data,
      meta: {
        limit,
        ...(more
          ? { cursor: Buffer.from(String(offset + limit), 'utf8').toString('base64url') }
          : {}),
      },
    };
  }
}

/** The `user:password` of a Basic authorization header, undefined for any other. */
function decodedBasic(header: string | undefined): string | undefined {
  if (header === undefined || !header.startsWith('Basic ')) return undefined;
  return Buffer.from(header.slice(6), 'base64').toString('utf8');
}
