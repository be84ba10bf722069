import { AuthErrors } from './error-codes.js';
import { type KeyService, SECRET_PREFIX } from './keys.js';
import { MAX_TOKEN_BYTES, OidcVerifier } from './oidc.js';
import type { Principal } from './principal.js';
import type { AccessRules } from './rules.js';

export interface BearerAuthenticatorDeps {
  keys: KeyService;
  /** Absent when no identity provider is configured. */
  oidc?: OidcVerifier;
  /** `auth.api_keys`: false refuses API keys (identity-provider tokens only). */
  apiKeys: boolean;
  /** `auth.rules`, held by every principal this authenticates. */
  rules?: AccessRules;
}

/**
 * Resolves the bearer credential of any door (REST, Connect RPC, OTLP) to a principal: an API
 * key (`tsk_…`) or, with `auth.oidc` configured, an identity provider's signed JWT.
 */
export class BearerAuthenticator {
  constructor(private readonly deps: BearerAuthenticatorDeps) {}

  async authenticate(bearer: string): Promise<Principal> {
    const principal = await this.resolve(bearer);
    const { rules } = this.deps;
    return rules === undefined || rules.size === 0 ? principal : { ...principal, rules };
  }

  private async resolve(bearer: string): Promise<Principal> {
    const { oidc } = this.deps;
    if (bearer.startsWith(`${SECRET_PREFIX}_`) || oidc === undefined) {
      if (!this.deps.apiKeys) {
        throw AuthErrors.UNAUTHENTICATED('API keys are turned off here (auth.api_keys: false)');
      }
      return this.deps.keys.authenticate(bearer);
    }
    if (bearer.length > MAX_TOKEN_BYTES || OidcVerifier.looksLikeJwt(bearer)) {
      return oidc.authenticate(bearer);
    }
    throw AuthErrors.UNAUTHENTICATED('the bearer is neither an API key nor a signed JWT');
  }
}
