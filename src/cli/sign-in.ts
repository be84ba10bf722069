import { createHash, randomBytes } from 'node:crypto';
import { decodeJwt } from 'jose';
import { isSecureOrLoopback } from '../config/index.js';
import { EXIT } from './exit-codes.js';
import { CliExit } from './io.js';

/**
 * The checks and small decisions of `touchstone login` that need no network: issuer and endpoint
 * URLs, PKCE, the loopback callback, the device-flow answers and the ID token's claims. The flows
 * that talk to the provider are in sign-in-flows.ts.
 */

/** What the CLI needs from a provider's discovery document. */
export interface ProviderMetadata {
  issuer: string;
  tokenEndpoint: string;
  authorizationEndpoint?: string;
  deviceAuthorizationEndpoint?: string;
}

/** The identity a stored sign-in shows (never the token). */
export interface SignedInIdentity {
  idToken: string;
  subject: string;
  email?: string;
  /** From the token's `exp`. */
  expiresAt: Date;
}

/**
 * `value` when it is a short run of printable ASCII without spaces (a URL, a code), else
 * undefined: text from the provider or a callback reaches the terminal only in that form.
 */
export function printable(value: unknown, max = 2048): string | undefined {
  return typeof value === 'string' && value.length <= max && /^[\x21-\x7e]+$/.test(value)
    ? value
    : undefined;
}

/** `--issuer` as a URL, refused unless https (or http on loopback) without query or fragment. */
export function issuerUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new CliExit(EXIT.USAGE, '--issuer is not a URL: expected https://HOST[/PATH]');
  }
  if (!isSecureOrLoopback(url)) {
    throw new CliExit(EXIT.USAGE, '--issuer must be https (plain http only on a loopback host)');
  }
  if (url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    throw new CliExit(EXIT.USAGE, '--issuer must not carry credentials, a query or a fragment');
  }
  return raw;
}

/** Where the discovery document of `issuer` is (OpenID Connect Discovery 1.0 §4). */
export function discoveryUrl(issuer: string): string {
  return `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
}

/**
 * The parts of a discovery document the CLI uses. It must name exactly `issuer` (a document
 * naming another issuer would let one provider pass off another's tokens), and every endpoint
 * must be https (or http on loopback).
 */
export function providerMetadata(issuer: string, doc: unknown): ProviderMetadata {
  const where = `the discovery document of ${issuer}`;
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    throw new CliExit(EXIT.ERROR, `${where} is not a JSON object`);
  }
  const d = doc as Record<string, unknown>;
  if (d.issuer !== issuer) {
    const named =
      typeof d.issuer === 'string' ? (printable(d.issuer) ?? 'another issuer') : 'no issuer';
    throw new CliExit(
      EXIT.ERROR,
      `${where} names ${named}, not ${issuer}; a provider must name itself exactly as --issuer does`,
    );
  }
  const endpoint = (field: string): string | undefined => {
    const value = d[field];
    if (value === undefined) return undefined;
    let url: URL | undefined;
    try {
      url = typeof value === 'string' ? new URL(value) : undefined;
    } catch {
      url = undefined;
    }
    if (url === undefined || !isSecureOrLoopback(url)) {
      throw new CliExit(
        EXIT.ERROR,
        `${where}: ${field} is not an https URL (plain http only on a loopback host)`,
      );
    }
    return value as string;
  };
  const tokenEndpoint = endpoint('token_endpoint');
  if (tokenEndpoint === undefined) throw new CliExit(EXIT.ERROR, `${where} has no token_endpoint`);
  const authorizationEndpoint = endpoint('authorization_endpoint');
  const deviceAuthorizationEndpoint = endpoint('device_authorization_endpoint');
  return {
    issuer,
    tokenEndpoint,
    ...(authorizationEndpoint === undefined ? {} : { authorizationEndpoint }),
    ...(deviceAuthorizationEndpoint === undefined ? {} : { deviceAuthorizationEndpoint }),
  };
}

export type Flow = 'device' | 'browser';

/** The flow asked for, or the device flow when the provider offers it and the browser else. */
export function chooseFlow(asked: Flow | undefined, provider: ProviderMetadata): Flow {
  const flow = asked ?? (provider.deviceAuthorizationEndpoint === undefined ? 'browser' : 'device');
  if (flow === 'device' && provider.deviceAuthorizationEndpoint === undefined) {
    throw new CliExit(
      EXIT.USAGE,
      `${provider.issuer} offers no device flow (no device_authorization_endpoint); use --flow browser`,
    );
  }
  if (flow === 'browser' && provider.authorizationEndpoint === undefined) {
    throw new CliExit(
      EXIT.ERROR,
      `${provider.issuer} has no authorization_endpoint; use --flow device`,
    );
  }
  return flow;
}

/** `--scope` as a space-separated list; it must ask for `openid` (else no ID token comes back). */
export function scopeOf(raw: string): string {
  const scopes = raw.split(/\s+/).filter((s) => s !== '');
  if (!scopes.includes('openid')) {
    throw new CliExit(EXIT.USAGE, '--scope must include openid (the ID token is what is sent)');
  }
  return scopes.join(' ');
}

/** A random URL-safe string of `bytes` random bytes (verifier, state, nonce). */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}

/** The PKCE S256 challenge of a verifier (RFC 7636 §4.2). */
export function pkceChallenge(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

/** What one browser sign-in sends and expects back. */
export interface BrowserRequest {
  redirectUri: string;
  state: string;
  nonce: string;
  verifier: string;
}

export function authorizeUrl(
  provider: ProviderMetadata,
  clientId: string,
  scope: string,
  request: BrowserRequest,
): string {
  const url = new URL(provider.authorizationEndpoint as string);
  for (const [k, v] of Object.entries({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: request.redirectUri,
    scope,
    state: request.state,
    nonce: request.nonce,
    code_challenge: pkceChallenge(request.verifier),
    code_challenge_method: 'S256',
  })) {
    url.searchParams.set(k, v);
  }
  return url.toString();
}

/**
 * The authorization code of a loopback callback's query, or a refusal: a `state` other than this
 * login's (a callback this login did not ask for), an `iss` other than the issuer (RFC 9207), or
 * the provider's error.
 */
export function callbackCode(query: URLSearchParams, state: string, issuer: string): string {
  if (query.get('state') !== state) {
    throw new CliExit(
      EXIT.ERROR,
      'the sign-in callback carried another state than this login sent (a callback it did not ask for); run touchstone login again',
    );
  }
  const iss = query.get('iss');
  if (iss !== null && iss !== issuer) {
    throw new CliExit(
      EXIT.ERROR,
      `the sign-in callback names the issuer ${printable(iss) ?? '(unprintable)'}, not ${issuer}`,
    );
  }
  const error = query.get('error');
  if (error !== null) {
    throw new CliExit(EXIT.ERROR, `the provider refused the sign-in: ${providerError(error)}`);
  }
  const code = query.get('code');
  if (code === null || code === '') {
    throw new CliExit(EXIT.ERROR, 'the sign-in callback carried no authorization code');
  }
  return code;
}

/** A provider's `error` code, as safe to print: OAuth error codes are short ASCII words. */
export function providerError(code: unknown): string {
  return typeof code === 'string' && /^[\w.-]{1,64}$/.test(code) ? code : 'an unnamed error';
}

/** The next step of device-flow polling, from one answer of the token endpoint. */
export type DevicePoll =
  | { kind: 'token'; body: Record<string, unknown> }
  | { kind: 'wait'; intervalSeconds: number; slowedDown: boolean };

/** RFC 8628 §3.5: pending waits, `slow_down` adds 5 s; anything else ends the login. */
export function devicePollStep(
  status: number,
  body: Record<string, unknown>,
  intervalSeconds: number,
): DevicePoll {
  if (status === 200) return { kind: 'token', body };
  switch (body.error) {
    case 'authorization_pending':
      return { kind: 'wait', intervalSeconds, slowedDown: false };
    case 'slow_down':
      return { kind: 'wait', intervalSeconds: intervalSeconds + 5, slowedDown: true };
    case 'expired_token':
      throw new CliExit(
        EXIT.ERROR,
        'the code expired before it was approved; run touchstone login again',
      );
    case 'access_denied':
      throw new CliExit(EXIT.ERROR, 'the sign-in was denied at the provider');
    default:
      throw new CliExit(
        EXIT.ERROR,
        `the provider's token endpoint answered ${status}: ${providerError(body.error)}`,
      );
  }
}

