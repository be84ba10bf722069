import type { FastifyInstance } from 'fastify';
import { AuthErrors, type BrowserSignIn, parseTokenRequest } from '../../auth/index.js';

/** A token request is three short strings; anything larger is refused before it is parsed. */
export const TOKEN_BODY_LIMIT = 16 * 1024;

/**
 * `/ui/login/…`: the web UI's sign-in at the identity provider of `ui.sign_in` (public, like the
 * page: they are how a person gets a credential). `config` says where to send the person;
 * `token` exchanges the code the provider sent back for an ID token. Without `ui.sign_in` both
 * answer 404 `UI_SIGN_IN_NOT_CONFIGURED` and the page asks for an API key. Answers are never
 * cached.
 */
export async function uiLoginRoutes(
  app: FastifyInstance,
  { signIn }: { signIn: BrowserSignIn | undefined },
): Promise<void> {
  const configured = (): BrowserSignIn => {
    if (signIn !== undefined) return signIn;
    throw AuthErrors.UI_SIGN_IN_NOT_CONFIGURED(
      'this server has no browser sign-in (ui.sign_in is not configured): use an API key',
    );
  };

  app.get('/ui/login/config', async (_request, reply) => {
    const config = await configured().config();
    reply.header('cache-control', 'no-store');
    return {
      issuer: config.issuer,
      client_id: config.clientId,
      scopes: config.scopes,
      authorization_endpoint: config.authorizationEndpoint,
    };
  });

  app.post('/ui/login/token', { bodyLimit: TOKEN_BODY_LIMIT }, async (request, reply) => {
    const service = configured();
    const signedIn = await service.exchange(parseTokenRequest(request.body));
    // The audit trail records the sign-in as the person it signed in.
    request.principal = signedIn.principal;
    reply.header('cache-control', 'no-store');
    return { id_token: signedIn.idToken, expires_at: signedIn.expiresAt.toISOString() };
  });
}
