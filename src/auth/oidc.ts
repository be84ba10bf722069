import {
  createLocalJWKSet,
  decodeJwt,
  errors,
  type JSONWebKeySet,
  type JWTPayload,
  jwtVerify,
} from 'jose';
import { type Clock, isTouchstoneError } from '../core/index.js';
import type { HttpClient } from '../net/index.js';
import { AuthErrors } from './error-codes.js';
import { mapClaims, type OidcIssuer } from './oidc-mapping.js';
import type { Principal } from './principal.js';

export type { OidcIssuer, OidcMapping } from './oidc-mapping.js';

/**
 * Bearer tokens signed by a configured identity provider (ID tokens, workflow tokens). Discovery
 * and the key set are fetched through the outbound client (the guard's rules apply), cached,
 * and fetched again when a token names a key the cache lacks, at most once per
 * `REFETCH_INTERVAL_MS` per issuer; while the provider is down, cached keys keep working.
 */

/** Longer bearer strings are refused before any decoding (real ID tokens are 1–3 KiB). */
export const MAX_TOKEN_BYTES = 8 * 1024;
/** Leeway on `exp` and `nbf` for clocks that disagree a little. */
export const CLOCK_SKEW_SECONDS = 60;
/** Least time between two fetches of one issuer's keys (an unknown `kid` cannot force more). */
export const REFETCH_INTERVAL_MS = 30_000;
/** Cached keys older than this are fetched again in the background (key rotation). */
export const KEYS_MAX_AGE_MS = 60 * 60_000;
/** Largest discovery document or key set read. */
const MAX_DOCUMENT_BYTES = 256 * 1024;
/**
 * A failed discovery is answered again for this long before the provider is asked anew, so a
 * stream of sign-in pages opened while it is down is not a stream of requests to it.
 */
export const DISCOVERY_RETRY_MS = 5_000;

/** What the discovery document says of a provider (the endpoints are checked URLs). */
export interface ProviderMetadata {
  jwksUri: string;
  /** Where a browser is sent to sign in (absent: the provider offers no browser sign-in). */
  authorizationEndpoint?: string;
  /** Where an authorization code is exchanged for tokens. */
  tokenEndpoint?: string;
}

/**
 * Signature algorithms accepted: asymmetric only, so `none` and HMAC (a public key used as an
 * HMAC secret) are refused whatever the token's header says. The key set then pins each token
 * to a key of the matching type (and `alg`, when the key names one).
 */
const ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
];

export interface OidcVerifierDeps {
  issuers: readonly OidcIssuer[];
  http: HttpClient;
  clock: Clock;
  /** Deadline of one discovery or key-set request. */
  timeoutMs: number;
}

interface IssuerState {
  config: OidcIssuer;
  /** The discovery in flight or done; a failed one is kept for `DISCOVERY_RETRY_MS`. */
  discovery?: Promise<ProviderMetadata>;
  discoveryFailedAt?: number;
  keys?: ReturnType<typeof createLocalJWKSet>;
  fetchedAt: number;
  lastAttempt: number;
  /** Whether the last fetch failed (an unknown key is then a retryable refusal). */
  lastFailed: boolean;
  inFlight?: Promise<void>;
}

export class OidcVerifier {
  private readonly issuers = new Map<string, IssuerState>();

  constructor(private readonly deps: OidcVerifierDeps) {
    for (const config of deps.issuers) {
      this.issuers.set(config.issuer, {
        config,
        fetchedAt: Number.NEGATIVE_INFINITY,
        lastAttempt: Number.NEGATIVE_INFINITY,
        lastFailed: false,
      });
    }
  }

