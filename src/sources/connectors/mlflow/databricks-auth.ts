import { createHash } from 'node:crypto';
import { type HttpClient, isRetryableStatus } from '../../../net/index.js';
import { isRecord, mediaTypeOf } from '../json-rest.js';
import type { MlflowAuth } from './auth.js';
import { MlflowErrors } from './error-codes.js';

/**
 * A Databricks service principal: its OAuth secret is exchanged for an access token with the
 * client-credentials grant (scope `all-apis`, HTTP Basic client authentication) at
 * `<endpoint>/oidc/v1/token` — always the workspace's own host, never configurable. The token is
 * cached across pulls (a connector is built per pull) keyed by endpoint, client id and a hash of
 * the secret, until one minute before it expires; a 401 from the workspace gets one fresh token.
 */

export const TOKEN_PATH = '/oidc/v1/token';
/** A token is replaced this long before it expires. */
export const TOKEN_EARLY_MS = 60_000;
/** Lifetime assumed when the answer has no `expires_in` (Databricks documents one hour). */
const DEFAULT_LIFETIME_S = 3600;
/** A token answer is a few hundred bytes; anything larger is not one. */
const TOKEN_ANSWER_BYTES = 64 * 1024;

interface Token {
  value: string;
  expiresAtMs: number;
}

/** Process-wide: sources built anew each pull share the tokens of the same principal. */
const tokens = new Map<string, Token>();
const pending = new Map<string, Promise<Token>>();

export interface ServicePrincipalOptions {
  /** The workspace URL; the token endpoint is on its origin. */
  endpoint: string;
  clientId: string;
  secret: string;
  http: HttpClient;
  /** Epoch ms; the system clock unless a test controls it. */
  now?: () => number;
}

function cacheKey(origin: string, clientId: string, secret: string): string {
  const digest = createHash('sha256').update(secret).digest('hex');
  return `${origin}\n${clientId}\n${digest}`;
}

async function exchange(
  origin: string,
  options: ServicePrincipalOptions,
  now: () => number,
  signal?: AbortSignal,
): Promise<Token> {
  const host = new URL(origin).host;
  const where = `Databricks token endpoint at ${host}`;
  const basic = Buffer.from(`${options.clientId}:${options.secret}`, 'utf8').toString('base64');
  const res = await options.http.request({
    method: 'POST',
    url: `${origin}${TOKEN_PATH}`,
    headers: {
      accept: 'application/json',
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${basic}`,
    },
    body: 'grant_type=client_credentials&scope=all-apis',
    maxRedirects: 0,
    maxResponseBytes: TOKEN_ANSWER_BYTES,
    ...(signal === undefined ? {} : { signal }),
  });
  const retry =
    res.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: res.retryAfterSeconds };
  if (res.status === 429) {
    throw MlflowErrors.MLFLOW_RATE_LIMITED(`${where} answered 429 Too Many Requests`, retry);
  }
  if (isRetryableStatus(res.status)) {
    throw MlflowErrors.MLFLOW_UNAVAILABLE(`${where} answered ${res.status}`, retry);
  }
  if (res.status >= 300 && res.status < 400) {
    throw MlflowErrors.MLFLOW_BAD_RESPONSE(`${where} answered a ${res.status} redirect`);
  }
  if (res.status >= 400) {
    throw MlflowErrors.MLFLOW_TOKEN_REFUSED(
      `${where} refused the service principal's credentials (${res.status})`,
    );
  }
  const mediaType = mediaTypeOf(res);
  let json: unknown;
  try {
    json = JSON.parse(res.body.toString('utf8'));
  } catch {
    json = undefined;
  }
  const token = isRecord(json) ? json.access_token : undefined;
  if (typeof token !== 'string' || token === '' || !isRecord(json)) {
    throw MlflowErrors.MLFLOW_BAD_RESPONSE(
      `${where} answered ${mediaType === '' ? 'a body' : mediaType} without an access token`,
    );
  }
  const lifetime =
    typeof json.expires_in === 'number' && Number.isFinite(json.expires_in) && json.expires_in > 0
      ? json.expires_in
      : DEFAULT_LIFETIME_S;
  return { value: token, expiresAtMs: now() + lifetime * 1000 };
}

/** The authorization of a Databricks service principal. */
export function servicePrincipalAuth(options: ServicePrincipalOptions): MlflowAuth {
  const origin = new URL(options.endpoint).origin;
  const key = cacheKey(origin, options.clientId, options.secret);
  const now = options.now ?? Date.now;

  function fresh(signal?: AbortSignal): Promise<Token> {
    let inFlight = pending.get(key);
    if (inFlight === undefined) {
      inFlight = exchange(origin, options, now, signal).then((t) => {
        tokens.set(key, t);
        return t;
      });
      const settled = inFlight;
      pending.set(key, settled);
      void settled.then(
        () => pending.delete(key),
        () => pending.delete(key),
      );
    }
    return inFlight;
  }

  async function current(signal?: AbortSignal): Promise<Token> {
    const cached = tokens.get(key);
    if (cached !== undefined && now() < cached.expiresAtMs - TOKEN_EARLY_MS) return cached;
    return fresh(signal);
  }

  return {
    async sign(request) {
      const token = await current(request.signal);
      return { headers: { ...request.headers, authorization: `Bearer ${token.value}` } };
    },
    async renew(sent, signal) {
      const cached = tokens.get(key);
      // Renewed by another request since this one was sent: try with that token.
      if (cached !== undefined && sent.authorization !== `Bearer ${cached.value}`) return true;
      tokens.delete(key);
      await fresh(signal);
      return true;
    },
  };
}
