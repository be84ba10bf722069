/**
 * @module auth
 * API keys, roles → permissions, and the principal every request acts as. Owns key secrets
 * (hashed at rest). Imports core and store ports only; never api/.
 */
export { type AuditLogger, audited } from './audit.js';
export { AuthErrors } from './error-codes.js';
export {
  type ApiKey,
  type CreateKeyRequest,
  CreateKeySchema,
  hashSecret,
  KeyService,
  SECRET_PREFIX,
} from './keys.js';
export {
  authorize,
  coversTrace,
  DEFAULT_PROJECT,
  grantFilter,
  keyPrincipal,
  OPEN_PRINCIPAL,
  type Principal,
  principalId,
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
