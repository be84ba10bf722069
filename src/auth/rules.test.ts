import { describe, expect, it } from 'vitest';
import { isTouchstoneError } from '../core/index.js';
import { authorize, type Principal } from './principal.js';
import { permissionsOf } from './roles.js';
import { type AccessRuleConfig, AccessRules } from './rules.js';

function caller(rules: readonly AccessRuleConfig[], extra: Partial<Principal> = {}): Principal {
  return {
    kind: 'oidc',
    id: 'https://idp.example#alice',
    subject: 'alice',
    email: 'alice@example.com',
    groups: ['team-a'],
    project: 'agents',
    roles: ['admin'],
    labels: {},
    permissions: permissionsOf(['admin']),
    rules: AccessRules.compile(rules),
    ...extra,
  };
}

function refusal(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (err) {
    if (!isTouchstoneError(err)) throw err;
    return { code: err.code, message: err.message };
  }
  throw new Error('expected a refusal');
}

const TEAM_A_WEBHOOKS: AccessRuleConfig = {
  effect: 'deny',
  when: 'action == "webhooks.write" && "team-a" in principal.groups && !resource.webhook.name.startsWith("team-a-")',
};

describe('access rules', () => {
  it('a matching deny rule takes back what the roles grant, naming the rule', () => {
    const p = caller([{ effect: 'allow', when: 'true' }, TEAM_A_WEBHOOKS]);
    expect(authorize(p, 'webhooks.write', undefined, { webhook: { name: 'team-a-ci' } })).toBe(
      'agents',
    );
    const denied = refusal(() =>
      authorize(p, 'webhooks.write', undefined, { webhook: { name: 'prod' } }),
    );
    expect(denied.code).toBe('AUTH_DENIED_BY_RULE');
    expect(denied.message).toContain('auth.rules[1]');
    // Deny wins over a matching allow rule; other actions are untouched.
    expect(authorize(p, 'webhooks.read', undefined, { webhook: { name: 'prod' } })).toBe('agents');
  });

  it('an allow rule never grants what the roles do not', () => {
    const p = caller([{ effect: 'allow', when: 'true' }], {
      roles: ['viewer'],
      permissions: permissionsOf(['viewer']),
    });
    expect(refusal(() => authorize(p, 'webhooks.write')).code).toBe('PERMISSION_DENIED');
    expect(refusal(() => authorize(p, 'traces.read', 'other')).code).toBe('PERMISSION_DENIED');
  });

  it('with allow rules configured, a call must match one of them', () => {
    const p = caller([
      { effect: 'allow', when: 'action.startsWith("traces.")' },
      { effect: 'allow', when: 'principal.email.endsWith("@example.com") && action == "evaluate"' },
    ]);
    expect(authorize(p, 'traces.read')).toBe('agents');
    expect(authorize(p, 'evaluate')).toBe('agents');
    const denied = refusal(() => authorize(p, 'policies.write'));
    expect(denied.code).toBe('AUTH_DENIED_BY_RULE');
    expect(denied.message).toMatch(/no allow rule/);
  });

  it('without allow rules, roles decide unless a deny rule matches', () => {
    const p = caller([
      { effect: 'deny', when: '"env" in resource.labels && resource.labels["env"] == "prod"' },
    ]);
    expect(authorize(p, 'traces.read', undefined, { labels: { env: 'dev' } })).toBe('agents');
    expect(authorize(p, 'traces.read')).toBe('agents');
    expect(
      refusal(() => authorize(p, 'traces.read', undefined, { labels: { env: 'prod' } })).code,
    ).toBe('AUTH_DENIED_BY_RULE');
  });

  it('sees the principal, the action and the resource', () => {
    const p = caller([
      {
        effect: 'deny',
        when:
          'principal.kind == "oidc" && principal.subject == "alice" && principal.project == "agents" ' +
          '&& "admin" in principal.roles && resource.project == "agents" && resource.source.name == "s1" ' +
          '&& resource.service == "" && mcp.tool.name == ""',
      },
    ]);
    expect(
      refusal(() => authorize(p, 'sources.write', undefined, { source: { name: 's1' } })).code,
    ).toBe('AUTH_DENIED_BY_RULE');
    expect(authorize(p, 'sources.write', undefined, { source: { name: 's2' } })).toBe('agents');
  });

  it('sees the tool of a tool-protocol call and its arguments', () => {
    const p = caller([
      {
        effect: 'deny',
        when:
          'mcp.tool.name == "get_trace" && "trace_id" in mcp.tool.arguments ' +
          '&& mcp.tool.arguments.trace_id.startsWith("secret")',
      },
    ]);
    const tool = (traceId: string) => ({
      mcp: { name: 'get_trace', arguments: { trace_id: traceId } },
    });
    expect(refusal(() => authorize(p, 'traces.read', undefined, tool('secret-1'))).code).toBe(
      'AUTH_DENIED_BY_RULE',
    );
    expect(authorize(p, 'traces.read', undefined, tool('public-1'))).toBe('agents');
    // Another door: the tool is empty, so the rule does not match.
    expect(authorize(p, 'traces.read')).toBe('agents');
  });

  it('a key principal is seen with its key id as subject', () => {
    const p = caller(
      [{ effect: 'deny', when: 'principal.kind == "key" && principal.subject == "key_1"' }],
      {
        kind: 'key',
        id: 'key_1',
        subject: undefined,
      },
    );
    expect(refusal(() => authorize(p, 'traces.read')).code).toBe('AUTH_DENIED_BY_RULE');
  });

  it('fails closed when a rule cannot be evaluated', () => {
    const p = caller([{ effect: 'deny', when: 'resource.labels["team"] == "a"' }]);
    const denied = refusal(() => authorize(p, 'traces.read'));
    expect(denied.code).toBe('AUTH_DENIED_BY_RULE');
    expect(denied.message).toMatch(/auth\.rules\[0\] could not be evaluated/);
  });

  it('an invalid rule fails compilation naming its index and the problem, not its text', () => {
    const secretish = 'principal.email == "s3cr3t-marker@example.com" &&';
    const err = refusal(() =>
      AccessRules.compile([
        { effect: 'allow', when: 'true' },
        { effect: 'deny', when: secretish },
      ]),
    );
    expect(err.code).toBe('INVALID_ARGUMENT');
    expect(err.message).toContain('auth.rules[1].when');
    expect(err.message).toMatch(/line 1, column \d+/);
    expect(err.message).not.toContain('s3cr3t-marker');
    expect(
      refusal(() => AccessRules.compile([{ effect: 'deny', when: 'action' }])).message,
    ).toMatch(/auth\.rules\[0\]\.when: .*must be a bool/);
    expect(
      refusal(() => AccessRules.compile([{ effect: 'deny', when: 'nope == 1' }])).message,
    ).toMatch(/undeclared reference to 'nope'/);
  });

  it('refuses a rule that may cost more than the budget of one evaluation', () => {
    const costly =
      'principal.groups.all(a, principal.groups.all(b, (a + b + a + b).matches("^(x+x+)+y$")))';
    const err = refusal(() => AccessRules.compile([{ effect: 'deny', when: costly }]));
    expect(err.message).toContain('auth.rules[0].when');
    expect(err.message).toMatch(/budget/);
  });
});
