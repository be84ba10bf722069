import { decodeJwt } from 'jose';
import { z } from 'zod';
import { describeDetails, issuesToDetails } from '../core/index.js';
import type { HttpClient } from '../net/index.js';
import { AuthErrors } from './error-codes.js';
import { describe, type OidcVerifier, unavailable } from './oidc.js';
import type { Principal } from './principal.js';

/**
 * The web UI's sign-in at an identity provider (authorization code with PKCE, run by the page):
 * the server tells the page where to send the person (`/ui/login/config`) and exchanges the code
 * the provider sends back for an ID token (`/ui/login/token`). The UI is a public client: no
 * secret is held, the PKCE verifier proves the code is the page's own. Only the ID token is
 * handed back; access and refresh tokens are dropped, so a tab signs in again when it expires.
 */

/** Largest token-endpoint answer read (tokens are a few KiB). */
const MAX_TOKEN_RESPONSE_BYTES = 64 * 1024;
/** Longest authorization code accepted (providers issue tens to hundreds of characters). */
const MAX_CODE_LENGTH = 2048;
/**
 * Exchanges with the provider in flight at once; past it a sign-in is refused at once (a person
 * signs in once a day; a flood of token requests must not become a flood at the provider).
 */
const MAX_EXCHANGES = 8;
const MAX_REDIRECT_URI_LENGTH = 2048;
/** RFC 7636 §4.1: 43–128 characters of the unreserved set. */
const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
/** RFC 6749 §A.11: a code is visible ASCII. */
const CODE = /^[\x21-\x7e]+$/;
/** The provider's error code, shown only when it has the shape RFC 6749 gives error codes. */
const PROVIDER_ERROR = /^[A-Za-z0-9_.-]{1,64}$/;

export interface BrowserSignInDeps {
  /** `ui.sign_in.issuer`: one of the verifier's issuers. */
  issuer: string;
  /** `ui.sign_in.client_id`: the UI's own client at the provider (one of the issuer's audiences). */
  clientId: string;
  scopes: readonly string[];
  verifier: OidcVerifier;
  /** The providers' outbound client (`auth.allow_hosts`). */
  http: HttpClient;
  /** `auth.oidc_timeout`: deadline of the token request. */
  timeoutMs: number;
}

/** What the page needs to send a person to the provider. */
export interface SignInConfig {
  issuer: string;
  clientId: string;
  scopes: readonly string[];
  authorizationEndpoint: string;
}

/** A code exchange's request, as `parseTokenRequest` checked it. */
export interface TokenRequest {
  code: string;
  codeVerifier: string;
  redirectUri: string;
}

export interface SignedIn {
  idToken: string;
  /** The ID token's `exp`. */
  expiresAt: Date;
  /** Who the token acts as (verified and mapped like any bearer). */
  principal: Principal;
}

/** Every field a string, or a message saying it is missing (never what was sent instead). */
const required = (name: string) =>
  z.string({ error: `${name} is missing or not a string` }).min(1, `${name} is missing`);

/**
 * A `POST /ui/login/token` body. Messages name the field, never its value (a code or verifier
 * is a credential in the making).
 */
export const TokenRequestSchema = z.strictObject({
  /** The authorization code the provider sent back to the page. */
  code: required('code')
    .max(MAX_CODE_LENGTH, `must be at most ${MAX_CODE_LENGTH} characters`)
    .regex(CODE, 'must be visible ASCII characters'),
  /** The PKCE verifier whose S256 challenge the page sent with the authorization request. */
  code_verifier: required('code_verifier (the PKCE verifier)').regex(
    VERIFIER,
    'must be 43–128 characters of A-Z a-z 0-9 - . _ ~ (RFC 7636)',
  ),
  /** The redirect URI of the authorization request: the web UI's own (`<origin>/ui/`). */
  redirect_uri: required('redirect_uri').refine(
    isUiRedirect,
    'must be an http(s) URL of the web UI: a path under /ui/, no credentials or fragment',
  ),
});

/** Checks a token request before anything is sent to the provider. */
export function parseTokenRequest(body: unknown): TokenRequest {
  const result = TokenRequestSchema.safeParse(body ?? {});
  if (!result.success) {
    const details = issuesToDetails(result.error.issues);
    throw AuthErrors.SIGN_IN_REQUEST_INVALID(`sign-in refused: ${describeDetails(details)}`, {
      details,
    });
  }
  const { code, code_verifier: codeVerifier, redirect_uri: redirectUri } = result.data;
  return { code, codeVerifier, redirectUri };
}