  /** Whether a bearer string has the shape of a signed JWT (three base64url parts). */
  static looksLikeJwt(token: string): boolean {
    return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token);
  }

  /** Verifies a token and maps its claims to a principal, or throws an AuthErrors code. */
  async authenticate(token: string): Promise<Principal> {
    if (token.length > MAX_TOKEN_BYTES) {
      throw AuthErrors.OIDC_TOKEN_REFUSED(`token is longer than ${MAX_TOKEN_BYTES} bytes`);
    }
    const state = this.issuers.get(unverifiedIssuer(token));
    if (state === undefined) {
      throw AuthErrors.OIDC_TOKEN_REFUSED('token issuer is not one of auth.oidc');
    }
    const payload = await this.verify(state, token);
    return mapClaims(state.config, payload);
  }

  /**
   * The discovery document of a configured issuer: read once through the outbound client and
   * cached; a failure is an `OIDC_PROVIDER_UNAVAILABLE` (kept for `DISCOVERY_RETRY_MS`).
   */
  metadata(issuer: string): Promise<ProviderMetadata> {
    const state = this.issuers.get(issuer);
    if (state === undefined) throw new Error(`issuer ${issuer} is not configured`);
    return this.discovery(state);
  }

  private discovery(state: IssuerState): Promise<ProviderMetadata> {
    const failedAt = state.discoveryFailedAt;
    const stale = failedAt !== undefined && this.deps.clock.now() - failedAt >= DISCOVERY_RETRY_MS;
    if (state.discovery === undefined || stale) {
      state.discoveryFailedAt = undefined;
      const discovery = this.discover(state.config.issuer).catch((err: unknown) => {
        state.discoveryFailedAt = this.deps.clock.now();
        throw asUnavailable(err);
      });
      state.discovery = discovery;
    }
    return state.discovery;
  }

  private async verify(state: IssuerState, token: string): Promise<JWTPayload> {
    const now = this.deps.clock.now();
    if (state.keys === undefined) await this.refresh(state, now, true);
    else if (now - state.fetchedAt > KEYS_MAX_AGE_MS) this.refresh(state, now, false).catch(noop);
    try {
      return await this.check(state, token, false);
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey)) throw err;
    }
    // A key the cache lacks: the provider may have rotated; ask again (rate-limited).
    await this.refresh(state, now, true);
    return this.check(state, token, true);
  }

  private async check(state: IssuerState, token: string, last: boolean): Promise<JWTPayload> {
    const keys = state.keys as ReturnType<typeof createLocalJWKSet>;
    try {
      const { payload } = await jwtVerify(token, keys, {
        issuer: state.config.issuer,
        audience: [...state.config.audiences],
        algorithms: ALGORITHMS,
        clockTolerance: CLOCK_SKEW_SECONDS,
        currentDate: new Date(this.deps.clock.now()),
        requiredClaims: ['exp', 'sub'],
      });
      return payload;
    } catch (err) {
      if (err instanceof errors.JWKSNoMatchingKey && !last) throw err;
      throw refusal(err);
    }
  }

  /**
   * Fetches discovery (once) and the key set. With `needed`, a failure (or a fetch skipped by
   * the rate limit) leaves the caller with the cache: an unknown key then fails as retryable.
   */
  private async refresh(state: IssuerState, now: number, needed: boolean): Promise<void> {
    if (state.inFlight === undefined && now - state.lastAttempt >= REFETCH_INTERVAL_MS) {
      state.lastAttempt = now;
      state.inFlight = this.fetchKeys(state).finally(() => {
        state.inFlight = undefined;
      });
    }
    if (state.inFlight !== undefined) return state.inFlight;
    if (!needed) return;
    if (state.keys === undefined || state.lastFailed) {
      throw unavailable('its keys could not be fetched lately; retry later');
    }
    throw AuthErrors.OIDC_TOKEN_REFUSED(
      'token refused: no key of the issuer matches its kid and alg (keys were fetched moments ago)',
    );
  }

  private async fetchKeys(state: IssuerState): Promise<void> {
    try {
      const { jwksUri } = await this.discovery(state);
      const jwks = await this.getJson(jwksUri, 'key set');
      if (!Array.isArray((jwks as { keys?: unknown }).keys)) {
        throw unavailable('the key set has no "keys" list');
      }
      state.keys = createLocalJWKSet(jwks as JSONWebKeySet);
      state.fetchedAt = this.deps.clock.now();
      state.lastFailed = false;
    } catch (err) {
      state.lastFailed = true;
      throw asUnavailable(err);
    }
  }

  /**
   * Reads the discovery document: it must name the same issuer, and gives the key set's URL and
   * the endpoints of browser sign-in (https, or http when the issuer itself is: a loopback
   * development provider; never another scheme, since the page navigates to one of them).
   */
  private async discover(issuer: string): Promise<ProviderMetadata> {
    const url = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
    const meta = (await this.getJson(url, 'discovery document')) as Record<string, unknown>;
    if (meta.issuer !== issuer) {
      throw unavailable('the discovery document names another issuer than the one configured');
    }
    if (typeof meta.jwks_uri !== 'string' || !URL.canParse(meta.jwks_uri)) {
      throw unavailable('the discovery document has no valid jwks_uri');
    }
    // An endpoint that is not an URL of the issuer's scheme is left out (sign-in then says so):
    // it must not cost the tokens of API callers their keys.
    const schemes = new Set(['https:', new URL(issuer).protocol]);
    const endpoint = (name: string): string | undefined => {
      const value = meta[name];
      return typeof value === 'string' &&
        URL.canParse(value) &&
        schemes.has(new URL(value).protocol)
        ? value
        : undefined;
    };
    const authorizationEndpoint = endpoint('authorization_endpoint');
    const tokenEndpoint = endpoint('token_endpoint');
    return {
      jwksUri: meta.jwks_uri,
      ...(authorizationEndpoint === undefined ? {} : { authorizationEndpoint }),
      ...(tokenEndpoint === undefined ? {} : { tokenEndpoint }),
    };
  }

  private async getJson(url: string, what: string): Promise<unknown> {
    const res = await this.deps.http.request({
      method: 'GET',
      url,
      headers: { accept: 'application/json' },
      timeoutMs: this.deps.timeoutMs,
      maxResponseBytes: MAX_DOCUMENT_BYTES,
    });
    if (res.status !== 200) throw unavailable(`the ${what} answered HTTP ${res.status}`);
    try {
      const body: unknown = JSON.parse(res.body.toString('utf8'));
      if (typeof body === 'object' && body !== null) return body;
    } catch {
      // reported below
    }
    throw unavailable(`the ${what} is not a JSON object`);
  }
}

