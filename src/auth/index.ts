/**
 * @module auth
 * API keys, identity-provider (OIDC) tokens, roles → permissions, the principal every request
 * acts as, the access rules checked after the roles, and the audit trail. Owns key secrets (hashed
 * at rest). Imports core, cel (the rules), net (the provider's discovery and keys) and store ports
 * only; never api/.
 */
export { type AuditLogger, audited } from './audit.js';
export {
  AUDIT_BUFFER_MAX,
  type AuditRecord,
  AuditTrail,
  type AuditTrailDeps,
} from './audit-trail.js';
export { BearerAuthenticator, type BearerAuthenticatorDeps } from './bearer.js';
export {
  BrowserSignIn,
  type BrowserSignInDeps,
  parseTokenRequest,
  type SignedIn,
  type SignInConfig,
  type TokenRequest,
  TokenRequestSchema,
} from './browser-sign-in.js';
export { AuthErrors } from './error-codes.js';
export { createBearerAuthenticator } from './from-config.js';
export {
  type ApiKey,
  type CreateKeyRequest,
  CreateKeySchema,
  hashSecret,
  KeyService,
  SECRET_PREFIX,
} from './keys.js';
export {
  CLOCK_SKEW_SECONDS,
  MAX_TOKEN_BYTES,
  type OidcIssuer,
  type OidcMapping,
  OidcVerifier,
  type OidcVerifierDeps,
  type ProviderMetadata,
  REFETCH_INTERVAL_MS,
} from './oidc.js';
export {
  authorize,
  coversTrace,
  DEFAULT_PROJECT,
  grantFilter,
  keyPrincipal,
  type McpToolFacts,
  OPEN_PRINCIPAL,
  type Principal,
  principalId,
  type ResourceFacts,
  type RuleCheck,
  readFacts,
} from './principal.js';
export {
  highestRole,
  PERMISSIONS,
  type Permission,
  permissionsOf,
  ROLE_PERMISSIONS,
  ROLES,
  type Role,
} from './roles.js';
export { type AccessRuleConfig, AccessRules } from './rules.js';
