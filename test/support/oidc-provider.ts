import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT } from 'jose';
import Provider from 'oidc-provider';

/** The API audience the test provider issues tokens for (a resource indicator). */
export const API_AUDIENCE = 'https://touchstone.test/api';

export interface TestClient {
  id: string;
  /** Claims added to every token of this client (groups, email, workflow claims). */
  claims: Record<string, unknown>;
}

export interface TestProvider {
  /** `http://127.0.0.1:<port>`, as discovery names it (unless `metadataIssuer` was given). */
  issuer: string;
  /** The signing key, public part as served in the JWKS (kid, alg). */
  publicJwk: JWK;
  /** The same public key as PEM (SPKI). */
  publicPem: string;
  /** A token of `client` from the provider's token endpoint (client_credentials, JWT format). */
  token(client: string, resource?: string): Promise<string>;
  /** Signs any claims with the provider's own key (for tokens the provider would not issue). */
  sign(claims: Record<string, unknown>, header?: Record<string, unknown>): Promise<string>;
  close(): Promise<void>;
}

/**
 * The provider's storage: client_credentials tokens in JWT format are never stored and the
 * clients are static, so nothing needs keeping (and no development-storage warning is printed).
 */
class NoStorage {
  async upsert(): Promise<void> {}
  async find(): Promise<undefined> {
    return undefined;
  }
  async findByUserCode(): Promise<undefined> {
    return undefined;
  }
  async findByUid(): Promise<undefined> {
    return undefined;
  }
  async consume(): Promise<void> {}
  async destroy(): Promise<void> {}
  async revokeByGrantId(): Promise<void> {}
}

/**
 * A real OIDC provider (`oidc-provider` from npm) on loopback: discovery, a JWKS with an RS256
 * key, and client_credentials tokens in JWT format for a resource indicator, with claims per
 * client. `metadataIssuer` makes it serve discovery naming another issuer than its address.
 */
export async function startTestProvider(
  clients: readonly TestClient[],
  options: { metadataIssuer?: (issuer: string) => string } = {},
): Promise<TestProvider> {
  let handler: RequestListener = () => undefined;
  const server: Server = createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const kid = `k-${Math.random().toString(36).slice(2, 10)}`;
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' };
  const byId = new Map(clients.map((c) => [c.id, c]));
  const provider = new Provider(options.metadataIssuer?.(issuer) ?? issuer, {
    clients: clients.map((c) => ({
      client_id: c.id,
      client_secret: `${c.id}-secret`,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      token_endpoint_auth_method: 'client_secret_post',
    })),
    adapter: NoStorage,
    jwks: { keys: [privateJwk] },
    ttl: { ClientCredentials: 600 },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => API_AUDIENCE,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, resource: string) => ({
          scope: '',
          audience: resource,
          accessTokenFormat: 'jwt',
          accessTokenTTL: 600,
          jwt: { sign: { alg: 'RS256' } },
        }),
      },
    },
    extraTokenClaims: (_ctx: unknown, token: { clientId: string }) =>
      byId.get(token.clientId)?.claims ?? {},
  });
  handler = provider.callback();
  return {
    issuer,
    publicJwk,
    publicPem: await exportSPKI(publicKey),
    async token(client, resource = API_AUDIENCE) {
      const res = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'client_credentials',
          client_id: client,
          client_secret: `${client}-secret`,
          resource,
        }),
      });
      const body = (await res.json()) as { access_token?: string };
      if (res.status !== 200 || body.access_token === undefined) {
        throw new Error(`token endpoint answered ${res.status}: ${JSON.stringify(body)}`);
      }
      return body.access_token;
    },
    sign(claims, header = {}) {
      return new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid, ...header })
        .sign(privateKey);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
