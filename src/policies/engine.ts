import { createHash, randomBytes } from 'node:crypto';
import {
  type EvaluationResult,
  type FailureReason,
  type TraceFacts,
  traceFacts,
} from '../cel/index.js';
import {
  BackgroundLoop,
  backoffMs,
  type Clock,
  type EvalRecord,
  isError,
  isTouchstoneError,
  type Result,
  scoreNumber,
  type TraceRoot,
} from '../core/index.js';
import {
  type EvaluatorInstance,
  type EvaluatorRegistry,
  type Judge,
  JudgeErrors,
  runEvaluator,
} from '../evaluators/index.js';
import { traceSummaryView } from '../ingest/index.js';
import type {
  MetricPoint,
  Store,
  StoredTrace,
  StoreTransaction,
  WorkItem,
} from '../store/index.js';
import type { WebhookEvent } from '../webhooks/index.js';
import { type CompiledPolicy, type CompiledStage, compilePolicy, parsePolicy } from './resource.js';

/** Counters and histograms the engine reports (the HTTP edge turns them into Prometheus metrics). */
export interface PolicyEngineObserver {
  onSelected(project: string, policy: string): void;
  onSampledOut(project: string, policy: string): void;
  onScored(project: string, policy: string, results: readonly Result[]): void;
  /** A CEL evaluation failed; `reason` is `cost` when it ran out of its budget. */
  onExpressionError(project: string, policy: string, field: string, reason: FailureReason): void;
  /** Seconds from trace completion to its results being stored (not for rescores). */
  onFreshness(seconds: number): void;
  onPostponed(reason: 'rate_limited' | 'trace_open'): void;
}

/** Where the engine's events go: the webhook outbox, inside the results transaction. */
export interface PolicyEventSink {
  emitEvent(tx: StoreTransaction, event: WebhookEvent): Promise<string[]>;
  /** Several events in order, as `emitEvent` of each (the webhooks read once per project). */
  emitEvents?(tx: StoreTransaction, events: readonly WebhookEvent[]): Promise<string[]>;
  /** The same event, unsigned, to one URL (a policy's own `alerts[].webhook`). */
  emitToUrl(tx: StoreTransaction, event: WebhookEvent, url: string): Promise<string>;
}

/** Stored results, as a sink sees them (trace sources write them back to their store). */
export interface StoredResults {
  trace: StoredTrace;
  policy: string;
  digest: string;
  results: readonly Result[];
  /** Instance names of the policy's evaluators that ask a judge model. */
  judged: ReadonlySet<string>;
}

/** Something that follows stored results in their own transaction (an outbox of its own). */
export interface ResultSink {
  /** The policies allowed to score traces of this source (undefined = every selecting policy). */
  allowedPolicies?(project: string, source: string): Promise<ReadonlySet<string> | undefined>;
  onStored(tx: StoreTransaction, stored: StoredResults): Promise<void>;
}

export interface PolicyEngineOptions {
  /** Items claimed per round trip. */
  batchSize: number;
  /** Items scored at once (judge stages wait on the network). */
  concurrency: number;
  /** How long a claimed item stays hidden; a worker that died loses it after this. */
  visibilityMs: number;
  /** How often the queue is polled when nothing wakes the engine. */
  pollMs: number;
  /** First delay of an item whose judge is rate limited; doubles per attempt, up to 5 min. */
  rateLimitBackoffMs: number;
}

export const DEFAULT_ENGINE_OPTIONS: PolicyEngineOptions = {
  batchSize: 64,
  concurrency: 8,
  visibilityMs: 60_000,
  pollMs: 250,
  rateLimitBackoffMs: 5_000,
};

export interface PolicyEngineDeps {
  store: Store;
  clock: Clock;
  registry: EvaluatorRegistry;
  /** A judge by name (undefined = the default); undefined when none is configured. */
  judge(name: string | undefined): Judge | undefined;
  events: PolicyEventSink;
  sinks?: readonly ResultSink[];
  observer?: PolicyEngineObserver;
  logger?: { warn(obj: object, msg: string): void };
  options?: Partial<PolicyEngineOptions>;
}

