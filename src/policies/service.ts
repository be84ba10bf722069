import {
  type AuditLogger,
  authorize,
  grantFilter,
  type Principal,
  readFacts,
} from '../auth/index.js';
import { type Clock, CoreErrors, isTouchstoneError, type TouchstoneError } from '../core/index.js';
import type { EvaluatorRegistry, Judge } from '../evaluators/index.js';
import type { OutboundGuard } from '../net/index.js';
import { ResourceService, sinceMs } from '../resources/index.js';
import type { AlertState, PolicyRecord, Store } from '../store/index.js';
import { POLICY_RESOURCE } from './descriptor.js';
import { PolicyErrors } from './error-codes.js';
import {
  compilePolicy,
  DEFAULT_WINDOW_MS,
  isPolicyShaped,
  type ParsedPolicy,
  type PolicySink,
  parsePolicy,
  policyProblems,
  policyResource,
  policyView,
  specOf,
  throwProblems,
} from './resource.js';
import {
  buildSeries,
  durationText,
  type PolicyMetrics,
  type ScoreSeries,
  transitionView,
} from './series.js';

export interface PolicyServiceDeps {
  store: Store;
  clock: Clock;
  registry: EvaluatorRegistry;
  /** Resolves a judge name (undefined = the default judge); throws JUDGE_UNKNOWN naming `path`. */
  resolveJudge(name: string | undefined, path: string): Judge | undefined;
  /** DNS-free checks of an alert webhook URL at apply (the dispatcher checks every send). */
  guard: Pick<OutboundGuard, 'checkTarget'>;
  logger: AuditLogger;
  /** Called after a policy is applied or deleted, so this replica's engine reloads at once. */
  onChange?: () => void;
  /**
   * Checks a `trace_feedback` sink as its connector sees it (fields, endpoint rules, credential
   * grant), throwing an error whose details name fields under `path`. Absent: sinks are refused.
   */
  checkSink?(sink: PolicySink, project: string, path: string): Promise<void>;
}

export type PolicyView = Record<string, unknown>;

/** Traces re-queued per page by a rescore. */
const RESCORE_PAGE = 500;

/** Alert transitions one series request returns at most (the earliest in the range). */
const MAX_TRANSITIONS = 1000;

/** Buckets one series request answers at most: a chart's width in points. */
const MAX_BUCKETS = 1000;
const DAY_MS = 24 * 3600 * 1000;

/** The longest stage window (resource.ts): buckets this far before `since` feed window means. */
const MAX_WINDOW_MS = 30 * 24 * 3600 * 1000;

export interface SeriesQuery {
  project?: string;
  policy?: string;
  evaluator?: string;
  labels: Record<string, string>;
  /** Epoch ms; default `until` − 24 h. */
  since?: number;
  /** Epoch ms, exclusive; default now. */
  until?: number;
  bucketMs: number;
}

export interface SeriesAnswer {
  project: string;
  since: string;
  until: string;
  bucket: string;
  series: ScoreSeries[];
  transitions: ReturnType<typeof transitionView>[];
}

/** A policy's alert states as its view's `status.alerts` shows them. */
function alertStatus(states: readonly AlertState[], policy: string) {
  return states
    .filter((s) => s.policy === policy)
    .map((s) => ({
      metric: s.metric,
      firing: s.firing,
      mean: s.mean,
      n: s.n,
      changedAt: new Date(s.changedAt).toISOString(),
    }));
}

/**
 * The OnlineEvalPolicy resource's operations (REST and CLI): the kit's apply, get, list and
 * delete, plus series and rescore. A policy applies to traces stored after it changes; `rescore`
 * re-queues older ones. Writes are audited by name.
 */
export class PolicyService extends ResourceService<
  ParsedPolicy,
  PolicyRecord,
  PolicyView,
  PolicyView & { created?: boolean }
