import { createHash } from 'node:crypto';
import { pipeline, Readable, Transform } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { principalId } from '../../auth/index.js';
import { isTouchstoneError } from '../../core/index.js';
import type { IdempotencyOutcome, IdempotencyScope } from '../../store/index.js';
import {
  ERROR_OUTCOME_STATUS,
  errorFromOutcome,
  isOutcomeUnknown,
  outcomeUncertain,
  secretNotReplayed,
  withhold,
} from './outcome.js';
import {
  EMPTY_SHA256,
  IDEMPOTENCY_HEADER,
  parseIdempotencyKey,
  REPLAYED_HEADER,
  requestDigest,
  sha256Hex,
} from './request.js';
import type { HeldKey, IdempotencyService } from './service.js';
import '../context.js';
import { httpStatusOf, toErrorBody } from '../errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Other route flags (`otlp`, …) stay untyped here. */
    [flag: string]: unknown;
    /**
     * Marks a retryable write: a request carrying `Idempotency-Key` runs at most once per caller,
     * operation and key, and its outcome is replayed (see docs/idempotency.md). A stable name:
     * `runs.create`, `webhooks.apply`, …
     */
    idempotency?: string;
    /**
     * Top-level response fields returned only once (a generated secret): never stored, so a
     * replay of a success answers IDEMPOTENCY_SECRET_NOT_REPLAYED instead of the response.
     */
    idempotencyWithhold?: readonly string[];
  }
}

/** A route marked with `config.idempotency`, as registered. */
export interface IdempotentRoute {
  method: string;
  url: string;
  operation: string;
}

/** Per-request state of a keyed request on a marked route. */
interface Keyed {
  scope: IdempotencyScope;
  /** sha256 of the body bytes once the parser read them all. */
  bodySha256?: string;
  /** Whether the body passes through the hashing stream. */
  teed: boolean;
  held?: HeldKey;
  /** What the handler (or a later hook) threw. */
  error?: unknown;
}

const keyed = new WeakMap<FastifyRequest, Keyed>();
const registries = new WeakMap<FastifyInstance, IdempotentRoute[]>();

const BODYLESS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

/** Every route marked `config.idempotency` in this app (tests check the list is complete). */
export function idempotentRoutes(app: FastifyInstance): readonly IdempotentRoute[] {
  return registries.get(app) ?? [];
}

function operationOf(request: FastifyRequest): string | undefined {
  const op = request.routeOptions.config?.idempotency;
  return typeof op === 'string' ? op : undefined;
}

function hasBody(request: FastifyRequest): boolean {
  const h = request.headers;
  return (
    h['content-type'] !== undefined ||
    h['transfer-encoding'] !== undefined ||
    (h['content-length'] !== undefined && h['content-length'] !== '0')
  );
}

function isReadable(value: unknown): value is Readable {
  return value instanceof Readable;
}

async function drain(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) {
    chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
  }
  return Buffer.concat(chunks);
}

function payloadBytes(payload: unknown): Buffer | undefined {
  if (payload === undefined || payload === null) return Buffer.alloc(0);
  if (typeof payload === 'string') return Buffer.from(payload);
  if (Buffer.isBuffer(payload)) return payload;
  if (payload instanceof Uint8Array) return Buffer.from(payload);
  return undefined;
}

function sendReplay(reply: FastifyReply, outcome: IdempotencyOutcome): FastifyReply {
  if (outcome.status === ERROR_OUTCOME_STATUS) throw errorFromOutcome(outcome);
  if ((outcome.withheld ?? []).length > 0 && outcome.status < 300) {
    throw secretNotReplayed(outcome);
  }
  reply.code(outcome.status).header(REPLAYED_HEADER, 'true');
  for (const [name, value] of Object.entries(outcome.headers)) reply.header(name, value);
  return reply.send(Buffer.from(outcome.body));
}

/**
 * Applies Idempotency-Key to every route whose options carry `config: { idempotency: '<op>' }`
 * (call before the routes are registered). Without the header a request is handled as always.
 * With it: the body is digested as it is read, the key is reserved (or its stored outcome
 * replayed, or the request refused) before the handler, and the response is stored before it
 * is sent. See docs/idempotency.md.
 */