/** An item whose trace is still open is looked at again after this. */
const TRACE_OPEN_DELAY_MS = 5_000;
/** An item whose trace never shows up again (deleted) is dropped after this many claims. */
const MAX_ATTEMPTS = 50;
/** How often policies are re-read to see changes made on other replicas. */
const POLICY_REFRESH_MS = 1_000;
const MAX_BACKOFF_MS = 5 * 60_000;
/** When an item failed on a passing error (database busy), it is looked at again after this. */
const RETRY_SOON_MS = 1_000;
/** Synchronous work on one trace after which the engine lets pending requests run first. */
const MAX_TURN_MS = 10;
/** A failing expression is logged at most this often per policy, field and reason. */
const EXPRESSION_WARN_INTERVAL_MS = 60_000;

/**
 * A batch's scored items are stored together once all are scored, or earlier once the first of
 * them has waited this long (items waiting on a judge must not hold back the others' results).
 */
const FLUSH_AFTER_MS = 100;

/** Thrown inside a results transaction to roll it back when the item's claim was lost. */
class ClaimLost extends Error {}

type Found = { trace: StoredTrace; record: EvalRecord; root?: TraceRoot };

/** What scoring one claimed item came to, before it is stored. */
type Plan =
  /** A newer version has its own item: this one is completed with nothing stored. */
  | { kind: 'stale'; item: WorkItem }
  | {
      kind: 'scored';
      item: WorkItem;
      trace: StoredTrace;
      outcomes: PolicyOutcome[];
      /** A judge asked to wait: the item is postponed (the policies that finished are stored). */
      rateLimited: boolean;
    };

/** The outcome of one policy on one trace version, before it is stored. */
interface PolicyOutcome {
  policy: CompiledPolicy;
  results: Result[];
  judgeTokens: number;
}

/**
 * Deterministic sampling: the same (trace, policy) always falls on the same side of the rate, so
 * a re-scored trace (new digest, another replica, a crash) samples as it did the first time.
 */
export function samplePoint(traceId: string, policy: string): number {
  const hash = createHash('sha256').update(traceId).update('\u0000').update(policy).digest();
  return hash.readUInt32BE(0) / 0x1_0000_0000;
}

/** Pass/fail as 1/0, numbers as is; labels are not numbers. */
function numericScores(results: readonly Result[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of results) {
    if (r.outcome !== 'OUTCOME_SCORED') continue;
    for (const s of r.scores) {
      const n = scoreNumber(s);
      if (n !== undefined) out.set(s.name, n);
    }
  }
  return out;
}

/** Judge tokens a result spent (cached answers spent none). */
function tokensOf(result: Result): number {
  for (const s of result.scores) {
    const m = s.metadata as Record<string, unknown> | undefined;
    if (m === undefined || m.cached === true) continue;
    const input = typeof m.inputTokens === 'number' ? m.inputTokens : 0;
    const output = typeof m.outputTokens === 'number' ? m.outputTokens : 0;
    if (input + output > 0) return input + output;
  }
  return 0;
}

function skipped(instances: readonly EvaluatorInstance[], reason: string): Result[] {
  return instances.map((inst) => ({
    evaluator: inst.name,
    outcome: 'OUTCOME_SKIPPED',
    scores: [],
    reason,
    durationMs: 0,
  }));
}

/**
 * The online scoring engine. Claims work items (one per trace version) from the durable queue,
 * runs every policy of the trace's project that selects it, and stores each policy's results in
 * one transaction with the item's completion, the metric points, alert transitions and the
 * outbox rows of the events they cause. Runs on every replica: claims are exclusive and fenced,
 * results are keyed by (trace, policy, digest), so nothing is scored twice and a crash at any
 * point leaves the item to be claimed again.
 */
export class PolicyEngine {
  private readonly options: PolicyEngineOptions;
  private readonly loop: BackgroundLoop;
  private policies = new Map<string, CompiledPolicy[]>();
  private generations = new Map<string, number>();
  private refreshedAt = Number.NEGATIVE_INFINITY;
  private readonly expressionWarnedAt = new Map<string, number>();

  constructor(private readonly deps: PolicyEngineDeps) {
    this.options = { ...DEFAULT_ENGINE_OPTIONS, ...deps.options };
    this.loop = new BackgroundLoop(
      () => this.tick(),
      this.options.pollMs,
      (err) => this.deps.logger?.warn({ err }, 'online scoring pass failed; retrying'),
    );
  }

  start(): void {
    this.loop.start();
  }

  /** Looks at the queue now (new items were queued); nothing before start() (tests drive tick()). */
  wake(): void {
    this.loop.wake();
  }

