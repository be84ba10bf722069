import { defineErrors } from '../core/index.js';

export const AuthErrors = defineErrors({
  UNAUTHENTICATED: {
    kind: 'unauthenticated',
    doc: 'No credential, or one that is unknown, revoked or expired. Send `Authorization: Bearer tsk_…`.',
  },
  PERMISSION_DENIED: {
    kind: 'permission_denied',
    doc: "The caller's roles do not grant the permission the operation needs, or the key belongs to another project.",
  },
  AUTH_DENIED_BY_RULE: {
    kind: 'permission_denied',
    doc: 'The roles grant the permission but an access rule (`auth.rules`) does not: a deny rule matches (the message names its index), no allow rule matches while allow rules are configured, or a rule could not be evaluated (rules fail closed).',
  },
  OIDC_TOKEN_REFUSED: {
    kind: 'unauthenticated',
    doc: 'An identity-provider token was refused: too long, malformed, from an issuer not in `auth.oidc`, expired or not yet valid, for another audience, signed with an unknown key or a refused algorithm, or with a signature that does not verify. The message says which.',
  },
  OIDC_NO_MAPPING: {
    kind: 'permission_denied',
    doc: "The token is valid but none of its issuer's `mappings` matches its claims or groups, so it has no project or roles.",
  },
  OIDC_PROVIDER_UNAVAILABLE: {
    kind: 'unavailable',
    retryable: true,
    doc: "The identity provider's discovery document or keys could not be fetched (down, slow past `auth.oidc_timeout`, refused by the outbound rules, or an invalid answer) and no cached key fits the token. Keys already cached keep working.",
  },
  UI_SIGN_IN_NOT_CONFIGURED: {
    kind: 'not_found',
    doc: 'The web UI signs in with API keys only here: `ui.sign_in` is not configured, so `/ui/login/config` and `/ui/login/token` have nothing to offer.',
  },
  SIGN_IN_REQUEST_INVALID: {
    kind: 'invalid_argument',
    doc: 'A `POST /ui/login/token` body the server refused before asking the provider: `code` or `code_verifier` missing, a verifier that is not 43–128 characters of `A-Z a-z 0-9 - . _ ~` (RFC 7636), or a `redirect_uri` that is not an http(s) URL under `/ui/`. The message names the field.',
  },
  SIGN_IN_BUSY: {
    kind: 'unavailable',
    retryable: true,
    doc: 'The server was already exchanging as many sign-ins with the identity provider as it allows at once (8), so this one was not sent to the provider: a flood of `POST /ui/login/token` cannot make the server flood its provider. Sign in again after `Retry-After`.',
  },
  SIGN_IN_CODE_REFUSED: {
    kind: 'invalid_argument',
    doc: "The identity provider refused to exchange the authorization code; the message names the provider's error code (`invalid_grant`: the code was already used or has expired, or the verifier or redirect URI does not match the sign-in it came from). Sign in again.",
  },
  KEY_NOT_FOUND: { kind: 'not_found', doc: "No API key with that id in the caller's project." },
  KEY_ROLE_NOT_ALLOWED: {
    kind: 'permission_denied',
    doc: 'Only an owner may create or revoke keys with the owner role.',
  },
});
