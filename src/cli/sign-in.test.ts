import { UnsecuredJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { credentialsPath } from './credentials-file.js';
import {
  authorizeUrl,
  callbackCode,
  chooseFlow,
  devicePollStep,
  discoveryUrl,
  idTokenOf,
  issuerUrl,
  pkceChallenge,
  providerMetadata,
  scopeOf,
} from './sign-in.js';

const ISSUER = 'https://login.example.com';

/** `fn` throws a CliExit whose message has `message` in it, with this exit code. */
function refuses(fn: () => unknown, message: string | RegExp, code = 1): void {
  expect(fn).toThrow(message);
  expect(fn).toThrow(expect.objectContaining({ code }));
}

describe('issuer and discovery', () => {
  it('accepts https issuers and plain http on loopback only', () => {
    expect(issuerUrl(ISSUER)).toBe(ISSUER);
    expect(issuerUrl('http://127.0.0.1:8080')).toBe('http://127.0.0.1:8080');
    expect(issuerUrl('http://[::1]:8080/realms/dev')).toBe('http://[::1]:8080/realms/dev');
    refuses(
      () => issuerUrl('http://login.example.com'),
      '--issuer must be https (plain http only on a loopback host)',
      2,
    );
    refuses(() => issuerUrl('not a url'), /--issuer is not a URL/, 2);
    refuses(() => issuerUrl('https://u:p@login.example.com'), /credentials/, 2);
  });

  it('reads discovery under the issuer, with or without its trailing slash', () => {
    expect(discoveryUrl(ISSUER)).toBe(`${ISSUER}/.well-known/openid-configuration`);
    expect(discoveryUrl('https://tenant.auth0.com/')).toBe(
      'https://tenant.auth0.com/.well-known/openid-configuration',
    );
  });

  it('refuses a document naming another issuer, or endpoints that are not https', () => {
    const doc = { issuer: ISSUER, token_endpoint: `${ISSUER}/token` };
    expect(providerMetadata(ISSUER, doc)).toEqual({
      issuer: ISSUER,
      tokenEndpoint: `${ISSUER}/token`,
    });
    refuses(
      () => providerMetadata(ISSUER, { ...doc, issuer: 'https://evil.example' }),
      `names https://evil.example, not ${ISSUER}`,
    );
    refuses(() => providerMetadata(`${ISSUER}/`, doc), `names ${ISSUER}, not ${ISSUER}/`);
    refuses(
      () => providerMetadata(ISSUER, { ...doc, issuer: 'https://x\u001b[2J' }),
      `names another issuer, not ${ISSUER}`,
    );
    refuses(
      () => providerMetadata(ISSUER, { ...doc, token_endpoint: 'http://login.example.com/t' }),
      'token_endpoint is not an https URL',
    );
    refuses(() => providerMetadata(ISSUER, { issuer: ISSUER }), 'no token_endpoint');
  });

  it('prefers the device flow when the provider offers it', () => {
    const both = providerMetadata(ISSUER, {
      issuer: ISSUER,
      token_endpoint: `${ISSUER}/token`,
      authorization_endpoint: `${ISSUER}/auth`,
      device_authorization_endpoint: `${ISSUER}/device`,
    });
    expect(chooseFlow(undefined, both)).toBe('device');
    expect(chooseFlow('browser', both)).toBe('browser');
    const browserOnly = { ...both, deviceAuthorizationEndpoint: undefined };
    delete browserOnly.deviceAuthorizationEndpoint;
    expect(chooseFlow(undefined, browserOnly)).toBe('browser');
    refuses(() => chooseFlow('device', browserOnly), 'use --flow browser', 2);
  });

  it('asks for openid', () => {
    expect(scopeOf(' openid  email ')).toBe('openid email');
    refuses(() => scopeOf('email profile'), '--scope must include openid', 2);
  });
});

describe('browser flow', () => {
  it('computes the PKCE S256 challenge of RFC 7636 appendix B', () => {
    expect(pkceChallenge('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk')).toBe(
      'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    );
  });

  it('sends state, nonce and the challenge, never the verifier', () => {
    const url = new URL(
      authorizeUrl(
        {
          issuer: ISSUER,
          tokenEndpoint: `${ISSUER}/token`,
          authorizationEndpoint: `${ISSUER}/auth?tenant=a`,
        },
        'cli',
        'openid email',
        {
          redirectUri: 'http://127.0.0.1:5000/callback',
          state: 's1',
          nonce: 'n1',
          verifier: 'v'.repeat(43),
        },
      ),
    );
    expect(Object.fromEntries(url.searchParams)).toEqual({
      tenant: 'a',
      response_type: 'code',
      client_id: 'cli',
      redirect_uri: 'http://127.0.0.1:5000/callback',
      scope: 'openid email',
      state: 's1',
      nonce: 'n1',
      code_challenge: pkceChallenge('v'.repeat(43)),
      code_challenge_method: 'S256',
    });
  });

  it('takes the code of a callback with this login state only', () => {
    const q = (o: Record<string, string>) => new URLSearchParams(o);
    expect(callbackCode(q({ code: 'c1', state: 's1' }), 's1', ISSUER)).toBe('c1');
    expect(callbackCode(q({ code: 'c1', state: 's1', iss: ISSUER }), 's1', ISSUER)).toBe('c1');
    const callback = (o: Record<string, string>) => () => callbackCode(q(o), 's1', ISSUER);
    refuses(callback({ code: 'c1', state: 's2' }), 'another state than this login sent');
    refuses(callback({ code: 'c1' }), 'another state than this login sent');
    refuses(callback({ code: 'c1', state: 's1', iss: 'https://x' }), 'names the issuer https://x');
    refuses(callback({ state: 's1' }), 'no authorization code');
    refuses(
      callback({ error: 'access_denied', state: 's1' }),
      'the provider refused the sign-in: access_denied',
    );
    // A provider's error is printed only when it looks like an OAuth error code.
    refuses(
      callback({ error: '\u001b[2Jhi there', state: 's1' }),
      'the provider refused the sign-in: an unnamed error',
    );
  });
});

describe('device flow polling', () => {
  it('waits while pending, slows down by 5 s when asked, and stops on expiry or denial', () => {
    expect(devicePollStep(400, { error: 'authorization_pending' }, 5)).toEqual({
      kind: 'wait',
      intervalSeconds: 5,
      slowedDown: false,
    });
    expect(devicePollStep(400, { error: 'slow_down' }, 5)).toEqual({
      kind: 'wait',
      intervalSeconds: 10,
      slowedDown: true,
    });
    expect(devicePollStep(200, { id_token: 'x' }, 5)).toEqual({
      kind: 'token',
      body: { id_token: 'x' },
    });
    refuses(
      () => devicePollStep(400, { error: 'expired_token' }, 5),
      'expired before it was approved; run touchstone login again',
    );
    refuses(() => devicePollStep(400, { error: 'access_denied' }, 5), 'denied at the provider');
    refuses(
      () => devicePollStep(401, { error: 'invalid_client' }, 5),
      "the provider's token endpoint answered 401: invalid_client",
    );
  });
});

describe('the ID token', () => {
  const now = new Date('2030-01-01T00:00:00Z');
  const exp = Math.floor(now.getTime() / 1000) + 3600;
  const token = (claims: Record<string, unknown>) =>
    new UnsecuredJWT({ iss: ISSUER, aud: 'cli', sub: 'ana', exp, ...claims }).encode();
  const expected = { issuer: ISSUER, clientId: 'cli', nonce: 'n1', now };
  const refused = (claims: Record<string, unknown>, message: string) =>
    refuses(() => idTokenOf({ id_token: token(claims) }, expected), message);

  it('keeps the token, subject, email and expiry', () => {
    const t = token({ nonce: 'n1', email: 'ana@example.com' });
    expect(idTokenOf({ id_token: t, refresh_token: 'r' }, expected)).toEqual({
      idToken: t,
      subject: 'ana',
      email: 'ana@example.com',
      expiresAt: new Date(exp * 1000),
    });
  });

  it('refuses another issuer, audience, nonce, or an expired token', () => {
    refused({ nonce: 'n1', iss: 'https://x' }, `it is not issued by ${ISSUER}`);
    refused({ nonce: 'n1', aud: 'other' }, 'its audience is not the client cli');
    refused({ nonce: 'n1', aud: ['other', 'cli'], azp: 'other' }, 'issued to another client');
    refused({ nonce: 'n2' }, 'its nonce is not the one this login sent');
    refused({}, 'its nonce is not the one this login sent');
    refused({ nonce: 'n1', exp: exp - 7200 }, 'it has already expired');
    refused({ nonce: 'n1', sub: undefined }, 'it has no subject');
    refuses(() => idTokenOf({ access_token: 'a' }, expected), 'without an ID token');
  });

  it('never shows the token in a refusal', () => {
    const t = token({ nonce: 'bad' });
    let message = '';
    try {
      idTokenOf({ id_token: t }, expected);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/nonce/);
    expect(message).not.toContain(t);
  });
});

describe('credentials file location', () => {
  it('follows TOUCHSTONE_CONFIG_DIR, then XDG_CONFIG_HOME, then APPDATA on Windows, then ~/.config', () => {
    expect(credentialsPath({ TOUCHSTONE_CONFIG_DIR: '/c', XDG_CONFIG_HOME: '/x' }, 'linux')).toBe(
      '/c/credentials.json',
    );
    expect(credentialsPath({ XDG_CONFIG_HOME: '/x', HOME: '/h' }, 'linux')).toBe(
      '/x/touchstone/credentials.json',
    );
    expect(credentialsPath({ XDG_CONFIG_HOME: '', HOME: '/h' }, 'linux')).toBe(
      '/h/.config/touchstone/credentials.json',
    );
    expect(credentialsPath({ APPDATA: '/a', HOME: '/h' }, 'win32')).toMatch(
      /^[/\\]a[/\\]touchstone[/\\]credentials\.json$/,
    );
  });
});