  /** Policies changed on this replica: reload before the next item. */
  invalidate(): void {
    this.refreshedAt = Number.NEGATIVE_INFINITY;
  }

  /** Stops claiming and waits for the items in progress. Safe twice and before start. */
  async shutdown(): Promise<void> {
    await this.loop.stop();
  }

  /** Claims and scores items until the queue has nothing visible; returns how many it finished. */
  async tick(): Promise<number> {
    const { store, clock } = this.deps;
    const { batchSize, concurrency, visibilityMs } = this.options;
    let done = 0;
    for (;;) {
      if (this.loop.stopped) return done;
      await this.refreshPolicies();
      const now = clock.now();
      const claim = randomBytes(9).toString('base64url');
      const items = await store.work.claim(now, batchSize, now + visibilityMs, claim);
      if (items.length === 0) return done;
      // One read of the batch's traces and of what is already scored; should it fail, each item
      // reads its own.
      const loaded = await this.load(items).catch((err: unknown) => {
        this.deps.logger?.warn({ err }, 'reading a scoring batch failed; reading item by item');
        return undefined;
      });
      // Scored items wait here to be stored together (see FLUSH_AFTER_MS).
      let ready: Plan[] = [];
      let readySince = 0;
      const flush = async () => {
        const plans = ready;
        ready = [];
        done += await this.commit(plans);
      };
      let next = 0;
      const worker = async () => {
        while (next < items.length) {
          const index = next++;
          const item = items[index] as WorkItem;
          try {
            const plan =
              loaded === undefined
                ? await this.prepare(item, await store.traces.get(item.project, item.traceId))
                : await this.prepare(item, loaded.found[index], loaded.scored[index]);
            if (plan === true) done++;
            else if (plan !== undefined) {
              if (ready.length === 0) readySince = performance.now();
              ready.push(plan);
            }
          } catch (err) {
            await this.failed(item, err);
          }
          if (ready.length > 0 && performance.now() - readySince >= FLUSH_AFTER_MS) await flush();
          // On SQLite every store call settles without leaving the microtask queue: without this
          // a backlog is drained in one go and HTTP (ingest included) waits until it is empty.
          await yieldToEventLoop();
        }
      };
      await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
      if (ready.length > 0) await flush();
      if (items.length < batchSize) return done;
    }
  }

  /** A failed item: logged; a passing failure (the database busy) is looked at again soon. */
  private async failed(item: WorkItem, err: unknown): Promise<void> {
    this.deps.logger?.warn(
      { err, traceId: item.traceId },
      'scoring a trace failed; it will be retried',
    );
    // Anything else, or a failed postpone, waits out the visibility timeout.
    if (isTouchstoneError(err) && err.retryable) {
      await this.deps.store.work
        .postpone(item.id, item.claim, this.deps.clock.now() + RETRY_SOON_MS)
        .catch(() => false);
    }
  }

  /** The batch's traces and the policies that already scored each version, in a few reads. */
  private async load(
    items: readonly WorkItem[],
  ): Promise<{ found: (Found | undefined)[]; scored: (Set<string> | undefined)[] }> {
    const { store } = this.deps;
    const found = await store.traces.getMany(items);
    // Only for what will be scored: a rescore replaces, a stale or missing version is not scored.
    const asked = items.filter(
      (item, i) => !item.replace && found[i]?.trace.digest === item.digest,
    );
    const sets = asked.length === 0 ? [] : await store.results.scoredPoliciesOf(asked);
    const byItem = new Map(asked.map((item, i) => [item, sets[i]]));
    return { found, scored: items.map((item) => byItem.get(item)) };
  }

  private async refreshPolicies(): Promise<void> {
    const now = this.deps.clock.now();
    if (now - this.refreshedAt < POLICY_REFRESH_MS) return;
    this.refreshedAt = now;
    const versions = await this.deps.store.policies.versions();
    const key = (project: string, name: string) => `${project}\u0000${name}`;
    const current = new Map(versions.map((v) => [key(v.project, v.name), v.generation]));
    const changed = new Set<string>();
    for (const v of versions) {
      if (this.generations.get(key(v.project, v.name)) !== v.generation) changed.add(v.project);
    }
    for (const k of this.generations.keys()) {
      if (!current.has(k)) changed.add(k.split('\u0000')[0] as string);
    }
    for (const project of changed) {
      const compiled: CompiledPolicy[] = [];
      for (const record of await this.deps.store.policies.listAll(project)) {
        try {
          const parsed = parsePolicy(record.resource);
          compiled.push(
            compilePolicy(parsed, project, record.generation, this.deps.registry, { stored: true }),
          );
        } catch (err) {
          // Valid at apply, invalid now (an evaluator this build no longer has): skip it, loudly.
          this.deps.logger?.warn(
            { err, project, policy: record.name },
            'policy cannot be compiled; it scores nothing',
          );
        }
      }
      this.policies.set(project, compiled);
    }
    this.generations = current;
  }

