import { describe, expect, it } from 'vitest';
import { mapClaims, type OidcIssuer } from './oidc-mapping.js';

const issuer: OidcIssuer = {
  issuer: 'https://idp.example.com',
  audiences: ['touchstone'],
  groupsClaim: 'roles',
  mappings: [
    {
      claims: { repository: 'acme/agent', ref: ['refs/heads/main', 'refs/tags/v1'] },
      project: 'ci',
      roles: ['editor'],
    },
    { claims: { amr: 'mfa' }, groups: ['admins'], project: 'ops', roles: ['admin'] },
    { claims: {}, groups: ['readers'], project: 'ops', roles: ['viewer'] },
    {
      claims: {},
      groups: ['support'],
      project: 'ops',
      roles: ['viewer'],
      scope: { services: ['chat'], labels: { tier: 'free' } },
    },
  ],
};

describe('claims → project and roles', () => {
  it('every claim of a mapping must match; a listed value is any of them', () => {
    const p = mapClaims(issuer, {
      sub: 'repo:acme/agent',
      repository: 'acme/agent',
      ref: 'refs/tags/v1',
    });
    expect(p).toMatchObject({
      kind: 'oidc',
      id: 'https://idp.example.com#repo:acme/agent',
      project: 'ci',
      roles: ['editor'],
    });
    expect(() =>
      mapClaims(issuer, { sub: 'x', repository: 'acme/agent', ref: 'refs/heads/dev' }),
    ).toThrow(expect.objectContaining({ code: 'OIDC_NO_MAPPING' }));
  });

  it('an array claim matches when one element does; groups come from the configured claim', () => {
    const admin = mapClaims(issuer, { sub: 'a', amr: ['pwd', 'mfa'], roles: ['admins'] });
    expect(admin).toMatchObject({ project: 'ops', roles: ['admin'], groups: ['admins'] });
    // Without the second factor the admin mapping fails and the next one is tried.
    const reader = mapClaims(issuer, { sub: 'b', amr: ['pwd'], roles: ['admins', 'readers'] });
    expect(reader.roles).toEqual(['viewer']);
    // A provider that sends one group as a string.
    expect(mapClaims(issuer, { sub: 'c', roles: 'readers' }).groups).toEqual(['readers']);
  });

  it('non-string claim values never match, and the email is kept only when a string', () => {
    expect(() =>
      mapClaims(issuer, { sub: 'd', repository: 1, ref: 'refs/heads/main' } as never),
    ).toThrow();
    const p = mapClaims(issuer, { sub: 'e', email: 42, roles: ['readers'] } as never);
    expect(p.email).toBeUndefined();
    expect(p.permissions.has('traces.read')).toBe(true);
    expect(p.permissions.has('policies.write')).toBe(false);
  });

  it("a mapping's scope narrows the principal's reads as an API key's does", () => {
    const p = mapClaims(issuer, { sub: 'sam', roles: ['support'] });
    expect(p.scope).toEqual({ services: ['chat'], labels: { tier: 'free' } });
    expect(mapClaims(issuer, { sub: 'rae', roles: ['readers'] }).scope).toBeUndefined();
  });
});
