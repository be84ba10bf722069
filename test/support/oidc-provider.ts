import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT } from 'jose';
import Provider from 'oidc-provider';

/** The API audience the test provider issues tokens for (a resource indicator). */
export const API_AUDIENCE = 'https://touchstone.test/api';

export interface TestClient {
  id: string;
  /** Claims added to every token of this client (groups, email, workflow claims). */
  claims: Record<string, unknown>;
  /**
   * Makes it a public client of people signing in (no secret; authorization code with PKCE and
   * the device flow), redirected only to these URIs.
   */
  redirectUris?: readonly string[];
}

/** People who can sign in: login name (their `sub`) → claims of their ID tokens. */
export type TestAccounts = Readonly<Record<string, Record<string, unknown>>>;

export interface TestProvider {
  /** `http://127.0.0.1:<port>`, as discovery names it (unless `metadataIssuer` was given). */
  issuer: string;
  /** The signing key, public part as served in the JWKS (kid, alg). */
  publicJwk: JWK;
  /** The same public key as PEM (SPKI). */
  publicPem: string;
  /** A token of `client` from the provider's token endpoint (client_credentials, JWT format). */
  token(client: string, resource?: string): Promise<string>;
  /**
   * Signs `login` in as a person would in a browser: opens `authorizeUrl`, submits the sign-in
   * form, and returns the URL the provider redirects back to (with `code` and `state`) without
   * opening it.
   */
  signIn(authorizeUrl: string, login: string): Promise<string>;
  /** Approves a device-flow `userCode` as `login`, as a person at the verification page would. */
  approveDevice(userCode: string, login: string): Promise<void>;
  /** Signs any claims with the provider's own key (for tokens the provider would not issue). */
  sign(claims: Record<string, unknown>, header?: Record<string, unknown>): Promise<string>;
  close(): Promise<void>;
}

interface Stored {
  payload: Record<string, unknown>;
  expiresAt: number;
}

/** The provider's storage (sessions, interactions, codes, grants), in memory for one test. */
function memoryStorage() {
  const rows = new Map<string, Stored>();
  return class MemoryStorage {
    constructor(private readonly model: string) {}
    private key(id: string): string {
      return `${this.model}:${id}`;
    }
    async upsert(id: string, payload: Record<string, unknown>, expiresIn: number): Promise<void> {
      rows.set(this.key(id), { payload, expiresAt: Date.now() + expiresIn * 1000 });
    }
    async find(id: string): Promise<Record<string, unknown> | undefined> {
      const row = rows.get(this.key(id));
      if (row === undefined || row.expiresAt < Date.now()) return undefined;
      return row.payload;
    }
    async findByUserCode(userCode: string): Promise<Record<string, unknown> | undefined> {
      return this.findBy('userCode', userCode);
    }
    async findByUid(uid: string): Promise<Record<string, unknown> | undefined> {
      return this.findBy('uid', uid);
    }
    async consume(id: string): Promise<void> {
      const row = rows.get(this.key(id));
      if (row !== undefined) row.payload.consumed = Math.floor(Date.now() / 1000);
    }
    async destroy(id: string): Promise<void> {
      rows.delete(this.key(id));
    }
    async revokeByGrantId(grantId: string): Promise<void> {
      for (const [key, row] of rows) if (row.payload.grantId === grantId) rows.delete(key);
    }
    private findBy(field: string, value: string): Record<string, unknown> | undefined {
      for (const [key, row] of rows) {
        if (key.startsWith(`${this.model}:`) && row.payload[field] === value) return row.payload;
      }
      return undefined;
    }
  };
}

/** The sign-in page the provider shows: one text field, the login name. */
const SIGN_IN_PAGE = (uid: string) =>
  `<!doctype html><title>Test provider sign-in</title><form method="post" action="/interaction/${uid}">` +
  '<label>Login <input id="login" name="login" autocomplete="off"></label>' +
  '<button id="sign-in" type="submit">Sign in</button></form>';

/**
 * A real OIDC provider (`oidc-provider` from npm) on loopback: discovery, a JWKS with an RS256
 * key, client_credentials tokens in JWT format for a resource indicator with claims per client,
 * and, for clients with redirect URIs, people's sign-in (authorization code with PKCE, the device
 * flow) through a one-field sign-in page: any login of `accounts` signs in, with its claims in
 * the ID token. `metadataIssuer` makes it serve discovery naming another issuer than its address.
 */
