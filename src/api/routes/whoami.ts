import type { FastifyInstance } from 'fastify';
import { type Principal, principalId } from '../../auth/index.js';
import type { TraceQueries } from '../../ingest/index.js';

/**
 * Who a request acts as (a key's id, or an identity-provider principal's subject, email and
 * groups; project, roles, permissions and read scope; or the open principal without auth), the
 * name its writes are recorded under (`principal`: who annotated), and the projects it may read,
 * so a client (the web UI, a tool-protocol client) can show them and offer only what the
 * credential allows. Never a secret.
 */
export async function whoamiView(p: Principal, traces: TraceQueries) {
  return {
    kind: p.kind,
    principal: principalId(p),
    ...(p.kind === 'key' ? { keyId: p.id } : {}),
    ...(p.kind === 'oidc' ? { subject: p.subject, email: p.email, groups: p.groups } : {}),
    ...(p.project === undefined ? {} : { project: p.project }),
    roles: p.roles,
    permissions: [...p.permissions].sort(),
    ...(p.scope === undefined ? {} : { scope: p.scope }),
    projects: await traces.projects(p),
  };
}

/** `GET /v1alpha1/whoami`: `whoamiView` of the caller. */
export async function whoamiRoutes(
  app: FastifyInstance,
  { traces }: { traces: TraceQueries },
): Promise<void> {
  app.get('/v1alpha1/whoami', async (request) => whoamiView(request.principal, traces));
}
