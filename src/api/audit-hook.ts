import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AuditRecord, AuditTrail } from '../auth/index.js';
import { CoreErrors, isTouchstoneError } from '../core/index.js';
import { one, type Query } from './context.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The error a request failed with (REST hooks and handlers, RPC handlers), for the audit. */
    auditError?: unknown;
  }
}

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/**
 * Writes that are not audited when they succeed: ingest is data, not a change of configuration,
 * evaluate stores nothing, and a tool-protocol POST is mostly reads (its tool writes and refusals
 * are recorded by the tool server, one entry per tool call). Their refusals are audited like any
 * other.
 */
const UNAUDITED_ROUTES = new Set([
  '/v1/traces',
  '/v1/logs',
  '/v1alpha1/evaluate',
  '/v1alpha1/guardrails/:policy/request',
  '/v1alpha1/guardrails/:policy/response',
  '/mcp',
]);
const MAX_FIELD = 512;
/**
 * The web UI's sign-in: its caller is anonymous (a public route), and is recorded as the person
 * it signed in once the exchange succeeds.
 */
const SIGN_IN_ROUTE = '/ui/login/token';

/** Notes the error a request failed with (the RPC interceptor calls it for handler errors). */
export function noteFailure(request: FastifyRequest, err: unknown): void {
  request.auditError = err;
}

/**
 * Records every write and every refusal (unauthenticated, permission denied) once the answer is
 * sent: who, the kind of principal, the action (method and route), the path acted on, the
 * project, the outcome and error code, the request id. Never a body, query string or header.
 */
export function installAudit(app: FastifyInstance, trail: AuditTrail): void {
  app.addHook('onError', async (request, _reply, err) => {
    noteFailure(request, err);
  });
  // On the raw response (refusals answered in an RPC caller's protocol bypass Fastify's reply),
  // at `close`, which also comes when the client went away before the answer was complete.
  app.addHook('onRequest', async (request, reply) => {
    reply.raw.once('close', () => {
      const entry = auditRecord(request, reply.raw.statusCode);
      if (entry !== undefined) trail.record(entry);
    });
  });
}

function auditRecord(request: FastifyRequest, status: number): AuditRecord | undefined {
  const err = request.auditError;
  const known = isTouchstoneError(err) ? err : undefined;
  const denied =
    known?.kind === 'unauthenticated' ||
    known?.kind === 'permission_denied' ||
    status === 401 ||
    status === 403;
  const route = request.routeOptions.url;
  const write = WRITE_METHODS.has(request.method) && !UNAUDITED_ROUTES.has(route ?? '');
  if (!denied && !write) return undefined;
  const failed = err !== undefined || status >= 400;
  const principal = request.principal;
  const anonymous =
    known?.kind === 'unauthenticated' ||
    status === 401 ||
    (route === SIGN_IN_ROUTE && principal.kind !== 'oidc');
  const project = projectOf(request);
  return {
    principal: anonymous ? '' : principal.id,
    principalKind: anonymous ? 'anonymous' : principal.kind,
    action: cap(`${request.method} ${route ?? request.url.split('?')[0]}`),
    resource: cap(request.url.split('?')[0] as string),
    ...(project === undefined ? {} : { project: cap(project) }),
    outcome: denied ? 'denied' : failed ? 'failed' : 'ok',
    status,
    ...(failed
      ? { code: known?.code ?? (status >= 500 ? CoreErrors.INTERNAL.code : `HTTP_${status}`) }
      : {}),
    requestId: String(request.id),
  };
}

/** The project the request named (query, then a JSON body's `project`), else the caller's. */
function projectOf(request: FastifyRequest): string | undefined {
  const fromQuery = one((request.query ?? {}) as Query, 'project');
  if (fromQuery !== undefined && fromQuery !== '') return fromQuery;
  const body = request.body as { project?: unknown } | undefined;
  if (typeof body === 'object' && body !== null && typeof body.project === 'string') {
    return body.project;
  }
  return request.principal?.project;
}

function cap(text: string): string {
  return text.length > MAX_FIELD ? `${text.slice(0, MAX_FIELD)}…` : text;
}