export async function startTestProvider(
  clients: readonly TestClient[],
  options: {
    metadataIssuer?: (issuer: string) => string;
    accounts?: TestAccounts;
    /** Lifetime of ID tokens (seconds). */
    idTokenTtl?: number;
  } = {},
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
  const accounts = options.accounts ?? {};
  const provider = new Provider(options.metadataIssuer?.(issuer) ?? issuer, {
    clients: clients.map(clientMetadata),
    adapter: memoryStorage(),
    jwks: { keys: [privateJwk] },
    cookies: { keys: [`cookie-key-${kid}`] },
    ttl: {
      ClientCredentials: 600,
      IdToken: options.idTokenTtl ?? 600,
      AccessToken: 600,
      AuthorizationCode: 60,
      DeviceCode: 600,
      Grant: 3600,
      Interaction: 600,
      Session: 3600,
    },
    scopes: ['openid', 'email', 'groups'],
    claims: { email: ['email'], groups: ['groups'] },
    conformIdTokenClaims: false,
    renderError: (ctx: { type: string; body: string }, out: Record<string, string>) => {
      ctx.type = 'text/plain';
      ctx.body = `${out.error}: ${out.error_description}`;
    },
    findAccount: (_ctx: unknown, id: string) =>
      accounts[id] === undefined
        ? undefined
        : { accountId: id, claims: () => ({ sub: id, ...accounts[id] }) },
    interactions: {
      url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}`,
    },
    features: {
      devInteractions: { enabled: false },
      deviceFlow: {
        enabled: true,
        userCodeInputSource: devicePage('op.deviceInputForm'),
        userCodeConfirmSource: devicePage('op.deviceConfirmForm'),
        successSource: (ctx: { body: string }) => {
          ctx.body = '<!doctype html><title>Signed in</title><p>Sign-in Success</p>';
        },
      },
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
  const callback = provider.callback();
  handler = (req, res) => {
    const uid = /^\/interaction\/([\w-]+)$/.exec(req.url ?? '')?.[1];
    if (uid === undefined) return callback(req, res);
    signInPage(provider, uid, req, res).catch((err: Error) => {
      res.writeHead(500).end(err.message);
    });
  };
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
    signIn: (authorizeUrl, login) => signInHeadless(authorizeUrl, login),
    approveDevice: (userCode, login) => approveDeviceHeadless(issuer, userCode, login),
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

function clientMetadata(client: TestClient): Record<string, unknown> {
  if (client.redirectUris === undefined) {
    return {
      client_id: client.id,
      client_secret: `${client.id}-secret`,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      token_endpoint_auth_method: 'client_secret_post',
    };
  }
  return {
    client_id: client.id,
    application_type: 'native',
    grant_types: ['authorization_code', 'urn:ietf:params:oauth:grant-type:device_code'],
    redirect_uris: [...client.redirectUris],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  };
}

/** GET shows the sign-in form; POST signs the login in and grants the scopes asked for. */
async function signInPage(
  provider: Provider,
  uid: string,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(SIGN_IN_PAGE(uid));
    return;
  }
  let body = '';
  for await (const chunk of req) body += String(chunk);
  const login = new URLSearchParams(body).get('login') ?? '';
  const details = await provider.interactionDetails(req, res);
  const grant = new provider.Grant({
    accountId: login,
    clientId: String(details.params.client_id),
  });
  grant.addOIDCScope(String(details.params.scope ?? 'openid'));
  const grantId = await grant.save();
  await provider.interactionFinished(
    req,
    res,
    { login: { accountId: login }, consent: { grantId } },
    { mergeWithLastSubmission: false },
  );
}

/** A device-flow page of the provider: its form and a submit button. */
function devicePage(formId: string) {
  return (ctx: { body: string }, form: string) => {
    ctx.body = `<!doctype html><title>Device sign-in</title>${form}<button type="submit" form="${formId}">Continue</button>`;
  };
}

/** A browser's cookie jar and redirects, for flows the tests run without a browser. */
class HeadlessBrowser {
  private readonly cookies = new Map<string, string>();

  /** Follows redirects until one leaves `origin` (returned unopened) or a page answers. */
  async go(
    url: string,
    origin: string,
    form?: Record<string, string>,
  ): Promise<{ url: string; page?: string }> {
    let next = url;
    let body = form === undefined ? undefined : new URLSearchParams(form).toString();
    for (let hop = 0; hop < 20; hop += 1) {
      if (new URL(next).origin !== origin) return { url: next };
      const res = await fetch(next, {
        method: body === undefined ? 'GET' : 'POST',
        redirect: 'manual',
        headers: {
          cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
          ...(body === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded' }),
        },
        ...(body === undefined ? {} : { body }),
      });
      for (const line of res.headers.getSetCookie()) {
        const [pair = ''] = line.split(';');
        const at = pair.indexOf('=');
        this.cookies.set(pair.slice(0, at), pair.slice(at + 1));
      }
      const location = res.headers.get('location');
      if (location === null) return { url: next, page: await res.text() };
      await res.arrayBuffer();
      next = new URL(location, next).toString();
      body = undefined;
    }
    throw new Error('too many redirects');
  }
}

async function signInHeadless(authorizeUrl: string, login: string): Promise<string> {
  const browser = new HeadlessBrowser();
  const origin = new URL(authorizeUrl).origin;
  const form = await browser.go(authorizeUrl, origin);
  if (form.page === undefined) return form.url;
  if (!form.page.includes('id="login"')) throw new Error(`no sign-in form: ${form.page}`);
  const done = await browser.go(form.url, origin, { login });
  if (done.page !== undefined) throw new Error(`sign-in did not redirect back: ${done.page}`);
  return done.url;
}

async function approveDeviceHeadless(issuer: string, userCode: string, login: string) {
  const browser = new HeadlessBrowser();
  const xsrf = (page = '') => /name="xsrf" value="([^"]+)"/.exec(page)?.[1] ?? '';
  const input = await browser.go(`${issuer}/device`, issuer);
  const confirm = await browser.go(`${issuer}/device`, issuer, {
    xsrf: xsrf(input.page),
    user_code: userCode,
  });
  const form = await browser.go(`${issuer}/device`, issuer, {
    xsrf: xsrf(confirm.page),
    user_code: userCode,
    confirm: 'yes',
  });
  if (!form.page?.includes('id="login"')) throw new Error(`no sign-in form: ${form.page}`);
  const done = await browser.go(form.url, issuer, { login });
  if (!done.page?.includes('Sign-in Success')) throw new Error(`device not approved: ${done.page}`);
}
