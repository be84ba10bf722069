import { performance } from 'node:perf_hooks';
import { authorize, type Principal } from '../auth/index.js';
import { parseDuration } from '../config/index.js';
import { type ErrorDetail, isTouchstoneError } from '../core/index.js';
import type { Judge } from '../evaluators/index.js';
import {
  CannotDecide,
  type CheckDeps,
  type CheckInput,
  CheckProblems,
  type CheckResult,
  type CompiledCheck,
  compileCheck,
} from './checks.js';
import { GuardErrors } from './error-codes.js';
import { invalidGuard, type ParsedGuardPolicy, parseGuardPolicy } from './resource.js';
import type {
  GuardDecision,
  GuardDecisionEvent,
  GuardMessage,
  GuardObserver,
  GuardSubject,
} from './types.js';

/**
 * The guard engine: a policy's checks run in order on the subject, each within its own timeout
 * and the decision's deadline. A reject ends the decision; masks accumulate from one check to the
 * next; a check that cannot decide (an error, a timeout, a condition that cannot be evaluated)
 * blocks with plain text unless the policy fails open. `decide` never throws: whatever goes
 * wrong is a reject the gateway obeys. docs/guardrails.md
 */

/** The status of a reject when no decision could be made (the gateway copies it to the client). */
export const CANNOT_DECIDE_STATUS = 503;
/** How long a looked-up policy is used before the store is asked again (apply/delete also clear it). */
export const POLICY_CACHE_MS = 1000;

export interface CompiledGuardPolicy {
  readonly name: string;
  readonly project: string;
  readonly deadlineMs: number;
  readonly failOpen: boolean;
  readonly rejectStatus: number;
  readonly record: boolean;
  readonly checks: readonly CompiledCheck[];
}

/**
 * Compiles a parsed policy once (patterns, CEL, judges); throws GUARD_POLICY_INVALID naming every
 * field that does not compile (`spec.checks[1].patterns[0]`).
 */
export function compileGuardPolicy(
  policy: ParsedGuardPolicy,
  project: string,
  deps: CheckDeps,
): CompiledGuardPolicy {
  const deadlineMs = parseDuration(policy.spec.deadline) ?? 0;
  const problems: ErrorDetail[] = [];
  const checks: CompiledCheck[] = [];
  const names = new Set<string>();
  policy.spec.checks.forEach((spec, i) => {
    const path = `spec.checks[${i}]`;
    try {
      const check = compileCheck(spec, i, path, deadlineMs, deps);
      if (names.has(check.name)) {
        problems.push({ path: `${path}.name`, message: 'another check has this name' });
      }
      names.add(check.name);
      checks.push(check);
    } catch (err) {
      if (!(err instanceof CheckProblems)) throw err;
      problems.push(...err.details);
    }
  });
  if (problems.length > 0) invalidGuard(problems);
  return {
    name: policy.name,
    project,
    deadlineMs,
    failOpen: policy.spec.failOpen,
    rejectStatus: policy.spec.rejectStatus,
    record: policy.spec.record,
    checks,
  };
}

/** Where the engine finds a stored policy by name: its document and its generation. */
export interface GuardPolicySource {
  get(
    project: string,
    name: string,
  ): Promise<{ resource: unknown; generation: number } | undefined>;
}

/** One check's part in a decision, for the decision trace. */
export interface CheckOutcome {
  name: string;
  type: CompiledCheck['type'];
  outcome: 'pass' | 'hit' | 'cannot_decide';
  ms: number;
}

/** Records decisions as traces of the project (policies with `record: true`); never throws. */
export interface GuardRecorder {
  record(
    policy: CompiledGuardPolicy,
    subject: GuardSubject,
    decision: GuardDecision,
    checks: readonly CheckOutcome[],
    startedAt: number,
  ): void;
}

export interface GuardEngineDeps {
  policies: GuardPolicySource;
  judges?: ReadonlyMap<string, Judge>;
  defaultJudge?: string;
  observer?: GuardObserver;
  recorder?: GuardRecorder;
  /** Wall-clock ms (decision traces); default Date.now. */
  now?: () => number;
}

