import type { Config } from '../config/index.js';
import type { Clock } from '../core/index.js';
import { createHttpClient, createOutboundGuard, type ProxySettings } from '../net/index.js';
import { BearerAuthenticator } from './bearer.js';
import { BrowserSignIn } from './browser-sign-in.js';
import type { KeyService } from './keys.js';
import { OidcVerifier } from './oidc.js';
import { AccessRules } from './rules.js';

/**
 * The bearer authenticator as configured, and the web UI's sign-in at a provider when
 * `ui.sign_in` is set. Providers are fetched under the outbound rules of `auth.allow_hosts`:
 * https to public names, unless the host is listed there (a development provider on loopback, or
 * one on a private network). Redirects are not followed.
 */
export function createBearerAuthenticator(
  config: Readonly<Config>,
  deps: { keys: KeyService; clock: Clock; proxy: ProxySettings },
): { bearer: BearerAuthenticator; signIn?: BrowserSignIn; close(): Promise<void> } {
  const auth = config.auth;
  const rules = AccessRules.compile(auth?.rules ?? []);
  if (auth === undefined || auth.oidc.length === 0) {
    return {
      bearer: new BearerAuthenticator({ keys: deps.keys, apiKeys: auth?.api_keys ?? true, rules }),
      close: async () => {},
    };
  }
  const guard = createOutboundGuard({
    allowHosts: auth.allow_hosts,
    requireHttps: true,
    setting: 'auth.allow_hosts',
  });
  const http = createHttpClient({
    userAgent: 'touchstone-oidc',
    ...guard,
    clock: deps.clock,
    timeoutMs: auth.oidc_timeout,
    proxy: deps.proxy,
  });
  const oidc = new OidcVerifier({
    issuers: auth.oidc.map((i) => ({
      issuer: i.issuer,
      audiences: i.audiences,
      groupsClaim: i.groups_claim,
      mappings: i.mappings,
    })),
    http,
    clock: deps.clock,
    timeoutMs: auth.oidc_timeout,
  });
  const signIn = config.ui.sign_in;
  return {
    bearer: new BearerAuthenticator({ keys: deps.keys, oidc, apiKeys: auth.api_keys, rules }),
    ...(signIn === undefined
      ? {}
      : {
          signIn: new BrowserSignIn({
            issuer: signIn.issuer,
            clientId: signIn.client_id,
            scopes: signIn.scopes,
            verifier: oidc,
            http,
            timeoutMs: auth.oidc_timeout,
          }),
        }),
    close: () => http.close(),
  };
}
