import {
  AuditTrail,
  type BrowserSignIn,
  createBearerAuthenticator,
  KeyService,
} from '../auth/index.js';
import type { Config } from '../config/index.js';
import type { Component } from '../core/index.js';
import type { ProxySettings } from '../net/index.js';
import type { BuildBase } from './base.js';
import { closes, loop } from './lifecycle.js';

/**
 * Who calls, and what they did: API keys, identity-provider (OIDC) tokens, and the audit trail.
 * Two components: the providers' HTTP client, and the trail's writer (stopped once the server
 * has drained, so the last requests' entries are written).
 */
export function buildIdentity(
  config: Readonly<Config>,
  deps: Omit<BuildBase, 'metrics'> & { proxy: ProxySettings },
): {
  keys: KeyService;
  audit: AuditTrail;
  bearer: ReturnType<typeof createBearerAuthenticator>['bearer'];
  /** The web UI's sign-in at a provider (`ui.sign_in`). */
  signIn: BrowserSignIn | undefined;
  providerHttp: Component;
  trail: Component;
} {
  const { store, clock, logger, proxy } = deps;
  const keys = new KeyService({ keys: store.keys, clock });
  const audit = new AuditTrail({
    store: store.audit,
    clock,
    retentionMs: config.audit.retention,
    logger,
  });
  const auth = createBearerAuthenticator(config, { keys, clock, proxy });
  return {
    keys,
    audit,
    bearer: auth.bearer,
    signIn: auth.signIn,
    providerHttp: closes('identity-provider-http', auth),
    trail: loop('audit', audit),
  };
}