  /**
   * Scores one item. Returns what to store, or true when the item is done without a transaction
   * (a trace gone for good), or undefined when it was postponed (the trace is open again).
   */
  private async prepare(
    item: WorkItem,
    found: Found | undefined,
    scoredBefore?: Set<string>,
  ): Promise<Plan | true | undefined> {
    const { store, clock } = this.deps;
    if (found === undefined) {
      // Open again (late spans) or gone: look later; its next completion may bring this digest back.
      if (item.attempts >= MAX_ATTEMPTS) {
        await store.work.complete(item.id, item.claim);
        return true;
      }
      this.deps.observer?.onPostponed('trace_open');
      await store.work.postpone(item.id, item.claim, clock.now() + TRACE_OPEN_DELAY_MS);
      return undefined;
    }
    // A newer version has its own item; this one is stale.
    if (found.trace.digest !== item.digest) return { kind: 'stale', item };

    let policies = this.policies.get(item.project) ?? [];
    if (item.policy !== '') policies = policies.filter((p) => p.name === item.policy);
    if (found.trace.source !== '') {
      for (const sink of this.deps.sinks ?? []) {
        const allowed = await sink.allowedPolicies?.(item.project, found.trace.source);
        if (allowed !== undefined) policies = policies.filter((p) => allowed.has(p.name));
      }
    }
    const scored = item.replace
      ? new Set<string>()
      : (scoredBefore ??
        (await store.results.scoredPolicies(item.project, item.traceId, item.digest)));
    const facts = traceFacts(found.trace, found.record, found.root);

    const outcomes: PolicyOutcome[] = [];
    let rateLimited = false;
    let turn = performance.now();
    for (const policy of policies) {
      if (policy.spec.disabled || scored.has(policy.name)) continue;
      // Each selector is held to its cost budget, but a project's selectors add up on one trace.
      if (performance.now() - turn > MAX_TURN_MS) {
        await yieldToEventLoop();
        turn = performance.now();
      }
      if (!this.selects(policy, item.traceId, facts)) continue;
      const outcome = await this.score(policy, found.record, facts);
      if (outcome === 'rate_limited') rateLimited = true;
      else if (outcome !== undefined) outcomes.push(outcome);
    }
    return { kind: 'scored', item, trace: found.trace, outcomes, rateLimited };
  }

  private selects(policy: CompiledPolicy, traceId: string, facts: TraceFacts): boolean {
    const { observer } = this.deps;
    if (policy.selector !== undefined) {
      const r = policy.selector.evaluate(facts);
      if (!r.ok) this.expressionFailed(policy, 'selector', r);
      if (!r.ok || !r.value) return false;
    }
    observer?.onSelected(policy.project, policy.name);
    const always = policy.always.some((cond, i) => {
      if (cond.kind === 'error') return facts.error;
      const r = cond.expression.evaluate(facts);
      if (!r.ok) this.expressionFailed(policy, `sampling.always[${i}]`, r);
      return r.ok && r.value;
    });
    if (always || samplePoint(traceId, policy.name) < policy.rate) return true;
    observer?.onSampledOut(policy.project, policy.name);
    return false;
  }

  /**
   * Counts a failed evaluation and logs it, at most once a minute per policy, field and reason
   * (a failing selector fails on every trace). The error text never quotes trace content.
   */
  private expressionFailed(
    policy: CompiledPolicy,
    field: string,
    r: Extract<EvaluationResult, { ok: false }>,
  ): void {
    this.deps.observer?.onExpressionError(policy.project, policy.name, field, r.reason);
    const key = `${policy.project}\u0000${policy.name}\u0000${field}\u0000${r.reason}`;
    const now = this.deps.clock.now();
    const last = this.expressionWarnedAt.get(key);
    if (last !== undefined && now - last < EXPRESSION_WARN_INTERVAL_MS) return;
    this.expressionWarnedAt.set(key, now);
    this.deps.logger?.warn(
      { project: policy.project, policy: policy.name, field, reason: r.reason, error: r.error },
      r.reason === 'cost'
        ? 'policy expression ran out of its cost budget; it counts as failed'
        : 'policy expression failed; it counts as failed',
    );
  }