function isUiRedirect(raw: string): boolean {
  if (raw.length > MAX_REDIRECT_URI_LENGTH || !URL.canParse(raw)) return false;
  // The parser resolves `..` and `%2e%2e`, so the path checked is the one a browser would open.
  const url = new URL(raw);
  return (
    (url.protocol === 'https:' || url.protocol === 'http:') &&
    url.username === '' &&
    url.password === '' &&
    !raw.includes('#') &&
    url.pathname.startsWith('/ui/')
  );
}

export class BrowserSignIn {
  private exchanging = 0;

  constructor(private readonly deps: BrowserSignInDeps) {}

  /** The provider's authorization endpoint (from its discovery document, cached) and the client. */
  async config(): Promise<SignInConfig> {
    const { issuer, clientId, scopes, verifier } = this.deps;
    const meta = await verifier.metadata(issuer);
    if (meta.authorizationEndpoint === undefined) {
      throw unavailable(
        "the discovery document names no authorization_endpoint of the issuer's scheme",
      );
    }
    return { issuer, clientId, scopes, authorizationEndpoint: meta.authorizationEndpoint };
  }

  /**
   * Exchanges the code at the provider's token endpoint (no client secret: the verifier is the
   * proof), then verifies the ID token as any bearer is verified, so a person the mappings do
   * not admit is refused here rather than on the first page. At most MAX_EXCHANGES at once: past
   * it, SIGN_IN_BUSY without asking the provider.
   */
  async exchange(request: TokenRequest): Promise<SignedIn> {
    if (this.exchanging >= MAX_EXCHANGES) {
      throw AuthErrors.SIGN_IN_BUSY(
        `sign-in refused for now: ${MAX_EXCHANGES} sign-ins are being exchanged with the identity provider already; retry after Retry-After`,
      );
    }
    this.exchanging += 1;
    try {
      return await this.exchangeNow(request);
    } finally {
      this.exchanging -= 1;
    }
  }

  private async exchangeNow(request: TokenRequest): Promise<SignedIn> {
    const { issuer, clientId, verifier } = this.deps;
    const meta = await verifier.metadata(issuer);
    if (meta.tokenEndpoint === undefined) {
      throw unavailable("the discovery document names no token_endpoint of the issuer's scheme");
    }
    const idToken = await this.redeem(meta.tokenEndpoint, request);
    const principal = await verifier.authenticate(idToken);
    const claims = decodeJwt(idToken);
    const audiences = typeof claims.aud === 'string' ? [claims.aud] : (claims.aud ?? []);
    if (claims.iss !== issuer || !audiences.includes(clientId)) {
      throw AuthErrors.OIDC_TOKEN_REFUSED(
        'token refused: the ID token is not for the issuer and client of ui.sign_in',
      );
    }
    return { idToken, expiresAt: new Date((claims.exp as number) * 1000), principal };
  }

  private async redeem(tokenEndpoint: string, request: TokenRequest): Promise<string> {
    let res: Awaited<ReturnType<HttpClient['request']>>;
    try {
      res = await this.deps.http.request({
        method: 'POST',
        url: tokenEndpoint,
        headers: {
          accept: 'application/json',
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code: request.code,
          redirect_uri: request.redirectUri,
          client_id: this.deps.clientId,
          code_verifier: request.codeVerifier,
        }).toString(),
        timeoutMs: this.deps.timeoutMs,
        maxResponseBytes: MAX_TOKEN_RESPONSE_BYTES,
      });
    } catch (err) {
      throw unavailable(`the token endpoint: ${describe(err)}`, err);
    }
    const body = jsonObject(res.body);
    if (res.status === 200) {
      if (typeof body?.id_token === 'string') return body.id_token;
      throw unavailable('the token endpoint answered without an id_token (is openid a scope?)');
    }
    if ((res.status === 400 || res.status === 401) && typeof body?.error === 'string') {
      throw refused(body.error);
    }
    throw unavailable(`the token endpoint answered HTTP ${res.status}`);
  }
}

function jsonObject(raw: Buffer): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(raw.toString('utf8'));
    return typeof value === 'object' && value !== null
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** The provider's refusal, naming its error code (never its free-text description). */
function refused(error: string) {
  const code = PROVIDER_ERROR.test(error) ? error : 'an unnamed error';
  const hint =
    code === 'invalid_grant'
      ? ': the code was already used or has expired, or the code verifier or redirect URI does not match the sign-in it came from'
      : '';
  return AuthErrors.SIGN_IN_CODE_REFUSED(
    `the identity provider refused the authorization code (${code})${hint}; sign in again`,
  );
}