type Cached = { generation: number; at: number; policy: CompiledGuardPolicy | Error };

/** A reject with the policy's plain-text answer; `reason` is for logs, not the client. */
function rejectOf(status: number, message: string, reason: string): GuardDecision {
  return { action: 'reject', status, message, reason };
}

export class GuardEngine {
  private readonly cache = new Map<string, Cached>();
  private readonly checkDeps: CheckDeps;

  constructor(private readonly deps: GuardEngineDeps) {
    this.checkDeps = {
      judges: deps.judges ?? new Map(),
      ...(deps.defaultJudge === undefined ? {} : { defaultJudge: deps.defaultJudge }),
    };
  }

  /** What apply uses: the same compilation a decision makes, so apply refuses what cannot run. */
  compile(policy: ParsedGuardPolicy, project: string): CompiledGuardPolicy {
    return compileGuardPolicy(policy, project, this.checkDeps);
  }

  /** Forgets compiled policies (after an apply or delete on this replica). */
  invalidate(): void {
    this.cache.clear();
  }

  /**
   * The decision of the named policy of `project` (default: the principal's) on `subject`, for a
   * caller that needs `evaluate` in that project. Never throws.
   */
  async decide(
    policyName: string,
    subject: GuardSubject,
    principal: Principal,
    project?: string,
  ): Promise<GuardDecision> {
    let policy: CompiledGuardPolicy;
    try {
      const target = authorize(principal, 'evaluate', project, { policy: { name: policyName } });
      policy = await this.lookup(target, policyName);
    } catch (err) {
      return this.refusal(err);
    }
    return this.evaluate(policy, subject, principal);
  }

  /** The decision of a compiled policy (what `decide` does once the policy is found). */
  async evaluate(
    policy: CompiledGuardPolicy,
    subject: GuardSubject,
    principal: Principal,
  ): Promise<GuardDecision> {
    const startedAt = (this.deps.now ?? Date.now)();
    const start = performance.now();
    const outcomes: CheckOutcome[] = [];
    const { decision, outcome } = await this.run(policy, subject, principal, start, outcomes);
    const seconds = (performance.now() - start) / 1000;
    const event: GuardDecisionEvent = {
      project: policy.project,
      policy: policy.name,
      phase: subject.phase,
      action: decision.action,
      outcome,
      seconds,
    };
    this.deps.observer?.onGuardDecision(event);
    if (policy.record) this.deps.recorder?.record(policy, subject, decision, outcomes, startedAt);
    return decision;
  }

  private async run(
    policy: CompiledGuardPolicy,
    subject: GuardSubject,
    principal: Principal,
    start: number,
    outcomes: CheckOutcome[],
  ): Promise<{ decision: GuardDecision; outcome: GuardDecisionEvent['outcome'] }> {
    let messages: readonly GuardMessage[] = subject.messages;
    let args: unknown = subject.mcp?.arguments;
    const masked: string[] = [];
    const skipped: string[] = [];
    for (const check of policy.checks) {
      if (!check.phases.has(subject.phase)) continue;
      const remaining = policy.deadlineMs - (performance.now() - start);
      const input: CheckInput = {
        subject,
        messages,
        args,
        principal,
        project: policy.project,
        policy: policy.name,
      };
      const began = performance.now();
      const result =
        remaining <= 0
          ? { failure: 'the decision deadline passed before it ran' }
          : await runWithin(check, input, Math.min(check.timeoutMs, remaining));
      const ms = performance.now() - began;
      if ('failure' in result) {
        outcomes.push({ name: check.name, type: check.type, outcome: 'cannot_decide', ms });
        const why = `check "${check.name}" ${result.failure}`;
        if (!policy.failOpen) {
          return {
            decision: rejectOf(
              CANNOT_DECIDE_STATUS,
              `guardrail could not decide: ${why}`,
              `cannot-decide: ${check.name}`,
            ),
            outcome: 'cannot_decide',
          };
        }
        skipped.push(check.name);
        continue;
      }
      outcomes.push({
        name: check.name,
        type: check.type,
        outcome: result.hit ? 'hit' : 'pass',
        ms,
      });
      if (!result.hit) continue;
      if (check.action === 'reject') {
        return {
          decision: rejectOf(
            policy.rejectStatus,
            `blocked by guard policy "${policy.name}" (check "${check.name}")`,
            `rejected: ${check.name}`,
          ),
          outcome: 'decided',
        };
      }
      messages = result.messages;
      args = result.args;
      masked.push(check.name);
    }
    const outcome = skipped.length > 0 ? 'fail_open' : 'decided';
    const failOpen = skipped.length > 0 ? `fail-open: ${skipped.join(', ')}` : '';
    if (masked.length === 0) {
      return { decision: { action: 'allow', reason: failOpen || 'clean' }, outcome };
    }
    const reason = [`masked: ${masked.join(', ')}`, failOpen].filter((r) => r !== '').join('; ');
    return {
      decision: {
        action: 'mask',
        messages: [...messages],
        ...(subject.mcp?.arguments === undefined ? {} : { arguments: args }),
        reason,
      },
      outcome,
    };
  }

