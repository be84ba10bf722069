import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import { createSecureContext } from 'node:tls';
import { z } from 'zod';
import type { ControllerLog } from './controller.js';
import {
  apiDocument,
  type CustomResource,
  GROUP,
  type Json,
  KINDS,
  type KindName,
} from './kinds.js';
import { classify, runImmutableMessage, type ServerFailure } from './reconcile.js';
import { ServerCallError, type TouchstoneClient } from './server-client.js';

/**
 * The validating admission webhook (`POST /validate`, HTTPS only: the Kubernetes API server calls
 * nothing else). A create or change of a touchstone.dev resource is sent to the server's API with
 * `validate_only`: what the API refuses is refused with the API's message; a source naming a
 * policy that does not exist yet is admitted with a warning (the operator syncs it once the
 * policy exists). When the server cannot give an answer, `failurePolicy` decides, as the API
 * server would for an unanswered webhook, but with a message that says why.
 */

/**
 * The largest review read. The API server stores objects of at most 1.5 MiB and a review carries
 * at most two of them (object and oldObject); anything larger is not a review.
 */
export const MAX_REVIEW_BYTES = 4 * 1024 * 1024;

export type FailurePolicy = 'Fail' | 'Ignore';

const KubeObject = z.record(z.string(), z.unknown());

const ReviewSchema = z.object({
  apiVersion: z.literal('admission.k8s.io/v1'),
  kind: z.literal('AdmissionReview'),
  request: z.object({
    uid: z.string().min(1).max(256),
    kind: z.object({ group: z.string(), version: z.string(), kind: z.string() }),
    operation: z.enum(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']),
    namespace: z.string().optional(),
    name: z.string().optional(),
    object: KubeObject.nullable().optional(),
    oldObject: KubeObject.nullable().optional(),
  }),
});

export type AdmissionRequest = z.infer<typeof ReviewSchema>['request'];

/** admission.k8s.io/v1 AdmissionResponse. */
export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: { code: number; message: string; reason?: string };
  warnings?: string[];
}

const allow = (uid: string, warnings: string[] = []): AdmissionResponse => ({
  uid,
  allowed: true,
  ...(warnings.length === 0 ? {} : { warnings }),
});

const deny = (uid: string, code: number, reason: string, message: string): AdmissionResponse => ({
  uid,
  allowed: false,
  status: { code, reason, message },
});

const metadataOf = (o: Json | null | undefined) =>
  (o?.metadata ?? {}) as CustomResource['metadata'] & {
    generateName?: string;
  };

/** Only a change of spec or labels can change what the server would say. */
function unchangedForServer(request: AdmissionRequest): boolean {
  if (request.operation !== 'UPDATE' || request.oldObject == null) return false;
  const facts = (o: Json | null | undefined) =>
    JSON.stringify([o?.spec ?? {}, metadataOf(o).labels ?? {}]);
  return facts(request.object) === facts(request.oldObject);
}

/** A change of an EvalRun's spec after its run was created: the run would never follow it. */
function changesCreatedRun(request: AdmissionRequest): unknown {
  if (request.operation !== 'UPDATE' || request.kind.kind !== 'EvalRun') return undefined;
  const runId = ((request.oldObject?.status ?? {}) as Json).runId;
  if (runId === undefined) return undefined;
  const spec = (o: Json | null | undefined) => JSON.stringify(o?.spec ?? {});
  return spec(request.object) === spec(request.oldObject) ? undefined : runId;
}

/** The custom resource under review, with the namespace and name the request gives it. */
function resourceOf(request: AdmissionRequest, object: Json): CustomResource {
  const metadata = metadataOf(object);
  // A generateName'd object has no name yet; the API checks names, so give it one of that form.
  const name = metadata.name ?? request.name ?? `${metadata.generateName ?? ''}admission`;
  return {
    ...(object as unknown as CustomResource),
    metadata: { ...metadata, name, namespace: request.namespace ?? metadata.namespace ?? '' },
    spec: (object.spec ?? {}) as Json,
  };
}

/** The answer to a server call that failed: refused, admitted with a warning, or not checked. */
export function failureResponse(
  uid: string,
  kind: KindName,
  failure: ServerFailure,
  failurePolicy: FailurePolicy,
): AdmissionResponse {
  const { reason } = classify(failure);
  if (failure.type === 'refused' && reason === 'PolicyNotFound') {
    return allow(uid, [
      `${failure.message}; the operator syncs this ${kind} once the policy exists`,
    ]);
  }
  if (failure.type === 'refused' && reason === 'Refused') {
    const code = failure.code === undefined ? '' : `${failure.code}: `;
    return deny(uid, failure.status, 'Invalid', `${code}${failure.message}`);
  }
  const why =
    failure.type === 'unreachable'
      ? `cannot reach the Touchstone server: ${failure.message}`
      : `the Touchstone server answered ${failure.status}: ${failure.message}`;
  if (failurePolicy === 'Ignore') return allow(uid, [`not checked by Touchstone: ${why}`]);
  return deny(uid, 503, 'ServiceUnavailable', `${kind} not checked (failurePolicy Fail): ${why}`);
}

/**
 * Decides one review: deletes and unchanged updates pass; a changed spec of an EvalRun whose run
 * exists is refused (runs never change); the rest ask the server.
 */
