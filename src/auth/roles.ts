/**
 * Roles and what they allow (docs/auth.md has the same table; a test keeps them equal).
 */

import { ROLES, type Role } from '../core/index.js';

export { ROLES, type Role } from '../core/index.js';

export const PERMISSIONS = [
  'traces.read',
  'traces.write',
  'traces.annotate',
  'evaluate',
  'policies.read',
  'policies.write',
  'runs.read',
  'runs.create',
  'runs.delete',
  'datasets.read',
  'datasets.write',
  'sources.read',
  'sources.write',
  'webhooks.read',
  'webhooks.write',
  'keys.read',
  'keys.write',
  'metrics.read',
  'audit.read',
] as const;
export type Permission = (typeof PERMISSIONS)[number];

const READ_ALL: Permission[] = [
  'traces.read',
  'evaluate',
  'policies.read',
  'runs.read',
  'datasets.read',
];
const EDIT: Permission[] = [
  ...READ_ALL,
  'traces.write',
  'traces.annotate',
  'policies.write',
  'runs.create',
  'datasets.write',
];
const ADMIN: Permission[] = [
  ...EDIT,
  'runs.delete',
  'sources.read',
  'sources.write',
  'webhooks.read',
  'webhooks.write',
  'keys.read',
  'keys.write',
  // Server-wide series (every project's sources, policies, webhooks): an operator's view.
  'metrics.read',
  // Who wrote what and who was refused, in the admin's project.
  'audit.read',
];

export const ROLE_PERMISSIONS: Readonly<Record<Role, ReadonlySet<Permission>>> = {
  viewer: new Set(READ_ALL),
  ingest: new Set<Permission>(['traces.write']),
  editor: new Set(EDIT),
  admin: new Set(ADMIN),
  owner: new Set(ADMIN),
};

export function permissionsOf(roles: readonly Role[]): Set<Permission> {
  const out = new Set<Permission>();
  for (const role of roles) for (const p of ROLE_PERMISSIONS[role]) out.add(p);
  return out;
}

/** The highest role in a list, by the order of ROLES. */
export function highestRole(roles: readonly Role[]): Role | undefined {
  let best = -1;
  for (const r of roles) best = Math.max(best, ROLES.indexOf(r));
  return best < 0 ? undefined : ROLES[best];
}