/**
 * The ID token of a token endpoint's answer, checked as OpenID Connect Core §3.1.3.7 asks of a
 * token received straight from the token endpoint over TLS: issuer, audience (`azp` when there
 * are several), expiry and, for the browser flow, the nonce. Its signature is checked by the
 * server on every request. The answer's other tokens (access, refresh) are not kept.
 */
export function idTokenOf(
  body: Record<string, unknown>,
  expected: { issuer: string; clientId: string; nonce?: string; now: Date },
): SignedInIdentity {
  const token = body.id_token;
  if (typeof token !== 'string' || token === '') {
    throw new CliExit(
      EXIT.ERROR,
      'the provider answered without an ID token; check that the client may use the openid scope',
    );
  }
  let claims: Record<string, unknown>;
  try {
    claims = decodeJwt(token);
  } catch {
    throw new CliExit(EXIT.ERROR, 'the provider answered with an ID token that is not a JWT');
  }
  const refuse = (why: string) =>
    new CliExit(EXIT.ERROR, `the provider's ID token is refused: ${why}`);
  if (claims.iss !== expected.issuer) throw refuse(`it is not issued by ${expected.issuer}`);
  const audiences = typeof claims.aud === 'string' ? [claims.aud] : (claims.aud ?? []);
  if (!Array.isArray(audiences) || !audiences.includes(expected.clientId)) {
    throw refuse(`its audience is not the client ${expected.clientId}`);
  }
  if (audiences.length > 1 && claims.azp !== undefined && claims.azp !== expected.clientId) {
    throw refuse(`it was issued to another client (azp)`);
  }
  if (expected.nonce !== undefined && claims.nonce !== expected.nonce) {
    throw refuse('its nonce is not the one this login sent');
  }
  if (typeof claims.sub !== 'string' || claims.sub === '') throw refuse('it has no subject');
  if (typeof claims.exp !== 'number') throw refuse('it has no expiry (exp)');
  const expiresAt = new Date(claims.exp * 1000);
  if (expiresAt <= expected.now) throw refuse('it has already expired (check the clock)');
  return {
    idToken: token,
    subject: claims.sub,
    ...(typeof claims.email === 'string' ? { email: claims.email } : {}),
    expiresAt,
  };
}
