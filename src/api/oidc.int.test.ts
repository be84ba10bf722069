import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateKeyPair, SignJWT, UnsecuredJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import {
  API_AUDIENCE,
  startTestProvider,
  type TestProvider,
} from '../../test/support/oidc-provider.js';
import { agentTrace, jsonBody, recordSpans } from '../../test/support/otel.js';
import { OidcVerifier, REFETCH_INTERVAL_MS } from '../auth/index.js';
import { loadConfig } from '../config/index.js';
import { createHttpClient, createOutboundGuard } from '../net/index.js';

/** Identity-provider tokens on the REST, OTLP and Connect doors, against a real provider. */

const CLIENTS = [
  { id: 'alice', claims: { email: 'alice@example.com', groups: ['team-agents', 'staff'] } },
  { id: 'bob', claims: { groups: ['staff'] } },
  { id: 'carol', claims: { groups: ['contractors'] } },
  { id: 'sam', claims: { groups: ['support'] } },
  // A workflow identity as GitHub Actions issues it: repository and ref claims.
  {
    id: 'ci',
    claims: { repository: 'acme/agent', ref: 'refs/heads/main', repository_owner: 'acme' },
  },
];

function oidcConfig(issuer: string, extra: Record<string, unknown> = {}) {
  return {
    auth: {
      allow_hosts: ['127.0.0.1'],
      oidc: [
        {
          issuer,
          audiences: [API_AUDIENCE],
          mappings: [
            {
              claims: { repository: 'acme/agent', ref: 'refs/heads/main' },
              project: 'agents',
              roles: ['ingest'],
            },
            { groups: ['team-agents'], project: 'agents', roles: ['editor'] },
            {
              groups: ['support'],
              project: 'agents',
              roles: ['viewer'],
              scope: { services: ['chat'] },
            },
            { groups: ['staff'], project: 'agents', roles: ['viewer'] },
          ],
        },
      ],
      ...extra,
    },
  };
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Claims every forged token of `idp` needs to pass the issuer, audience and expiry checks. */
function claimsOf(idp: TestProvider) {
  return { iss: idp.issuer, aud: API_AUDIENCE, exp: Math.floor(Date.now() / 1000) + 300 };
}

/** A verifier on its own clock (the app's is the real one), under the same outbound rules. */
function testVerifier(issuer: string, clock: { now(): number }) {
  const http = createHttpClient({
    ...createOutboundGuard({ allowHosts: ['127.0.0.1'], requireHttps: true, setting: 'test' }),
  });
  const oidc = new OidcVerifier({
    issuers: [
      {
        issuer,
        audiences: [API_AUDIENCE],
        groupsClaim: 'groups',
        mappings: [{ claims: {}, groups: ['staff'], project: 'agents', roles: ['viewer'] }],
      },
    ],
    http,
    clock,
    timeoutMs: 5_000,
  });
  return { oidc, close: () => http.close() };
}

describe('OIDC bearer tokens from a real provider', () => {
  let idp: TestProvider;
  let other: TestProvider;
  let t: TestApp;
  const now = () => Math.floor(Date.now() / 1000);

  beforeAll(async () => {
    idp = await startTestProvider(CLIENTS);
    other = await startTestProvider(CLIENTS);
    t = await testApp(oidcConfig(idp.issuer));
  });
  afterAll(async () => {
    await t.close();
    await idp.close();
    await other.close();
  });

  const whoami = (token: string) =>
    t.app.server.inject({ method: 'GET', url: '/v1alpha1/whoami', headers: bearer(token) });

  it('maps users and groups to project and roles; the first matching mapping wins', async () => {
    const alice = await whoami(await idp.token('alice'));
    expect(alice.statusCode).toBe(200);
    expect(alice.json()).toMatchObject({
      kind: 'oidc',
      subject: 'alice',
      email: 'alice@example.com',
      groups: ['team-agents', 'staff'],
      project: 'agents',
      roles: ['editor'],
    });
    const bob = await whoami(await idp.token('bob'));
    expect(bob.json()).toMatchObject({ kind: 'oidc', project: 'agents', roles: ['viewer'] });
    const carol = await whoami(await idp.token('carol'));
    expect(carol.statusCode).toBe(403);
    expect(carol.json().error.code).toBe('OIDC_NO_MAPPING');
  });

  it('roles decide what a token may do on REST', async () => {
    const policy = {
      apiVersion: 'touchstone.dev/v1alpha1',
      kind: 'OnlineEvalPolicy',
      metadata: { name: 'p' },
      spec: { stages: [{ evaluators: [{ ref: 'tool-errors' }] }] },
    };
    const apply = (token: string) =>
      t.app.server.inject({
        method: 'POST',
        url: '/v1alpha1/policies',
        payload: policy,
        headers: bearer(token),
      });
    expect((await apply(await idp.token('alice'))).statusCode).toBe(200);
    const bob = await apply(await idp.token('bob'));
    expect(bob.statusCode).toBe(403);
    expect(bob.json().error.code).toBe('PERMISSION_DENIED');
    const elsewhere = await t.app.server.inject({
      method: 'GET',
      url: '/v1alpha1/policies?project=other',
      headers: bearer(await idp.token('alice')),
    });
    expect(elsewhere.statusCode).toBe(403);
  });

  it('a GitHub Actions-style workflow token ingests over OTLP into its mapped project', async () => {
    let traceId = '';
    const spans = recordSpans({ 'service.name': 'agent' }, (tracer) => {
      traceId = agentTrace(tracer, { fail: false });
    });
    const token = await idp.token('ci');
    const sent = await t.app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: jsonBody(spans),
      headers: { 'content-type': 'application/json', ...bearer(token) },
    });
    expect(sent.statusCode).toBe(200);
    // A whole trace: stored complete, in the mapped project.
    expect((await t.app.store.traces.get('agents', traceId))?.trace.service).toBe('agent');
    // The ingest role reads nothing.
    expect(
      (
        await t.app.server.inject({
          method: 'GET',
          url: '/v1alpha1/traces',
          headers: bearer(token),
        })
      ).statusCode,
    ).toBe(403);
  });

  it("a mapping's scope narrows what its tokens read, as an API key's does", async () => {
    const ids: string[] = [];
    for (const service of ['chat', 'agent']) {
      const spans = recordSpans({ 'service.name': service }, (tracer) => {
        ids.push(agentTrace(tracer, { fail: false }));
      });
      const sent = await t.app.server.inject({
        method: 'POST',
        url: '/v1/traces',
        payload: jsonBody(spans),
        headers: { 'content-type': 'application/json', ...bearer(await idp.token('ci')) },
      });
      expect(sent.statusCode).toBe(200);
    }
    for (let i = 0; i < 100; i++) {
      const stored = await Promise.all(ids.map((id) => t.app.store.traces.get('agents', id)));
      if (stored.every((x) => x !== undefined)) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
      await t.app.completer.tick();
    }
    const listed = async (client: string) => {
      const res = await t.app.server.inject({
        method: 'GET',
        url: '/v1alpha1/traces?page_size=1000',
        headers: bearer(await idp.token(client)),
      });
      expect(res.statusCode).toBe(200);
      return (res.json().traces as { traceId: string; service: string }[]).filter((x) =>
        ids.includes(x.traceId),
      );
    };
    expect((await listed('sam')).map((x) => x.service)).toEqual(['chat']);
    expect((await listed('bob')).map((x) => x.service).sort()).toEqual(['agent', 'chat']);
    const hidden = await t.app.server.inject({
      method: 'GET',
      url: `/v1alpha1/traces/${ids[1]}`,
      headers: bearer(await idp.token('sam')),
    });
    expect(hidden.statusCode).toBe(404);
  });

  it('the Connect RPC door takes the same tokens', async () => {
    const call = (token?: string) =>
      t.app.server.inject({
        method: 'POST',
        url: '/touchstone.v1alpha1.RunService/DeleteRun',
        payload: { id: 'run_missing', project: 'agents' },
        headers: {
          'content-type': 'application/json',
          ...(token === undefined ? {} : bearer(token)),
        },
      });
    expect((await call()).statusCode).toBe(401);
    const viewer = await call(await idp.token('bob'));
    expect(viewer.statusCode).toBe(403);
    expect(viewer.json().code).toBe('permission_denied');
  });

  describe('refuses, with a clear error', () => {
    const refused = async (token: string, status: number, code: string, message: RegExp) => {
      const res = await whoami(token);
      expect(res.statusCode).toBe(status);
      const body = res.json();
      expect(body.error.code).toBe(code);
      expect(body.error.message).toMatch(message);
      expect(body.error.message).not.toContain(token);
      return res;
    };

    it('a token for another audience', async () => {
      await refused(
        await idp.token('alice', 'https://elsewhere.test/api'),
        401,
        'OIDC_TOKEN_REFUSED',
        /audience/,
      );
    });

    it('a token of an issuer that is not configured', async () => {
      await refused(await other.token('alice'), 401, 'OIDC_TOKEN_REFUSED', /issuer is not one of/);
    });

    it('a token naming the issuer but signed by another key with an unknown kid', async () => {
      const { privateKey } = await generateKeyPair('RS256');
      const forged = await new SignJWT({ sub: 'alice', groups: ['team-agents'] })
        .setProtectedHeader({ alg: 'RS256', kid: 'not-a-known-kid' })
        .setIssuer(idp.issuer)
        .setAudience(API_AUDIENCE)
        .setExpirationTime('5m')
        .sign(privateKey);
      await refused(forged, 401, 'OIDC_TOKEN_REFUSED', /no key of the issuer matches/);
    });

    it('the issuer key id on a token signed by another key', async () => {
      const { privateKey } = await generateKeyPair('RS256');
      const forged = await new SignJWT({ sub: 'alice', groups: ['team-agents'] })
        .setProtectedHeader({ alg: 'RS256', kid: idp.publicJwk.kid as string })
        .setIssuer(idp.issuer)
        .setAudience(API_AUDIENCE)
        .setExpirationTime('5m')
        .sign(privateKey);
      await refused(forged, 401, 'OIDC_TOKEN_REFUSED', /signature does not verify/);
    });

    it('alg none', async () => {
      const unsigned = new UnsecuredJWT({ sub: 'alice', groups: ['team-agents'] })
        .setIssuer(idp.issuer)
        .setAudience(API_AUDIENCE)
        .setExpirationTime('5m')
        .encode();
      await refused(unsigned, 401, 'OIDC_TOKEN_REFUSED', /algorithm is not accepted/);
    });

    it('HS256 signed with the public key as the secret', async () => {
      const forged = await new SignJWT({ sub: 'alice', groups: ['team-agents'] })
        .setProtectedHeader({ alg: 'HS256', kid: idp.publicJwk.kid as string })
        .setIssuer(idp.issuer)
        .setAudience(API_AUDIENCE)
        .setExpirationTime('5m')
        .sign(new TextEncoder().encode(idp.publicPem));
      await refused(forged, 401, 'OIDC_TOKEN_REFUSED', /algorithm is not accepted/);
    });

    it('an expired token, and one not valid yet, beyond the clock skew', async () => {
      const claims = { sub: 'alice', groups: ['team-agents'], iss: idp.issuer, aud: API_AUDIENCE };
      await refused(
        await idp.sign({ ...claims, iat: now() - 3600, exp: now() - 120 }),
        401,
        'OIDC_TOKEN_REFUSED',
        /expired/,
      );
      await refused(
        await idp.sign({ ...claims, iat: now(), nbf: now() + 600, exp: now() + 1200 }),
        401,
        'OIDC_TOKEN_REFUSED',
        /not valid yet/,
      );
      // Within the skew both are accepted.
      const fresh = await whoami(
        await idp.sign({ ...claims, iat: now(), nbf: now() + 20, exp: now() + 600 }),
      );
      expect(fresh.statusCode).toBe(200);
    });

    it('a 1 MB bearer before any parsing, and a bearer that is no JWT', async () => {
      await refused(`${'a'.repeat(1 << 20)}`, 401, 'OIDC_TOKEN_REFUSED', /longer than 8192 bytes/);
      await refused('not-a-token', 401, 'UNAUTHENTICATED', /neither an API key nor a signed JWT/);
      await refused('a.b.c', 401, 'OIDC_TOKEN_REFUSED', /not a well-formed JWT/);
    });
  });

  it('the token of the real provider expires: refused once past exp and the skew', async () => {
    const token = await idp.token('alice');
    const later = testVerifier(idp.issuer, { now: () => Date.now() + 600_000 + 61_000 });
    await expect(later.oidc.authenticate(token)).rejects.toMatchObject({
      code: 'OIDC_TOKEN_REFUSED',
      message: expect.stringMatching(/expired/),
    });
    await later.close();
  });
});

