/**
 * Access rules (`auth.rules`): CEL conditions checked after the roles grant a permission. Roles
 * grant; a matching deny rule takes the grant back; when any allow rule is configured, a call must
 * also match one of them. An allow rule never grants what the roles do not. docs/identity.md
 */
import { type AccessFacts, type CompiledAccessRule, compileAccessRule } from '../cel/index.js';
import { CoreErrors, isTouchstoneError } from '../core/index.js';
import { AuthErrors } from './error-codes.js';
import type { Principal, ResourceFacts, RuleCheck } from './principal.js';
import type { Permission } from './roles.js';

export interface AccessRuleConfig {
  effect: 'allow' | 'deny';
  when: string;
}

interface Rule {
  index: number;
  effect: 'allow' | 'deny';
  expression: CompiledAccessRule;
}

export class AccessRules implements RuleCheck {
  private constructor(
    private readonly rules: readonly Rule[],
    private readonly allowlist: boolean,
  ) {}

  /**
   * Compiles every rule; throws INVALID_ARGUMENT naming `auth.rules[i].when` and the CEL problem
   * (its line and column), never the rule's text.
   */
  static compile(configs: readonly AccessRuleConfig[]): AccessRules {
    const rules = configs.map((c, index) => ({
      index,
      effect: c.effect,
      expression: compileRule(c.when, `auth.rules[${index}].when`),
    }));
    return new AccessRules(
      rules,
      rules.some((r) => r.effect === 'allow'),
    );
  }

  get size(): number {
    return this.rules.length;
  }

  /** Throws AUTH_DENIED_BY_RULE when a deny rule matches, or no allow rule does (when any exist). */
  check(
    principal: Principal,
    action: Permission,
    project: string,
    resource: ResourceFacts = {},
  ): void {
    if (this.rules.length === 0) return;
    const facts = accessFacts(principal, action, project, resource);
    let allowed = !this.allowlist;
    for (const rule of this.rules) {
      const result = rule.expression.evaluate(facts);
      if (!result.ok) {
        // Fails closed: a rule that cannot be evaluated may be the one that should deny.
        throw AuthErrors.AUTH_DENIED_BY_RULE(
          `auth.rules[${rule.index}] could not be evaluated (${result.error}), so the call is denied`,
        );
      }
      if (!result.value) continue;
      if (rule.effect === 'deny') {
        throw AuthErrors.AUTH_DENIED_BY_RULE(`denied by auth.rules[${rule.index}] (${action})`);
      }
      allowed = true;
    }
    if (!allowed) {
      throw AuthErrors.AUTH_DENIED_BY_RULE(
        `no allow rule in auth.rules matches this call (${action})`,
      );
    }
  }
}

function compileRule(when: string, path: string): CompiledAccessRule {
  try {
    return compileAccessRule(when, path);
  } catch (err) {
    if (!isTouchstoneError(err)) throw err;
    throw CoreErrors.INVALID_ARGUMENT(`invalid configuration:\n  ${err.message}`, {
      details: err.details,
    });
  }
}

/** Every key a rule may read is present, empty when it does not apply to this call. */
function accessFacts(
  principal: Principal,
  action: Permission,
  project: string,
  resource: ResourceFacts,
): AccessFacts {
  return {
    principal: {
      kind: principal.kind,
      subject: principal.subject ?? (principal.kind === 'key' ? principal.id : ''),
      email: principal.email ?? '',
      groups: principal.groups ?? [],
      project: principal.project ?? '',
      roles: principal.roles,
    },
    action,
    resource: {
      project,
      webhook: { name: resource.webhook?.name ?? '' },
      source: { name: resource.source?.name ?? '' },
      policy: { name: resource.policy?.name ?? '' },
      labels: resource.labels ?? {},
      service: resource.service ?? '',
    },
    mcp: { tool: resource.mcp ?? { name: '', arguments: {} } },
  };
}
