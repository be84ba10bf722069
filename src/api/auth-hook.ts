import type { FastifyInstance } from 'fastify';
import {
  AuthErrors,
  type BearerAuthenticator,
  OPEN_PRINCIPAL,
  type Principal,
} from '../auth/index.js';
import './context.js';
import { OPENAPI_PATH } from './openapi.js';

/**
 * Routes that answer without credentials. The web UI's files and the OpenAPI document hold no
 * data (the page asks for a key and sends it with its API calls); the UI's sign-in routes are
 * how a person gets a credential.
 */
const PUBLIC_ROUTES = new Set([
  '/healthz',
  '/readyz',
  OPENAPI_PATH,
  '/ui',
  '/ui/*',
  '/ui/login/config',
  '/ui/login/token',
  // Where tool-protocol clients learn which identity providers issue tokens for /mcp (RFC 9728).
  '/.well-known/oauth-protected-resource/mcp',
]);

/**
 * Resolves the caller before any handler: with auth off every request acts as the open principal
 * (owner of every project); with auth on a bearer credential (an API key, or an identity provider's token) is required
 * except on health routes.
 */
export function installAuth(
  app: FastifyInstance,
  bearer: Pick<BearerAuthenticator, 'authenticate'>,
  required: boolean,
): void {
  // Decorated as null (a shared object default is refused by Fastify), set on every request.
  app.decorateRequest('principal', null as unknown as Principal);
  app.addHook('onRequest', async (request) => {
    request.principal = OPEN_PRINCIPAL;
    if (!required) return;
    if (PUBLIC_ROUTES.has(request.routeOptions.url ?? '')) return;
    const header = request.headers.authorization;
    if (header === undefined || header === '') {
      throw AuthErrors.UNAUTHENTICATED(
        'missing credentials: send "Authorization: Bearer <API key or identity token>"',
      );
    }
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (match === null) {
      throw AuthErrors.UNAUTHENTICATED(
        'malformed Authorization header: expected "Bearer <API key or identity token>"',
      );
    }
    request.principal = await bearer.authenticate(match[1] as string);
  });
}