describe('OIDC providers that misbehave', () => {
  it('a provider whose metadata names another issuer is refused', async () => {
    const idp = await startTestProvider(CLIENTS, { metadataIssuer: (i) => `${i}/elsewhere` });
    const t = await testApp(oidcConfig(idp.issuer));
    try {
      const token = await idp.sign({ ...claimsOf(idp), sub: 'alice', groups: ['staff'] });
      const res = await t.app.server.inject({
        method: 'GET',
        url: '/v1alpha1/whoami',
        headers: bearer(token),
      });
      expect(res.statusCode).toBe(503);
      expect(res.json().error.code).toBe('OIDC_PROVIDER_UNAVAILABLE');
      expect(res.json().error.message).toMatch(/names another issuer/);
    } finally {
      await t.close();
      await idp.close();
    }
  });

  it('a loopback issuer not in auth.allow_hosts is refused by the outbound rules', async () => {
    const idp = await startTestProvider(CLIENTS);
    const t = await testApp(oidcConfig(idp.issuer, { allow_hosts: [] }));
    try {
      const res = await t.app.server.inject({
        method: 'GET',
        url: '/v1alpha1/whoami',
        headers: bearer(await idp.token('alice')),
      });
      expect(res.statusCode).toBe(503);
      expect(res.json().error.message).toMatch(/auth\.allow_hosts/);
    } finally {
      await t.close();
      await idp.close();
    }
  });

  it('a plain-http issuer off loopback is refused at config load', () => {
    expect(() => loadConfig({ env: {}, overrides: oidcConfig('http://idp.example.com') })).toThrow(
      /auth\.oidc\[0\]\.issuer: an issuer must be https/,
    );
    expect(() =>
      loadConfig({ env: {}, overrides: oidcConfig('https://idp.example.com') }),
    ).not.toThrow();
  });

  it('JWKS down: cached keys keep working, a new kid fails as retryable, the server stays up', async () => {
    const idp = await startTestProvider(CLIENTS);
    const t = await testApp(oidcConfig(idp.issuer));
    let at = Date.now();
    const verifier = testVerifier(idp.issuer, { now: () => at });
    try {
      const token = await idp.token('alice');
      const ask = (tok: string) =>
        t.app.server.inject({ method: 'GET', url: '/v1alpha1/whoami', headers: bearer(tok) });
      expect((await ask(token)).statusCode).toBe(200);
      await verifier.oidc.authenticate(token);
      const rotated = await idp.sign(
        { ...claimsOf(idp), sub: 'alice', groups: ['staff'] },
        { kid: 'rotated-kid' },
      );
      await idp.close();
      expect((await ask(token)).statusCode).toBe(200);
      at += REFETCH_INTERVAL_MS + 1;
      await expect(verifier.oidc.authenticate(rotated)).rejects.toMatchObject({
        code: 'OIDC_PROVIDER_UNAVAILABLE',
        retryable: true,
      });
      // Within the rate limit no fetch is tried, and the answer stays retryable.
      await expect(verifier.oidc.authenticate(rotated)).rejects.toMatchObject({
        code: 'OIDC_PROVIDER_UNAVAILABLE',
      });
      expect((await verifier.oidc.authenticate(token)).subject).toBe('alice');
      const res = await ask(rotated);
      expect(res.statusCode).toBe(401);
      expect((await t.app.server.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await verifier.close();
      await t.close();
    }
  });

  it('a provider that never answers is bounded by auth.oidc_timeout', async () => {
    const silent: Server = createServer(() => {
      // never answers
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const issuer = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    const t = await testApp(oidcConfig(issuer, { oidc_timeout: '300ms' }));
    try {
      const { privateKey } = await generateKeyPair('RS256');
      const token = await new SignJWT({ sub: 'x' })
        .setProtectedHeader({ alg: 'RS256', kid: 'k' })
        .setIssuer(issuer)
        .setAudience(API_AUDIENCE)
        .setExpirationTime('5m')
        .sign(privateKey);
      const started = Date.now();
      const res = await t.app.server.inject({
        method: 'GET',
        url: '/v1alpha1/whoami',
        headers: bearer(token),
      });
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(res.statusCode).toBe(503);
      expect(res.json().error.code).toBe('OIDC_PROVIDER_UNAVAILABLE');
    } finally {
      await t.close();
      silent.closeAllConnections();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