  /** Runs the policy's stages in order; 'rate_limited' when a judge asked to wait. */
  private async score(
    policy: CompiledPolicy,
    record: EvalRecord,
    facts: TraceFacts,
  ): Promise<PolicyOutcome | 'rate_limited' | undefined> {
    const results: Result[] = [];
    let judgeTokens = 0;
    let rateLimited = false;
    const onError = (err: unknown, inst: EvaluatorInstance) => {
      if (isError(err, JudgeErrors.JUDGE_RATE_LIMITED)) rateLimited = true;
      else
        this.deps.logger?.warn(
          { err, policy: policy.name, evaluator: inst.name },
          'evaluator failed',
        );
    };
    for (const stage of policy.stages) {
      const gate = await this.stageGate(policy, stage, results, facts);
      if (gate !== undefined) {
        results.push(...skipped(stage.instances, gate));
        continue;
      }
      const judge = stage.needsJudge ? this.deps.judge(policy.spec.judge) : undefined;
      const ctx = judge === undefined ? {} : { judge };
      const cheap = stage.instances.filter((inst) => !inst.needsJudge);
      const costly = stage.instances.filter((inst) => inst.needsJudge);
      for (const inst of cheap)
        results.push(await runEvaluator(record, inst, ctx, undefined, onError));
      const judged = await Promise.all(
        costly.map((inst) => runEvaluator(record, inst, ctx, undefined, onError)),
      );
      if (rateLimited) return 'rate_limited';
      for (const r of judged) judgeTokens += tokensOf(r);
      results.push(...judged);
    }
    return { policy, results, judgeTokens };
  }

  /** Why a stage does not run (its `when` is false or failed, or the judge budget is spent). */
  private async stageGate(
    policy: CompiledPolicy,
    stage: CompiledStage,
    earlier: readonly Result[],
    facts: TraceFacts,
  ): Promise<string | undefined> {
    if (stage.when !== undefined) {
      const scores = Object.fromEntries(numericScores(earlier));
      const r = stage.when.evaluate(facts, scores);
      if (!r.ok) {
        this.expressionFailed(policy, `stages[${stage.index}].when`, r);
        return `stage ${stage.index} condition failed: ${r.error}`;
      }
      if (!r.value) return `stage ${stage.index} condition is false`;
    }
    const budget = policy.spec.dailyJudgeTokens;
    if (stage.needsJudge && budget !== undefined) {
      const used = await this.deps.store.budgets.used(
        policy.project,
        policy.name,
        utcDay(this.deps.clock.now()),
      );
      if (used >= budget) return 'budget';
    }
    return undefined;
  }

  /**
   * Stores scored items, all in one transaction; when that fails (one item's results or sink
   * refused, the database busy) each in its own, so one item cannot hold back the others.
   * Returns how many were finished (stored or completed, not postponed).
   */
  private async commit(plans: readonly Plan[]): Promise<number> {
    const finished = (p: Plan) => p.kind === 'stale' || !p.rateLimited;
    if (plans.length > 1) {
      try {
        await this.storeBatch(plans);
        return plans.filter(finished).length;
      } catch (err) {
        this.deps.logger?.warn(
          { err, items: plans.length },
          'storing a scoring batch failed; storing its items one by one',
        );
      }
    }
    let done = 0;
    for (const plan of plans) {
      try {
        if (plan.kind === 'stale')
          await this.deps.store.work.complete(plan.item.id, plan.item.claim);
        else await this.store(plan.item, plan.trace, plan.outcomes, plan.rateLimited);
        if (finished(plan)) done++;
      } catch (err) {
        await this.failed(plan.item, err);
      }
    }
    return done;
  }