> {
  constructor(private readonly deps: PolicyServiceDeps) {
    super(POLICY_RESOURCE, deps, deps.store.policies);
  }

  protected async parse(input: unknown): Promise<ParsedPolicy> {
    // A resource that is not well-formed is refused with every problem found in its parts.
    if (!isPolicyShaped(input)) await this.validate(input);
    return parsePolicy(input);
  }

  /** Everything (CEL, evaluators and params, judge, alert URLs), on the resource as given. */
  protected async check(policy: ParsedPolicy, project: string, input: unknown): Promise<void> {
    await this.validate(input);
    for (const [i, sink] of policy.spec.sinks.entries()) {
      const path = `spec.sinks[${i}]`;
      if (this.deps.checkSink === undefined) {
        throw PolicyErrors.POLICY_INVALID('invalid policy: sinks are not available here', {
          details: [{ path, message: 'this server does not write to sinks' }],
        });
      }
      await this.deps.checkSink(sink, project, path);
    }
  }

  protected preview(
    policy: ParsedPolicy,
    project: string,
    existing: PolicyRecord | undefined,
    now: string,
  ): PolicyView {
    return policyView({
      project,
      name: policy.name,
      resource: policyResource(policy, project),
      generation: existing?.generation ?? 0,
      createdAt: existing?.createdAt ?? now,
      updatedAt: now,
    });
  }

  protected async write(policy: ParsedPolicy, project: string, now: number) {
    const { policy: stored, created } = await this.deps.store.policies.upsert(
      project,
      policy.name,
      policyResource(policy, project),
      now,
    );
    return { ...policyView(stored), created };
  }

  protected view(record: PolicyRecord): PolicyView {
    return policyView(record);
  }

  /** Policies with `status.alerts`: each alerted metric's stored state (firing, mean, n). */
  protected override async present(records: readonly PolicyRecord[], project: string) {
    const states = records.length === 0 ? [] : await this.deps.store.alerts.statesOf(project);
    return records.map((policy) => ({
      ...policyView(policy),
      status: { alerts: alertStatus(states, policy.name) },
    }));
  }

  protected notFound(project: string, name: string) {
    return PolicyErrors.POLICY_NOT_FOUND(`no policy "${name}" in project "${project}"`);
  }

  /**
   * Each policy metric's scores over time (`traces.read`: they are the traces' scores), with
   * window means, alert thresholds and states, and the alert transitions in the range.
   */
  async series(caller: Principal, request: SeriesQuery): Promise<SeriesAnswer> {
    const project = authorize(caller, 'traces.read', request.project, readFacts(request));
    const until = request.until ?? this.deps.clock.now();
    const query = { ...request, until, since: request.since ?? until - DAY_MS };
    if (query.since >= until) {
      throw CoreErrors.INVALID_ARGUMENT('since must be before until', {
        details: [{ path: 'since', message: 'must be before until' }],
      });
    }
    if ((until - query.since) / query.bucketMs > MAX_BUCKETS) {
      throw CoreErrors.INVALID_ARGUMENT(
        `the range holds more than ${MAX_BUCKETS} buckets; choose a larger bucket or a shorter range`,
        { details: [{ path: 'bucket', message: `at most ${MAX_BUCKETS} buckets per range` }] },
      );
    }
    const grant = grantFilter(caller, query.labels);
    const { store } = this.deps;
    const records = await store.policies.listAll(project);
    const policies = new Map<string, PolicyMetrics>();
    let longest = DEFAULT_WINDOW_MS;
    for (const record of records) {
      try {
        const compiled = compilePolicy(
          parsePolicy(record.resource),
          project,
          record.generation,
          this.deps.registry,
        );
        policies.set(record.name, compiled);
        for (const ms of compiled.windows.values()) longest = Math.max(longest, ms);
      } catch {
        // A policy this build can no longer compile: its metrics get the default window.
      }
    }
    const from = query.since - Math.min(longest, MAX_WINDOW_MS);
    const buckets =
      grant === undefined
        ? []
        : await store.results.aggregate({
            project,
            ...(query.policy === undefined ? {} : { policy: query.policy }),
            ...(query.evaluator === undefined ? {} : { evaluator: query.evaluator }),
            labels: grant.labels,
            ...(grant.services === undefined ? {} : { services: grant.services }),
            since: from - (from % query.bucketMs),
            until: query.until,
            bucketMs: query.bucketMs,
          });
    const transitions = await store.alerts.transitions(
      project,
      {
        ...(query.policy === undefined ? {} : { policy: query.policy }),
        since: query.since,
        until: query.until,
      },
      MAX_TRANSITIONS,
    );
    return {
      project,
      since: new Date(query.since).toISOString(),
      until: new Date(query.until).toISOString(),
      bucket: durationText(query.bucketMs),
      series: buildSeries({
        buckets,
        since: query.since,
        bucketMs: query.bucketMs,
        policies,
        states: await store.alerts.statesOf(project),
        defaultWindowMs: DEFAULT_WINDOW_MS,
      }),
      transitions: transitions.map(transitionView),
    };
  }

  /**
   * Re-queues every completed trace of the project that started at or after `since` for this
   * policy alone; their results for the policy are replaced when scored again.
   */
  async rescore(
    caller: Principal,
    project: string | undefined,
    name: string,
    since: string,
  ): Promise<{ policy: string; since: string; queued: number }> {
    const from = sinceMs(since, PolicyErrors.POLICY_INVALID);
    return this.audited(caller, 'rescore', project, name, async () => {
      const policy = await this.find(caller, 'write', project, name);
      const { store, clock } = this.deps;
      let queued = 0;
      let after: { startMs: number; traceId: string } | undefined;
      for (;;) {
        const versions = await store.traces.listVersions(policy.project, from, after, RESCORE_PAGE);
        if (versions.length === 0) break;
        const now = clock.now();
        queued += await store.work.enqueue(
          versions.map((v) => ({
            project: policy.project,
            traceId: v.traceId,
            digest: v.digest,
            policy: name,
            replace: true,
            traceCompletedAt: now,
          })),
          now,
        );
        const last = versions.at(-1);
        if (last === undefined || versions.length < RESCORE_PAGE) break;
        after = { startMs: last.startMs, traceId: last.traceId };
      }
      this.deps.onChange?.();
      return { policy: name, since: new Date(from).toISOString(), queued };
    });
  }

  /**
   * Every problem of the resource at once, each once: its shape, CEL, evaluators and params,
   * windows, alerts, the judge and the alert webhooks. A lone unknown judge keeps its own code.
   */
  private async validate(input: unknown): Promise<void> {
    const problems = policyProblems(input, this.deps.registry);
    const spec = specOf(input);
    let judgeError: TouchstoneError | undefined;
    if (spec.judge === undefined || typeof spec.judge === 'string') {
      try {
        this.deps.resolveJudge(spec.judge, 'spec.judge');
      } catch (err) {
        if (!isTouchstoneError(err)) throw err;
        judgeError = err;
      }
    }
    const alerts = Array.isArray(spec.alerts) ? spec.alerts : [];
    for (const [i, alert] of alerts.entries()) {
      const webhook = (alert as { webhook?: unknown } | null)?.webhook;
      if (typeof webhook !== 'string' || !URL.canParse(webhook)) continue;
      try {
        await this.deps.guard.checkTarget(new URL(webhook));
      } catch (err) {
        if (!isTouchstoneError(err)) throw err;
        problems.other.push({ path: `spec.alerts[${i}].webhook`, message: err.message });
      }
    }
    if (judgeError !== undefined) {
      if (problems.cel.length === 0 && problems.other.length === 0) throw judgeError;
      problems.other.push(...judgeError.details);
    }
    throwProblems(problems);
  }
}
