import type { JWTPayload } from 'jose';
import type { KeyScope } from '../store/index.js';
import { AuthErrors } from './error-codes.js';
import type { Principal } from './principal.js';
import { permissionsOf, type Role } from './roles.js';

/** One claims → project and roles rule: every condition given must hold. */
export interface OidcMapping {
  /** Claim name → accepted value or values; an array claim matches when any element does. */
  claims: Readonly<Record<string, string | readonly string[]>>;
  /** At least one of these must be among the token's groups. */
  groups?: readonly string[];
  project: string;
  roles: readonly Role[];
  /** Narrows `traces.read` as an API key's scope does. */
  scope?: Readonly<KeyScope>;
}

export interface OidcIssuer {
  /** Exactly as the provider's `iss` claim and discovery document name it. */
  issuer: string;
  audiences: readonly string[];
  /** The claim holding the caller's groups. */
  groupsClaim: string;
  /** In order; the first that matches gives the project and roles. */
  mappings: readonly OidcMapping[];
}

/**
 * A verified token's principal: the first mapping of its issuer whose claims and groups match
 * gives its project and roles (a person in several teams gets the first listed).
 */
export function mapClaims(issuer: OidcIssuer, claims: JWTPayload): Principal {
  const groups = groupsOf(claims[issuer.groupsClaim]);
  const mapping = issuer.mappings.find((m) => matches(m, claims, groups));
  if (mapping === undefined) {
    throw AuthErrors.OIDC_NO_MAPPING(
      `the token of ${issuer.issuer} matches none of its mappings in auth.oidc`,
    );
  }
  const subject = claims.sub as string;
  return {
    kind: 'oidc',
    id: `${issuer.issuer}#${subject}`,
    subject,
    ...(typeof claims.email === 'string' ? { email: claims.email } : {}),
    groups,
    project: mapping.project,
    roles: mapping.roles,
    labels: {},
    permissions: permissionsOf(mapping.roles),
    ...(mapping.scope === undefined ? {} : { scope: mapping.scope }),
  };
}

function matches(mapping: OidcMapping, claims: JWTPayload, groups: readonly string[]): boolean {
  for (const [name, accepted] of Object.entries(mapping.claims)) {
    const wanted = typeof accepted === 'string' ? [accepted] : accepted;
    const have = claims[name];
    const values = Array.isArray(have) ? have : [have];
    if (!values.some((v) => typeof v === 'string' && wanted.includes(v))) return false;
  }
  return mapping.groups === undefined || mapping.groups.some((g) => groups.includes(g));
}

/** A groups claim as a list: providers send a list, some a single string. */
function groupsOf(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (!Array.isArray(value)) return [];
  return value.filter((g): g is string => typeof g === 'string');
}
