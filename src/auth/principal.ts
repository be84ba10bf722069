import type { ApiKeyRecord, KeyScope } from '../store/index.js';
import { AuthErrors } from './error-codes.js';
import { type Permission, permissionsOf, type Role } from './roles.js';

/**
 * Who is calling. A key principal belongs to one project; an OIDC principal (a person or a
 * workflow signed in at an identity provider) gets its project and roles from the claims mapping;
 * the open principal (loopback without an auth section, or --no-auth) acts as owner of every
 * project.
 */
export interface Principal {
  kind: 'key' | 'oidc' | 'open';
  /** Key id, or `<issuer>#<subject>` for an OIDC principal: for audit and logs (never a secret). */
  id: string;
  /** The identity provider's `sub` claim (OIDC principals). */
  subject?: string;
  /** The `email` claim, when the provider sends one (OIDC principals). */
  email?: string;
  /** Groups from the issuer's groups claim (OIDC principals). */
  groups?: readonly string[];
  /** The principal's project; undefined for the open principal (all projects). */
  project: string | undefined;
  roles: readonly Role[];
  /** Labels applied to traces ingested with this key. */
  labels: Readonly<Record<string, string>>;
  permissions: ReadonlySet<Permission>;
  /** Narrows `traces.read`: only these services and/or traces carrying these labels. */
  scope?: KeyScope;
  /** `auth.rules`, checked by `authorize` after the roles (set on every authenticated caller). */
  rules?: RuleCheck;
}

/**
 * What a call acts on, as far as it is known when the permission is checked: the named resource
 * of a route (`webhook`, `source`, `policy`) and the labels or service a request names.
 */
export interface ResourceFacts {
  webhook?: { name: string };
  source?: { name: string };
  policy?: { name: string };
  labels?: Readonly<Record<string, string>>;
  service?: string;
  /** The tool-protocol tool a call comes through (`/mcp`, `touchstone mcp`), with its arguments. */
  mcp?: McpToolFacts;
}

/** What the access rules see as `mcp.tool` of a tool call; empty for every other door. */
export interface McpToolFacts {
  name: string;
  arguments: Readonly<Record<string, unknown>>;
}

/** What a read's filter names of the traces it reads (`?service=`, `?labels=`), for the rules. */
export function readFacts(filter: {
  service?: string;
  labels?: Readonly<Record<string, string>>;
}): ResourceFacts {
  return {
    ...(filter.service === undefined ? {} : { service: filter.service }),
    ...(filter.labels === undefined ? {} : { labels: filter.labels }),
  };
}

/** The access rules (rules.ts): throws when they refuse a call the roles grant. */
export interface RuleCheck {
  check(principal: Principal, action: Permission, project: string, resource?: ResourceFacts): void;
}

export const DEFAULT_PROJECT = 'default';

export const OPEN_PRINCIPAL: Principal = Object.freeze<Principal>({
  kind: 'open',
  id: 'open',
  project: undefined,
  roles: ['owner'],
  labels: {},
  permissions: permissionsOf(['owner']),
});

export function keyPrincipal(key: ApiKeyRecord): Principal {
  return {
    kind: 'key',
    id: key.id,
    project: key.project,
    roles: key.roles,
    labels: key.labels,
    permissions: permissionsOf(key.roles),
    ...(key.scope === undefined ? {} : { scope: key.scope }),
  };
}

/** Whether a principal's grant covers a trace (scoped keys see only matching traces). */
export function coversTrace(
  principal: Principal,
  trace: { service: string; labels: Record<string, string> },
): boolean {
  const scope = principal.scope;
  if (scope === undefined) return true;
  if (scope.services !== undefined && !scope.services.includes(trace.service)) return false;
  for (const [k, v] of Object.entries(scope.labels ?? {})) if (trace.labels[k] !== v) return false;
  return true;
}

/**
 * A read filter narrowed to the principal's grant: its services, and its labels merged into the
 * requested ones. Undefined when the requested labels contradict the grant (nothing is visible).
 */
export function grantFilter(
  principal: Principal,
  labels: Readonly<Record<string, string>> | undefined,
): { labels: Record<string, string>; services?: readonly string[] } | undefined {
  const scope = principal.scope;
  const merged = { ...(labels ?? {}) };
  for (const [k, v] of Object.entries(scope?.labels ?? {})) {
    if (merged[k] !== undefined && merged[k] !== v) return undefined;
    merged[k] = v;
  }
  return { labels: merged, ...(scope?.services === undefined ? {} : { services: scope.services }) };
}

/**
 * Checks a permission and settles which project the operation acts on: the one the request names,
 * else the key's own, else `default`. Then the access rules, over that project and what the call
 * names of the resource. Returns that project.
 */
export function authorize(
  principal: Principal,
  permission: Permission,
  project?: string,
  resource?: ResourceFacts,
): string {
  if (!principal.permissions.has(permission)) {
    throw AuthErrors.PERMISSION_DENIED(`this operation needs permission ${permission}`);
  }
  const target = project ?? principal.project ?? DEFAULT_PROJECT;
  if (principal.project !== undefined && principal.project !== target) {
    throw AuthErrors.PERMISSION_DENIED(
      `the key belongs to project "${principal.project}", not "${target}"`,
    );
  }
  principal.rules?.check(principal, permission, target, resource);
  return target;
}

/**
 * The principal's stable name (who holds Idempotency-Keys, who annotated): the API key id for key callers, `<kind>:<id>` for any other identity
 * (an OIDC subject), `anonymous` when the server runs without authentication.
 */
export function principalId(principal: Pick<Principal, 'kind' | 'id'>): string {
  if (principal.kind === 'open') return 'anonymous';
  if (principal.kind === 'key') return principal.id;
  return `${principal.kind}:${principal.id}`;
}