  /**
   * One transaction for a batch of items. First the items whose claim still holds are locked
   * (another replica that claimed one since stores it, not us); only theirs are written: each
   * policy's results (unless another worker stored them first), in a few multi-row statements,
   * then per stored policy what `store` writes, then the completions and postponements.
   */
  private async storeBatch(plans: readonly Plan[]): Promise<void> {
    const { store, clock, events, observer } = this.deps;
    const now = clock.now();
    type Entry = { plan: Extract<Plan, { kind: 'scored' }>; outcome: PolicyOutcome };
    let live: Plan[] = [];
    let stored: Entry[] = [];
    await store.withTransaction(async (tx) => {
      const held = await tx.work.holding(plans.map((p) => p.item));
      live = plans.filter((p) => held.has(p.item.id));
      stored = [];
      const entries: Entry[] = live.flatMap((plan) =>
        plan.kind === 'scored' ? plan.outcomes.map((outcome) => ({ plan, outcome })) : [],
      );
      const version = ({ plan: { item }, outcome }: Entry) => ({
        project: item.project,
        traceId: item.traceId,
        policy: outcome.policy.name,
        digest: item.digest,
        results: outcome.results,
        scoredAt: now,
      });
      const fresh = entries.filter((e) => !e.plan.item.replace);
      const inserted = await tx.results.insertMany(fresh.map(version));
      const ok = new Set(fresh.filter((_, i) => inserted[i]));
      for (const e of entries) {
        if (e.plan.item.replace && (await tx.results.insert(version(e), true))) ok.add(e);
      }
      // `trace.scored` events wait to be written together; an alert's events are written in
      // their place, so the outbox holds every event in the order `store` would write them.
      let scoredEvents: WebhookEvent[] = [];
      const flushEvents = async () => {
        if (scoredEvents.length === 0) return;
        const batch = scoredEvents;
        scoredEvents = [];
        if (events.emitEvents !== undefined) await events.emitEvents(tx, batch);
        else for (const event of batch) await events.emitEvent(tx, event);
      };
      for (const e of entries) {
        if (!ok.has(e)) continue;
        stored.push(e);
        await this.afterStored(tx, e.plan.item, e.plan.trace, e.outcome, now, {
          scored: async (event) => {
            scoredEvents.push(event);
          },
          beforeAlerts: flushEvents,
        });
      }
      await flushEvents();
      const completing = live.filter((p) => p.kind === 'stale' || !p.rateLimited);
      const completed = await tx.work.completeAll(completing.map((p) => p.item));
      if (completed.size !== completing.length) throw new ClaimLost();
      for (const p of live) {
        if (p.kind !== 'scored' || !p.rateLimited) continue;
        const { item } = p;
        if (!(await tx.work.postpone(item.id, item.claim, now + this.backoff(item.attempts))))
          throw new ClaimLost();
      }
    });
    for (const p of live)
      if (p.kind === 'scored' && p.rateLimited) observer?.onPostponed('rate_limited');
    const fresh = new Set<WorkItem>();
    for (const { plan, outcome } of stored) {
      observer?.onScored(plan.item.project, outcome.policy.name, outcome.results);
      if (!plan.item.replace) fresh.add(plan.item);
    }
    for (const item of fresh)
      observer?.onFreshness(Math.max(0, now - item.traceCompletedAt) / 1000);
  }

  /**
   * What follows one policy's stored results in their transaction: the judge tokens spent, the
   * `trace.scored` event, metric points and alert transitions, and the sinks (write-backs).
   */
  private async afterStored(
    tx: StoreTransaction,
    item: WorkItem,
    trace: StoredTrace,
    outcome: PolicyOutcome,
    now: number,
    emit: {
      scored(event: WebhookEvent): Promise<unknown>;
      beforeAlerts(): Promise<void>;
    },
  ): Promise<void> {
    const { policy, results } = outcome;
    if (outcome.judgeTokens > 0) {
      await tx.budgets.add(item.project, policy.name, utcDay(now), outcome.judgeTokens);
    }
    await emit.scored({
      type: 'trace.scored',
      project: item.project,
      policy: policy.name,
      trace: traceSummaryView(trace),
      results,
    });
    if (policy.alerts.length > 0) await emit.beforeAlerts();
    await this.updateAlerts(tx, policy, results, now);
    const judged = new Set(
      policy.stages.flatMap((s) => s.instances.filter((i) => i.needsJudge).map((i) => i.name)),
    );
    for (const sink of this.deps.sinks ?? []) {
      await sink.onStored(tx, {
        trace,
        policy: policy.name,
        digest: item.digest,
        results,
        judged,
      });
    }
  }