  private async lookup(project: string, name: string): Promise<CompiledGuardPolicy> {
    const key = `${project}\u0000${name}`;
    const now = performance.now();
    let cached = this.cache.get(key);
    if (cached === undefined || now - cached.at > POLICY_CACHE_MS) {
      const stored = await this.deps.policies.get(project, name);
      if (stored === undefined) {
        this.cache.delete(key);
        throw GuardErrors.GUARD_POLICY_NOT_FOUND(
          `no guard policy "${name}" in project "${project}"`,
        );
      }
      if (cached === undefined || cached.generation !== stored.generation) {
        cached = {
          generation: stored.generation,
          at: now,
          policy: this.compileStored(stored.resource, project),
        };
      } else {
        cached = { ...cached, at: now };
      }
      this.cache.set(key, cached);
    }
    if (cached.policy instanceof Error) throw cached.policy;
    return cached.policy;
  }

  /** A stored policy compiled, or the error that stops it (a judge removed from the config). */
  private compileStored(resource: unknown, project: string): CompiledGuardPolicy | Error {
    try {
      return this.compile(parseGuardPolicy(resource), project);
    } catch (err) {
      if (isTouchstoneError(err)) return err;
      throw err;
    }
  }

  /** A lookup or authorization failure as a reject: 403 when refused, else cannot decide. */
  private refusal(err: unknown): GuardDecision {
    if (isTouchstoneError(err) && err.kind === 'permission_denied') {
      return rejectOf(403, `guardrail refused the caller: ${err.message}`, 'permission-denied');
    }
    if (isTouchstoneError(err) && err.kind !== 'internal') {
      return rejectOf(
        CANNOT_DECIDE_STATUS,
        `guardrail could not decide: ${err.message}`,
        'cannot-decide: policy',
      );
    }
    return rejectOf(
      CANNOT_DECIDE_STATUS,
      'guardrail could not decide: internal error',
      'cannot-decide: internal',
    );
  }
}

type Ran = CheckResult | { failure: string };

/** One check within `budgetMs`: its result, or why it could not decide. Never throws. */
async function runWithin(check: CompiledCheck, input: CheckInput, budgetMs: number): Promise<Ran> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const began = performance.now();
  try {
    const pending = check.run(input, controller.signal);
    if (!(pending instanceof Promise)) {
      // A synchronous check cannot be interrupted; one that overran still misses its deadline.
      return performance.now() - began > budgetMs ? { failure: 'timed out' } : pending;
    }
    const timedOut = new Promise<Ran>((resolve) => {
      timer = setTimeout(() => {
        controller.abort();
        resolve({ failure: 'timed out' });
      }, budgetMs);
    });
    return await Promise.race([pending, timedOut]);
  } catch (err) {
    return { failure: failureOf(err) };
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
}

/** Why a check failed, in words safe to show (a TouchstoneError's message, or the check's own). */
function failureOf(err: unknown): string {
  if (err instanceof CannotDecide) return err.message;
  if (isTouchstoneError(err)) return `failed (${err.code})`;
  return 'failed';
}
