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
  KEY_NOT_FOUND: { kind: 'not_found', doc: "No API key with that id in the caller's project." },
  KEY_ROLE_NOT_ALLOWED: {
    kind: 'permission_denied',
    doc: 'Only an owner may create or revoke keys with the owner role.',
  },
});