function noop(): void {}

/** `OIDC_PROVIDER_UNAVAILABLE` saying why (never a token or a code). */
export function unavailable(reason: string, cause?: unknown) {
  return AuthErrors.OIDC_PROVIDER_UNAVAILABLE(`identity provider unavailable: ${reason}`, {
    ...(cause === undefined ? {} : { cause }),
  });
}

/** A failure to reach the provider (the outbound client's refusal, a timeout) in our terms. */
function asUnavailable(err: unknown) {
  return isTouchstoneError(err) && err.code === AuthErrors.OIDC_PROVIDER_UNAVAILABLE.code
    ? err
    : unavailable(describe(err), err);
}

/** A failed request in words safe to show: the outbound client's own message, or nothing. */
export function describe(err: unknown): string {
  return isTouchstoneError(err) ? err.message : 'the request failed';
}

/** The `iss` claim before verification: only to pick the issuer whose keys verify the token. */
function unverifiedIssuer(token: string): string {
  if (!OidcVerifier.looksLikeJwt(token)) {
    throw AuthErrors.OIDC_TOKEN_REFUSED('token is not a signed JWT (three base64url parts)');
  }
  let iss: unknown;
  try {
    iss = decodeJwt(token).iss;
  } catch {
    throw AuthErrors.OIDC_TOKEN_REFUSED('token is not a well-formed JWT');
  }
  if (typeof iss !== 'string') throw AuthErrors.OIDC_TOKEN_REFUSED('token has no iss claim');
  return iss;
}

/** A verification failure as a clear refusal naming what was wrong (never the token). */
function refusal(err: unknown) {
  const refuse = (why: string) => AuthErrors.OIDC_TOKEN_REFUSED(`token refused: ${why}`);
  if (err instanceof errors.JWTExpired) return refuse('it has expired');
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'aud') return refuse('its audience is not one of the issuer audiences');
    if (err.claim === 'nbf') return refuse('it is not valid yet (nbf)');
    if (err.claim === 'iss') return refuse('its issuer does not match');
    return refuse(`claim ${err.claim} is missing or invalid`);
  }
  if (err instanceof errors.JOSEAlgNotAllowed || err instanceof errors.JOSENotSupported) {
    return refuse('its algorithm is not accepted (asymmetric signatures only; never none or HS*)');
  }
  if (err instanceof errors.JWSSignatureVerificationFailed) {
    return refuse('its signature does not verify');
  }
  if (err instanceof errors.JWKSNoMatchingKey) {
    return refuse('no key of the issuer matches its kid and alg');
  }
  if (err instanceof errors.JWKSMultipleMatchingKeys) {
    return refuse('several keys of the issuer match it; it must name a kid');
  }
  return refuse('it is not a valid signed JWT');
}