export function installIdempotency(app: FastifyInstance, service: IdempotencyService): void {
  const routes: IdempotentRoute[] = [];
  registries.set(app, routes);
  const hooks = keyedHooks(service);

  // Route-level hooks on the marked routes only: every other route (OTLP ingest above all)
  // pays nothing for them.
  app.addHook('onRoute', (options) => {
    const op = options.config?.idempotency;
    if (op === undefined) return;
    const methods = Array.isArray(options.method) ? options.method : [options.method];
    for (const method of methods) {
      if (typeof op !== 'string' || op === '' || BODYLESS.has(String(method).toUpperCase())) {
        throw new Error(`route ${method} ${options.url}: config.idempotency marks writes only`);
      }
      routes.push({ method: String(method).toUpperCase(), url: options.url, operation: op });
    }
    const route = options as unknown as Record<string, unknown>;
    for (const [name, hook] of Object.entries(hooks)) {
      const existing = route[name];
      route[name] = [...(existing === undefined ? [] : [existing].flat()), hook];
    }
  });
}

/** The lifecycle of a keyed request on a marked route. */
function keyedHooks(service: IdempotencyService) {
  return {
    async preParsing(request: FastifyRequest, _reply: FastifyReply, payload: Readable) {
      const operation = operationOf(request);
      if (operation === undefined) return payload;
      const key = parseIdempotencyKey(request.headers[IDEMPOTENCY_HEADER]);
      if (key === undefined) return payload;
      const state: Keyed = {
        scope: { principal: principalId(request.principal), operation, key },
        teed: false,
      };
      keyed.set(request, state);
      if (!hasBody(request)) return payload;
      state.teed = true;
      const hash = createHash('sha256');
      const tee = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          hash.update(chunk);
          done(null, chunk);
        },
        flush(done) {
          state.bodySha256 = hash.digest('hex');
          done();
        },
      });
      return pipeline(payload, tee, () => undefined);
    },

    async preHandler(request: FastifyRequest, reply: FastifyReply) {
      const state = keyed.get(request);
      if (state === undefined) return;
      let bodySha256 = state.bodySha256;
      if (bodySha256 === undefined && state.teed && isReadable(request.body)) {
        // A route whose parser hands the handler the stream: read it here (the route's body
        // limit already applies), so the digest covers it, and hand the handler the same bytes.
        const bytes = await drain(request.body);
        request.body = Readable.from([bytes]);
        bodySha256 = state.bodySha256 ?? sha256Hex(bytes);
      }
      const [path = '', query = ''] = splitUrl(request.url);
      const digest = requestDigest({
        method: request.method,
        path,
        query,
        bodySha256: bodySha256 ?? EMPTY_SHA256,
      });
      const begun = await service.begin(state.scope, digest);
      if (begun.kind === 'replay') return sendReplay(reply, begun.outcome);
      state.held = begun.held;
    },

    async onError(request: FastifyRequest, _reply: FastifyReply, error: unknown) {
      const state = keyed.get(request);
      if (state?.held !== undefined) state.error = error;
    },

    async onSend(request: FastifyRequest, reply: FastifyReply, payload: unknown) {
      const state = keyed.get(request);
      const held = state?.held;
      if (state === undefined || held === undefined) return payload;
      const err = state.error;
      if (err !== undefined && isOutcomeUnknown(err)) {
        await held.uncertain();
        const uncertain = outcomeUncertain('the database failed after the write was sent');
        reply
          .code(httpStatusOf(uncertain.kind))
          .header('retry-after', '1')
          .type('application/json');
        return JSON.stringify(toErrorBody(uncertain, String(request.id)));
      }
      const status = reply.statusCode;
      const retryable = err !== undefined && (!isTouchstoneError(err) || err.retryable);
      const bytes = payloadBytes(payload);
      if (status >= 500 || status === 429 || retryable || bytes === undefined) {
        await held.release();
        return payload;
      }
      if (bytes.byteLength > service.options.maxResponseBytes) {
        const tooLarge = service.responseTooLarge(bytes.byteLength);
        const body = Buffer.from(JSON.stringify(toErrorBody(tooLarge, String(request.id))));
        const code = httpStatusOf(tooLarge.kind);
        reply.code(code).type('application/json');
        await held.complete({
          status: code,
          headers: { 'content-type': 'application/json' },
          body,
        });
        return body;
      }
      const fields = status < 300 ? (request.routeOptions.config?.idempotencyWithhold ?? []) : [];
      const kept = withhold(bytes, fields);
      const contentType = reply.getHeader('content-type');
      await held.complete({
        status,
        headers: contentType === undefined ? {} : { 'content-type': String(contentType) },
        body: kept.body,
        ...(kept.withheld.length > 0 ? { withheld: kept.withheld } : {}),
      });
      return payload;
    },

    // A response that went out without passing onSend (a hijacked reply) leaves no outcome: what
    // it did is unknown, so the key is not simply released.
    async onResponse(request: FastifyRequest) {
      await keyed.get(request)?.held?.uncertain();
    },
  };
}

function splitUrl(url: string): [string, string] {
  const at = url.indexOf('?');
  return at < 0 ? [url, ''] : [url.slice(0, at), url.slice(at + 1)];
}
