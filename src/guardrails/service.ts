import type { AuditLogger } from '../auth/index.js';
import type { Clock } from '../core/index.js';
import { type ResourceDescriptor, ResourceService } from '../resources/index.js';
import type { GuardPolicyRecord, GuardPolicyStore } from '../store/index.js';
import type { GuardEngine } from './engine.js';
import { GuardErrors } from './error-codes.js';
import {
  GUARD_KIND,
  GuardPolicyResourceSchema,
  guardPolicyResource,
  type ParsedGuardPolicy,
  parseGuardPolicy,
} from './resource.js';

/**
 * The GuardPolicy resource: `/v1alpha1/guardpolicies`, `touchstone guardpolicy`. Read and written
 * with the policy permissions (a guard policy is a policy the gateway enforces).
 */
export const GUARD_POLICY_RESOURCE: ResourceDescriptor = {
  kind: GUARD_KIND,
  title: 'GuardPolicy',
  singular: 'guardpolicy',
  plural: 'guardpolicies',
  access: { read: 'policies.read', write: 'policies.write' },
  bodies: { GuardPolicyResource: GuardPolicyResourceSchema },
  envelope: true,
  idempotentDelete: false,
  withhold: [],
};

export interface GuardPolicyServiceDeps {
  store: { guardPolicies: GuardPolicyStore };
  clock: Clock;
  logger: AuditLogger;
  /** Compiles at apply (so apply refuses what a decision could not run) and is told of changes. */
  engine: GuardEngine;
}

export type GuardPolicyView = Record<string, unknown>;

/** The resource as the API shows it: as stored, plus its generation and times. */
function guardPolicyView(record: GuardPolicyRecord): GuardPolicyView {
  const resource = record.resource as { metadata: Record<string, unknown> };
  return {
    ...resource,
    metadata: {
      ...resource.metadata,
      generation: record.generation,
      createdAt: record.createdAt,
      updatedAt: record.updatedAt,
    },
  };
}

export class GuardPolicyService extends ResourceService<
  ParsedGuardPolicy,
  GuardPolicyRecord,
  GuardPolicyView,
  GuardPolicyView & { created?: boolean }
> {
  constructor(private readonly deps: GuardPolicyServiceDeps) {
    super(
      GUARD_POLICY_RESOURCE,
      { clock: deps.clock, logger: deps.logger, onChange: () => deps.engine.invalidate() },
      deps.store.guardPolicies,
    );
  }

  protected parse(input: unknown): ParsedGuardPolicy {
    return parseGuardPolicy(input);
  }

  /** Patterns, CEL conditions, judges and timeouts: compiled as a decision would compile them. */
  protected async check(policy: ParsedGuardPolicy, project: string): Promise<void> {
    this.deps.engine.compile(policy, project);
  }

  protected preview(
    policy: ParsedGuardPolicy,
    project: string,
    existing: GuardPolicyRecord | undefined,
    now: string,
  ): GuardPolicyView {
    return guardPolicyView({
      project,
      name: policy.name,
      resource: guardPolicyResource(policy, project),
      generation: existing?.generation ?? 0,
      createdAt: existing?.createdAt ?? now,
      updatedAt: now,
    });
  }

  protected async write(policy: ParsedGuardPolicy, project: string, now: number) {
    const { policy: stored, created } = await this.deps.store.guardPolicies.upsert(
      project,
      policy.name,
      guardPolicyResource(policy, project),
      now,
    );
    return { ...guardPolicyView(stored), created };
  }

  protected view(record: GuardPolicyRecord): GuardPolicyView {
    return guardPolicyView(record);
  }

  protected notFound(project: string, name: string) {
    return GuardErrors.GUARD_POLICY_NOT_FOUND(`no guard policy "${name}" in project "${project}"`);
  }
}