  /**
   * One item in its own transaction (the fallback of `storeBatch`): each policy's results
   * (unless another worker stored them first), what follows them, then the item's completion —
   * or its postponement when a judge was rate limited. A lost claim rolls everything back.
   */
  private async store(
    item: WorkItem,
    trace: StoredTrace,
    outcomes: readonly PolicyOutcome[],
    rateLimited: boolean,
  ): Promise<void> {
    const { store, clock, events, observer } = this.deps;
    const now = clock.now();
    const stored: PolicyOutcome[] = [];
    try {
      await store.withTransaction(async (tx) => {
        for (const outcome of outcomes) {
          const { policy, results } = outcome;
          const inserted = await tx.results.insert(
            {
              project: item.project,
              traceId: item.traceId,
              policy: policy.name,
              digest: item.digest,
              results,
              scoredAt: now,
            },
            item.replace,
          );
          if (!inserted) continue;
          stored.push(outcome);
          await this.afterStored(tx, item, trace, outcome, now, {
            scored: (event) => events.emitEvent(tx, event),
            beforeAlerts: async () => {},
          });
        }
        const ok = rateLimited
          ? await tx.work.postpone(item.id, item.claim, now + this.backoff(item.attempts))
          : await tx.work.complete(item.id, item.claim);
        if (!ok) throw new ClaimLost();
      });
    } catch (err) {
      if (err instanceof ClaimLost) return;
      throw err;
    }
    if (rateLimited) observer?.onPostponed('rate_limited');
    for (const { policy, results } of stored)
      observer?.onScored(item.project, policy.name, results);
    if (stored.length > 0 && !item.replace)
      observer?.onFreshness(Math.max(0, now - item.traceCompletedAt) / 1000);
  }

  /** Adds the alerted metrics' points and applies each alert's transition, if any. */
  private async updateAlerts(
    tx: StoreTransaction,
    policy: CompiledPolicy,
    results: readonly Result[],
    now: number,
  ): Promise<void> {
    if (policy.alerts.length === 0) return;
    const values = numericScores(results);
    const points: MetricPoint[] = [];
    for (const alert of policy.alerts) {
      const value = values.get(alert.metric);
      if (value !== undefined) {
        points.push({
          project: policy.project,
          policy: policy.name,
          metric: alert.metric,
          at: now,
          value,
        });
      }
    }
    if (points.length === 0) return;
    await tx.alerts.addPoints(points);
    for (const alert of policy.alerts) {
      if (!values.has(alert.metric)) continue;
      const state = await tx.alerts.lockState(policy.project, policy.name, alert.metric);
      await tx.alerts.trimWindow(policy.project, policy.name, alert.metric, now - alert.windowMs);
      const { mean, n } = await tx.alerts.window(
        policy.project,
        policy.name,
        alert.metric,
        now - alert.windowMs,
      );
      const wasFiring = state?.firing ?? false;
      let firing = wasFiring;
      if (n >= alert.minSamples) firing = mean < alert.below;
      await tx.alerts.saveState({
        project: policy.project,
        policy: policy.name,
        metric: alert.metric,
        firing,
        mean,
        n,
        changedAt: firing === wasFiring && state !== undefined ? state.changedAt : now,
      });
      if (firing === wasFiring) continue;
      await tx.alerts.addTransition({
        project: policy.project,
        policy: policy.name,
        metric: alert.metric,
        at: now,
        firing,
        mean,
        n,
        below: alert.below,
      });
      const event: WebhookEvent = {
        type: firing ? 'alert.fired' : 'alert.resolved',
        project: policy.project,
        policy: policy.name,
        alert: {
          policy: policy.name,
          metric: alert.metric,
          firing,
          mean,
          n,
          below: alert.below,
          at: new Date(now).toISOString(),
        },
      };
      await this.deps.events.emitEvent(tx, event);
      if (alert.webhook !== undefined) await this.deps.events.emitToUrl(tx, event, alert.webhook);
    }
  }

  /** The schedule docs/policies.md states (5 s doubling to 5 min): no jitter. */
  private backoff(attempts: number): number {
    return backoffMs(attempts, {
      baseMs: this.options.rateLimitBackoffMs,
      maxMs: MAX_BACKOFF_MS,
      jitter: 'none',
    });
  }
}

/** Lets timers and I/O (pending requests) run before the next item. */
function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** `2026-11-22`: the judge budget's day. */
function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}
