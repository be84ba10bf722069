import { createHash, randomBytes } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import { startTestProvider, type TestProvider } from '../../test/support/oidc-provider.js';

/**
 * The web UI's sign-in endpoints (`/ui/login/config`, `/ui/login/token`) against a real OIDC
 * provider: the UI's public client signs people in with the authorization code and PKCE; the
 * server exchanges the code with no secret and hands back only the ID token.
 */

const CLIENT = 'touchstone-ui';
/** The provider ignores a loopback redirect's port (RFC 8252), as the UI's origin has one. */
const REDIRECT = 'http://127.0.0.1:4318/ui/';
const ACCOUNTS = {
  ana: { email: 'ana@example.com', groups: ['team-agents'] },
  eve: { email: 'eve@example.com', groups: ['outsiders'] },
};

function config(issuer: string) {
  return {
    auth: {
      allow_hosts: ['127.0.0.1'],
      oidc: [
        {
          issuer,
          audiences: [CLIENT],
          mappings: [{ groups: ['team-agents'], project: 'agents', roles: ['editor'] }],
        },
      ],
    },
    ui: { sign_in: { issuer, client_id: CLIENT, scopes: ['openid', 'email', 'groups'] } },
  };
}

const base64url = (bytes: Buffer) => bytes.toString('base64url');

/** What the page does before it sends the person to the provider. */
function pkce() {
  const verifier = base64url(randomBytes(32));
  return {
    verifier,
    challenge: base64url(createHash('sha256').update(verifier).digest()),
    state: base64url(randomBytes(16)),
    nonce: base64url(randomBytes(16)),
  };
}