export async function review(
  request: AdmissionRequest,
  server: TouchstoneClient,
  failurePolicy: FailurePolicy,
): Promise<AdmissionResponse> {
  const { uid } = request;
  const kind = KINDS[request.kind.kind as KindName];
  const object = request.object;
  if (request.operation !== 'CREATE' && request.operation !== 'UPDATE') return allow(uid);
  // Not ours (a misconfigured webhook rule): nothing for Touchstone to say.
  if (request.kind.group !== GROUP || kind === undefined) return allow(uid);
  if (object == null) return deny(uid, 400, 'BadRequest', 'the review carries no object');
  // Being deleted: finalizers come off with updates that must never be blocked.
  if (metadataOf(object).deletionTimestamp !== undefined) return allow(uid);
  if (unchangedForServer(request)) return allow(uid);
  const runId = changesCreatedRun(request);
  if (runId !== undefined) return deny(uid, 422, 'Invalid', runImmutableMessage(runId));
  const document = apiDocument(kind, resourceOf(request, object));
  try {
    await server.call('POST', `v1alpha1/${kind.apiPlural}?validate_only=true`, document);
    return allow(uid);
  } catch (err) {
    if (!(err instanceof ServerCallError)) throw err;
    return failureResponse(uid, kind.kind, err.failure, failurePolicy);
  }
}

export interface AdmissionOptions {
  host: string;
  port: number;
  certFile: string;
  keyFile: string;
  /** The client the webhook asks; its timeout must be below the webhook's `timeoutSeconds`. */
  server: TouchstoneClient;
  failurePolicy: FailurePolicy;
  /** How often the certificate files are read again (a mounted Secret changes in place). */
  reloadIntervalMs: number;
  log: ControllerLog;
}

export interface RunningAdmission {
  readonly port: number;
  stop(): Promise<void>;
}

class BadReview extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (Number(req.headers['content-length'] ?? 0) > MAX_REVIEW_BYTES) {
      reject(new BadReview(413, `a review is at most ${MAX_REVIEW_BYTES} bytes`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_REVIEW_BYTES) {
        // Read no more; the answer closes the connection (send() with a 413).
        req.pause();
        req.removeAllListeners('data');
        reject(new BadReview(413, `a review is at most ${MAX_REVIEW_BYTES} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function parseReview(body: Buffer): AdmissionRequest {
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    throw new BadReview(400, 'the body is not JSON');
  }
  const parsed = ReviewSchema.safeParse(json);
  if (!parsed.success) {
    // The paths only, never the values: a review carries whole objects.
    const paths = parsed.error.issues.map((i) => i.path.join('.') || '(root)');
    throw new BadReview(400, `not an admission.k8s.io/v1 AdmissionReview (${paths.join(', ')})`);
  }
  return parsed.data.request;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    // A body left unread (too large) must not be taken for the next request.
    ...(status === 413 ? { connection: 'close' } : {}),
  });
  res.end(text);
}

/** The certificate pair as files hold it now; throws when it does not make a TLS context. */
function loadPair(certFile: string, keyFile: string): { cert: Buffer; key: Buffer } {
  const pair = { cert: readFileSync(certFile), key: readFileSync(keyFile) };
  createSecureContext(pair);
  return pair;
}

/** Starts the webhook's HTTPS server; it answers until stop(). */
export async function startAdmission(options: AdmissionOptions): Promise<RunningAdmission> {
  const { log } = options;
  let pair = loadPair(options.certFile, options.keyFile);
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? '/', 'https://admission').pathname;
    if (req.method !== 'POST' || path !== '/validate') {
      send(res, 404, { error: 'POST /validate only' });
      return;
    }
    try {
      const request = parseReview(await readBody(req));
      const response = await review(request, options.server, options.failurePolicy);
      if (!response.allowed) {
        log.info('admission refused', {
          kind: request.kind.kind,
          namespace: request.namespace,
          name: request.name,
          code: response.status?.code,
        });
      }
      send(res, 200, { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response });
    } catch (err) {
      if (err instanceof BadReview) {
        send(res, err.status, { error: err.message });
        return;
      }
      log.warn('admission failed', { err: (err as Error).message });
      send(res, 500, { error: 'internal error' });
    }
  };
  const server: Server = createServer(
    { ...pair, headersTimeout: 10_000, requestTimeout: 15_000 },
    (req, res) => {
      void handle(req, res);
    },
  );
  const reload = setInterval(() => {
    try {
      const next = loadPair(options.certFile, options.keyFile);
      if (next.cert.equals(pair.cert) && next.key.equals(pair.key)) return;
      server.setSecureContext(next);
      pair = next;
      log.info('admission certificate reloaded');
    } catch (err) {
      // Mid-rotation (a new cert beside the old key) or unreadable: keep serving the old pair.
      log.warn('admission certificate not reloaded', { err: (err as Error).message });
    }
  }, options.reloadIntervalMs);
  reload.unref();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // An empty host: every address, IPv6 too where the pod has it.
    if (options.host === '') server.listen(options.port, () => resolve());
    else server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address !== null ? address.port : options.port,
    async stop() {
      clearInterval(reload);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