/** An address where nothing listens (a provider that is down). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('signing in to the web UI at an identity provider', () => {
  let idp: TestProvider;
  let t: TestApp;
  let keysOnly: TestApp;

  beforeAll(async () => {
    idp = await startTestProvider([{ id: CLIENT, claims: {}, redirectUris: [REDIRECT] }], {
      accounts: ACCOUNTS,
    });
    t = await testApp(config(idp.issuer));
    keysOnly = await testApp({ auth: {} });
  });
  afterAll(async () => {
    await t.close();
    await keysOnly.close();
    await idp.close();
  });

  const loginConfig = (on = t) => on.app.server.inject({ method: 'GET', url: '/ui/login/config' });
  const token = (payload: unknown, on = t) =>
    on.app.server.inject({ method: 'POST', url: '/ui/login/token', payload: payload as object });

  /** Signs `login` in at the provider as the page would; returns the code and the verifier. */
  async function authorize(login: string) {
    const cfg = (await loginConfig()).json() as {
      authorization_endpoint: string;
      scopes: string[];
    };
    const p = pkce();
    const url = new URL(cfg.authorization_endpoint);
    url.search = new URLSearchParams({
      client_id: CLIENT,
      response_type: 'code',
      scope: cfg.scopes.join(' '),
      redirect_uri: REDIRECT,
      state: p.state,
      nonce: p.nonce,
      code_challenge: p.challenge,
      code_challenge_method: 'S256',
    }).toString();
    const back = new URL(await idp.signIn(url.toString(), login));
    expect(back.origin + back.pathname).toBe(REDIRECT);
    expect(back.searchParams.get('state')).toBe(p.state);
    return { code: back.searchParams.get('code') as string, verifier: p.verifier, nonce: p.nonce };
  }

  const exchange = (code: string, verifier: string, redirect = REDIRECT) =>
    token({ code, code_verifier: verifier, redirect_uri: redirect });

  it('tells the page where to sign in: issuer, the UI’s client, scopes, authorization endpoint', async () => {
    const res = await loginConfig();
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      issuer: idp.issuer,
      client_id: CLIENT,
      scopes: ['openid', 'email', 'groups'],
      authorization_endpoint: `${idp.issuer}/auth`,
    });
    expect(res.headers['cache-control']).toBe('no-store');
    expect(String(res.headers['content-security-policy'])).toContain("connect-src 'self'");
  });

  it('answers 404 UI_SIGN_IN_NOT_CONFIGURED on a server of API keys only', async () => {
    for (const res of [
      await loginConfig(keysOnly),
      await token({ code: 'x', code_verifier: 'y', redirect_uri: REDIRECT }, keysOnly),
    ]) {
      expect(res.statusCode).toBe(404);
      expect(res.json().error).toMatchObject({
        code: 'UI_SIGN_IN_NOT_CONFIGURED',
        message: expect.stringContaining('ui.sign_in'),
      });
    }
  });

  it('exchanges the code for the ID token only, which then acts as the person', async () => {
    const { code, verifier, nonce } = await authorize('ana');
    const res = await exchange(code, verifier);
    expect(res.statusCode).toBe(200);
    const body = res.json() as { id_token: string; expires_at: string };
    expect(Object.keys(body).sort()).toEqual(['expires_at', 'id_token']);
    expect(res.body).not.toContain('refresh_token');
    expect(res.body).not.toContain('access_token');
    expect(res.headers['cache-control']).toBe('no-store');
    const claims = JSON.parse(
      Buffer.from(body.id_token.split('.')[1] as string, 'base64url').toString(),
    );
    expect(claims).toMatchObject({ iss: idp.issuer, aud: CLIENT, sub: 'ana', nonce });
    expect(body.expires_at).toBe(new Date(claims.exp * 1000).toISOString());

    const me = await t.app.server.inject({
      method: 'GET',
      url: '/v1alpha1/whoami',
      headers: { authorization: `Bearer ${body.id_token}` },
    });
    expect(me.json()).toMatchObject({
      kind: 'oidc',
      principal: `oidc:${idp.issuer}#ana`,
      subject: 'ana',
      email: 'ana@example.com',
      project: 'agents',
      roles: ['editor'],
    });
  });

  it('refuses a replayed code, naming the provider’s error and never the code', async () => {
    const { code, verifier } = await authorize('ana');
    expect((await exchange(code, verifier)).statusCode).toBe(200);
    const again = await exchange(code, verifier);
    expect(again.statusCode).toBe(400);
    expect(again.json().error).toMatchObject({
      code: 'SIGN_IN_CODE_REFUSED',
      message: expect.stringContaining('(invalid_grant): the code was already used'),
    });
    expect(again.body).not.toContain(code);
    expect(again.body).not.toContain(verifier);
  });

  it('refuses a wrong verifier at the provider', async () => {
    const { code } = await authorize('ana');
    const res = await exchange(code, pkce().verifier);
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('SIGN_IN_CODE_REFUSED');
    expect(res.json().error.message).toContain('invalid_grant');
  });

  it('refuses a missing or malformed verifier and a redirect outside /ui/ before asking the provider', async () => {
    const { code, verifier } = await authorize('ana');
    const refusals: [Record<string, unknown>, string][] = [
      [{ code, redirect_uri: REDIRECT }, 'code_verifier (the PKCE verifier) is missing'],
      [{ code, code_verifier: 'short', redirect_uri: REDIRECT }, 'RFC 7636'],
      [{ code, code_verifier: `${verifier}!`, redirect_uri: REDIRECT }, 'RFC 7636'],
      [{ code_verifier: verifier, redirect_uri: REDIRECT }, 'code is missing'],
      [{ code, code_verifier: verifier }, 'redirect_uri is missing'],
      ...[
        'http://127.0.0.1:4318/v1alpha1/whoami',
        'http://127.0.0.1:4318/ui',
        'http://127.0.0.1:4318/ui/../v1alpha1/',
        'http://127.0.0.1:4318/ui/%2e%2e/v1alpha1/',
        'http://user:pw@127.0.0.1:4318/ui/',
        'http://127.0.0.1:4318/ui/#x',
        'javascript:alert(1)//ui/',
        'ftp://127.0.0.1/ui/',
        '/ui/',
      ].map((redirect_uri): [Record<string, unknown>, string] => [
        { code, code_verifier: verifier, redirect_uri },
        'redirect_uri: must be an http(s) URL of the web UI',
      ]),
      [
        { code, code_verifier: verifier, redirect_uri: REDIRECT, client_secret: 'x' },
        'unknown field',
      ],
    ];
    for (const [payload, message] of refusals) {
      const res = await token(payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().error.code).toBe('SIGN_IN_REQUEST_INVALID');
      expect(res.json().error.message).toContain(message);
      expect(res.body).not.toContain(code);
    }
    // None of them reached the provider: the code is still unused.
    expect((await exchange(code, verifier)).statusCode).toBe(200);
  });

  it('records sign-ins in the audit trail: as the person, or anonymous when refused', async () => {
    const { code, verifier } = await authorize('ana');
    const ok = await t.app.server.inject({
      method: 'POST',
      url: '/ui/login/token',
      headers: { 'x-request-id': 'sign-in-ok' },
      payload: { code, code_verifier: verifier, redirect_uri: REDIRECT },
    });
    const replayed = await t.app.server.inject({
      method: 'POST',
      url: '/ui/login/token',
      headers: { 'x-request-id': 'sign-in-replayed' },
      payload: { code, code_verifier: verifier, redirect_uri: REDIRECT },
    });
    expect([ok.statusCode, replayed.statusCode]).toEqual([200, 400]);
    await t.app.audit.flush();
    const rows = await t.app.store.audit.list({}, { pageSize: 1000 });
    const entry = (id: string) => rows.items.find((e) => e.requestId === id);
    expect(entry('sign-in-ok')).toMatchObject({
      principal: `${idp.issuer}#ana`,
      principalKind: 'oidc',
      action: 'POST /ui/login/token',
      outcome: 'ok',
    });
    expect(entry('sign-in-replayed')).toMatchObject({
      principal: '',
      principalKind: 'anonymous',
      outcome: 'failed',
      code: 'SIGN_IN_CODE_REFUSED',
    });
    expect(JSON.stringify(rows.items)).not.toContain(code);
  });

  it('refuses an oversized body before parsing it', async () => {
    const res = await token({
      code: 'x'.repeat(20_000),
      code_verifier: 'y',
      redirect_uri: REDIRECT,
    });
    expect(res.statusCode).toBe(413);
    expect(res.json().error.message).toContain('16384 bytes');
  });

  it('refuses a person whom no mapping admits', async () => {
    const { code, verifier } = await authorize('eve');
    const res = await exchange(code, verifier);
    expect(res.statusCode).toBe(403);
    expect(res.json().error.code).toBe('OIDC_NO_MAPPING');
    expect(res.body).not.toContain('id_token');
  });

  it('says so when the provider names another issuer, or does not answer (503, retryable)', async () => {
    const liar = await startTestProvider([{ id: CLIENT, claims: {}, redirectUris: [REDIRECT] }], {
      metadataIssuer: (issuer) => `${issuer}/other`,
    });
    const down = `http://127.0.0.1:${await closedPort()}`;
    const apps = [await testApp(config(liar.issuer)), await testApp(config(down))];
    try {
      const [named, unreachable] = await Promise.all(apps.map((a) => loginConfig(a)));
      expect(named?.statusCode).toBe(503);
      expect(named?.json().error).toMatchObject({
        code: 'OIDC_PROVIDER_UNAVAILABLE',
        message: expect.stringContaining('names another issuer'),
      });
      expect(unreachable?.statusCode).toBe(503);
      expect(unreachable?.headers['retry-after']).toBeDefined();
      expect(unreachable?.json().error.code).toBe('OIDC_PROVIDER_UNAVAILABLE');
      const exchanged = await token(
        { code: 'abc', code_verifier: pkce().verifier, redirect_uri: REDIRECT },
        apps[1],
      );
      expect(exchanged.statusCode).toBe(503);
      expect(exchanged.json().error.code).toBe('OIDC_PROVIDER_UNAVAILABLE');
    } finally {
      await Promise.all(apps.map((a) => a.close()));
      await liar.close();
    }
  });

  it('asks a failing provider for its discovery at most once per 5 s, however many pages ask', async () => {
    let hits = 0;
    const broken = createHttpServer((_req, res) => {
      hits += 1;
      res.writeHead(500).end();
    });
    await new Promise<void>((resolve) => broken.listen(0, '127.0.0.1', resolve));
    const issuer = `http://127.0.0.1:${(broken.address() as AddressInfo).port}`;
    const app = await testApp(config(issuer));
    try {
      const answers = await Promise.all(Array.from({ length: 20 }, () => loginConfig(app)));
      answers.push(...(await Promise.all(Array.from({ length: 20 }, () => loginConfig(app)))));
      for (const res of answers) {
        expect(res.statusCode).toBe(503);
        expect(res.json().error.message).toContain('answered HTTP 500');
      }
      expect(hits).toBe(1);
    } finally {
      await app.close();
      await new Promise<void>((resolve) => broken.close(() => resolve()));
    }
  });

  it('exchanges at most 8 sign-ins with the provider at once: more get 503 SIGN_IN_BUSY, unsent', async () => {
    let exchanges = 0;
    const held: (() => void)[] = [];
    const slow = createHttpServer((req, res) => {
      if (req.url === '/.well-known/openid-configuration') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            issuer,
            authorization_endpoint: `${issuer}/auth`,
            token_endpoint: `${issuer}/token`,
            jwks_uri: `${issuer}/jwks`,
          }),
        );
        return;
      }
      exchanges += 1;
      held.push(() => res.writeHead(503).end());
    });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    const issuer = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`;
    const app = await testApp(config(issuer));
    const attempt = () =>
      token({ code: 'abc', code_verifier: pkce().verifier, redirect_uri: REDIRECT }, app);
    try {
      const first = Array.from({ length: 8 }, attempt);
      while (exchanges < 8) await new Promise((r) => setTimeout(r, 10));
      const more = await Promise.all(Array.from({ length: 4 }, attempt));
      for (const res of more) {
        expect(res.statusCode).toBe(503);
        expect(res.headers['retry-after']).toBeDefined();
        expect(res.json().error.code).toBe('SIGN_IN_BUSY');
      }
      expect(exchanges).toBe(8);
      for (const answer of held.splice(0)) answer();
      for (const res of await Promise.all(first)) {
        expect(res.json().error.code).toBe('OIDC_PROVIDER_UNAVAILABLE');
      }
      // Their places are free again: the next sign-in reaches the provider.
      const next = attempt();
      while (exchanges < 9) await new Promise((r) => setTimeout(r, 10));
      for (const answer of held.splice(0)) answer();
      expect((await next).json().error.code).toBe('OIDC_PROVIDER_UNAVAILABLE');
    } finally {
      await app.close();
      slow.closeAllConnections();
      await new Promise<void>((resolve) => slow.close(() => resolve()));
    }
  });

  it('answers 503 when the provider goes down between sign-in and the exchange', async () => {
    const brief = await startTestProvider([{ id: CLIENT, claims: {}, redirectUris: [REDIRECT] }], {
      accounts: ACCOUNTS,
    });
    const app = await testApp(config(brief.issuer));
    try {
      expect((await loginConfig(app)).statusCode).toBe(200);
      await brief.close();
      // The discovery document is cached: the page still learns where to sign in.
      expect((await loginConfig(app)).statusCode).toBe(200);
      const res = await token(
        { code: 'abc', code_verifier: pkce().verifier, redirect_uri: REDIRECT },
        app,
      );
      expect(res.statusCode).toBe(503);
      expect(res.json().error).toMatchObject({
        code: 'OIDC_PROVIDER_UNAVAILABLE',
        message: expect.stringContaining('token endpoint'),
      });
    } finally {
      await app.close();
    }
  });
});
