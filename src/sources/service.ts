import { type AuditLogger, authorize, type Principal } from '../auth/index.js';
import { type Clock, isTouchstoneError, TouchstoneError } from '../core/index.js';
import type { OutboundGuard } from '../net/index.js';
import type { PolicySink } from '../policies/index.js';
import type { ApplyOptions } from '../resources/index.js';
import { ResourceService, sinceMs } from '../resources/index.js';
import type { DeadLetter, SourceRecord, SourceState, Store } from '../store/index.js';
import type { ConnectorRegistry } from './connectors/index.js';
import { SOURCE_RESOURCE } from './descriptor.js';
import { SourceErrors } from './error-codes.js';
import { type ParsedSource, parseSource, sourceResource, sourceView } from './resource.js';
import { windowsAt } from './schedule.js';
import { initialSchedule } from './scheduler.js';
import { sinkSource } from './sinks.js';
import type { SourcePhase } from './states.js';

/** What the service needs of credential grants (src/net's resolver fits it). */
export interface GrantCheck {
  /** Throws a TouchstoneError naming the credential (never its value) when it is not granted. */
  check(ref: { env: string } | { file: string }, project: string, host: string): void;
}

export interface SourceServiceDeps {
  store: Store;
  clock: Clock;
  /** The sources' outbound guard (https, `sources.allow_hosts`): DNS-free checks at apply. */
  guard: Pick<OutboundGuard, 'checkTarget'>;
  grants: GrantCheck;
  /** Connectors this build can pull from; others are refused as not supported yet. */
  supported(connector: string, variant: string | undefined): boolean;
  /** The declarations specs are validated against; this build's by default. */
  connectors?: ConnectorRegistry;
  logger: AuditLogger;
  /**
   * Checks a scheduled source's run spec as a run `caller` creates in `project` would be checked
   * (`runs.create`, evaluators, judge, gates, grants), throwing what creating it would. Absent:
   * this build cannot run scheduled windows, and scheduled sources are refused.
   */
  checkRunSpec?(
    caller: Principal,
    runSpec: Record<string, unknown>,
    project: string,
  ): Promise<void>;
  /** A source changed (applied, paused, resumed, backfilled): the manager looks at once. */
  onChange?: () => void;
}

export type SourceView = Record<string, unknown>;

/** The status a source shows (get; the list view's columns come from it). */
export interface SourceStatus {
  phase: SourcePhase;
  /** Seconds since the last complete pull began; null before the first one. */
  lagSeconds: number | null;
  recordsPerSecond: number;
  /** RFC 3339: every trace that started before it is handled. */
  watermark: string;
  /** Traces the store still reports running. */
  deferred: number;
  lastError?: string;
  lastWriteBack?: string;
  pulled: number;
  scored: number;
  /** Write-backs the store refused for good (not retried), since the source was created. */
  deadLetters: number;
  /** The newest few of them, newest first; absent when there are none. */
  lastDeadLetters?: DeadLetterView[];
  /** Scheduled mode: when the last window was evaluated or found empty (RFC 3339). */
  lastScheduledAt?: string;
  /** Scheduled mode: the run of the last window that had traces. */
  lastRunId?: string;
  /** Scheduled mode: windows whose starting deadline passed before they were evaluated. */
  missedWindows?: number;
}

/** A dead-lettered write-back as the status shows it (`at`: RFC 3339). */
export type DeadLetterView = Omit<DeadLetter, 'id' | 'project' | 'source' | 'failedAt'> & {
  at: string;
};

const DEFERRED_COUNT_CAP = 10_000;
/** Dead letters shown in the status; `deadLetters` counts them all. */
const DEAD_LETTERS_SHOWN = 5;

/**
 * The TraceSource resource's operations (REST and CLI): the kit's apply, get, list and delete,
 * plus pause, resume and backfill. A source's pull state lives beside it in the database, written
 * by whichever replica holds the source's lease.
 */
export class SourceService extends ResourceService<
  ParsedSource,
  SourceRecord,
  SourceView,
  SourceView & { created?: boolean }
> {
  constructor(private readonly deps: SourceServiceDeps) {
    super(SOURCE_RESOURCE, deps, deps.store.sources);
  }

  protected parse(input: unknown): ParsedSource {
    return parseSource(input, this.deps.connectors);
  }

  /**
   * A scheduled source creates runs in its project: applying one needs what creating its run
   * needs too, checked with the caller's own permissions before anything is stored.
   */
  override async apply(caller: Principal, input: unknown, options: ApplyOptions = {}) {
    const parsed = this.parse(input);
    const { runSpec } = parsed.spec;
    if (runSpec !== undefined) {
      const project = authorize(caller, 'sources.write', parsed.project ?? options.project);
      await this.checkRunSpec(caller, runSpec, project);
    }
    return super.apply(caller, input, options);
  }

  private async checkRunSpec(
    caller: Principal,
    runSpec: Record<string, unknown>,
    project: string,
  ): Promise<void> {
    const { checkRunSpec } = this.deps;
    if (checkRunSpec === undefined) {
      throw SourceErrors.SOURCE_INVALID('invalid source: scheduled mode is not available here', {
        details: [{ path: 'spec.schedule', message: 'this server does not run scheduled sources' }],
      });
    }
    try {
      await checkRunSpec(caller, runSpec, project);
    } catch (err) {
      if (!isTouchstoneError(err) || err.kind !== 'invalid_argument') throw err;
      const details = (
        err.details.length > 0 ? err.details : [{ path: '(root)', message: err.message }]
      ).map((d) => ({
        path: d.path === '(root)' ? 'spec.runSpec' : `spec.runSpec.${d.path}`,
        message: d.message,
      }));
      throw SourceErrors.SOURCE_INVALID(
        `invalid source: ${details.map((d) => `${d.path}: ${d.message}`).join('; ')}`,
        { details },
      );
    }
  }

  protected preview(
    source: ParsedSource,
    project: string,
    existing: SourceRecord | undefined,
    now: string,
  ): SourceView {
    return sourceView({
      project,
      name: source.name,
      resource: sourceResource(source, project),
      generation: existing?.generation ?? 0,
      paused: existing?.paused ?? false,
      createdAt: existing?.createdAt ?? now,
      updatedAt: now,
    });
  }

  protected async write(source: ParsedSource, project: string, now: number) {
    const out = await this.deps.store.withTransaction(async (tx) => {
      const stored = await tx.sources.upsert(
        project,
        source.name,
        sourceResource(source, project),
        now,
      );
      // A new source starts its watermark at its backfill horizon; a replaced one keeps its own
      // (use :backfill to read history again). A scheduled one starts its windows now, and keeps
      // its cursor when applied again.
      const state = await tx.sources.getState(project, source.name);
      if (state === undefined) {
        const since = source.spec.backfill?.since ?? 0;
        const fresh = initialState(project, source.name, now, since, source.spec.maxTraceDuration);
        await tx.sources.saveState(
          source.spec.schedule === undefined ? fresh : { ...fresh, schedule: initialSchedule(now) },
        );
      } else if (source.spec.schedule !== undefined) {
        // Looked at again at once: a changed cron may make a window due sooner.
        await tx.sources.saveState({
          ...state,
          schedule: state.schedule ?? initialSchedule(now),
          nextPullAt: now,
        });
      }
      return stored;
    });
    return { ...(await this.view(out.source)), created: out.created };
  }

  protected notFound(project: string, name: string) {
    return SourceErrors.SOURCE_NOT_FOUND(`no source "${name}" in project "${project}"`);
  }

  async pause(caller: Principal, project: string | undefined, name: string): Promise<SourceView> {
    return this.setPaused(caller, project, name, true);
  }

  async resume(caller: Principal, project: string | undefined, name: string): Promise<SourceView> {
    return this.setPaused(caller, project, name, false);
  }

  /**
   * Reads history again from `since`: the watermark moves back (never forward) and the source
   * backfills up to now; only traces whose content changed are scored again.
   */
  async backfill(
    caller: Principal,
    project: string | undefined,
    name: string,
    since: string,
  ): Promise<SourceView> {
    const from = sinceMs(since, SourceErrors.SOURCE_INVALID);
    return this.audited(caller, 'backfill', project, name, async () => {
      const source = await this.find(caller, 'write', project, name);
      const now = this.deps.clock.now();
      const { maxTraceDuration } = parseSource(source.resource, this.deps.connectors).spec;
      await this.deps.store.withTransaction(async (tx) => {
        const state = await tx.sources.getState(source.project, name);
        const base = state ?? initialState(source.project, name, now, 0, 0);
        await tx.sources.saveState({
          ...base,
          watermark: Math.min(base.watermark, from),
          // The horizon a complete pull's watermark reaches (it trails the pull's start by
          // maxTraceDuration), as for a new source: history re-read once is `tailing` again.
          backfillUntil: now - maxTraceDuration,
          phase: 'backfilling',
          nextPullAt: now,
        });
      });
      this.deps.onChange?.();
      return this.view(source);
    });
  }

  private async setPaused(
    caller: Principal,
    project: string | undefined,
    name: string,
    paused: boolean,
  ) {
    return this.audited(caller, paused ? 'pause' : 'resume', project, name, async () => {
      const source = await this.find(caller, 'write', project, name);
      await this.deps.store.sources.setPaused(source.project, name, paused, this.deps.clock.now());
      this.deps.onChange?.();
      return this.get(caller, source.project, name);
    });
  }

  /**
   * Checks a policy's `trace_feedback` sink as a source writing back to the same store would be
   * checked (connector fields, write-back capability, endpoint rules, credential grant), with the
   * fields named under `path` (`spec.sinks[0]`).
   */
  async checkSink(sink: PolicySink, project: string, path: string): Promise<void> {
    try {
      await this.check(sinkSource('sink', sink, this.deps.connectors), project);
    } catch (err) {
      if (!isTouchstoneError(err)) throw err;
      const under = (p: string) =>
        p === 'spec.writeBack.enabled' ? `${path}.connector` : p.replace(/^spec\b/, path);
      const details =
        err.details.length > 0
          ? err.details.map((d) => ({ ...d, path: under(d.path) }))
          : [{ path, message: err.message }];
      // The same error (code, kind), its fields named where the policy holds them.
      const { code, kind, retryable } = err;
      throw new TouchstoneError(
        { code, kind, retryable, doc: '' },
        err.message.replace(/^invalid source/, 'invalid sink'),
        { details },
      );
    }
  }

  /** Everything the shape cannot say: support, endpoint, credential grant, policies. */
  protected async check(source: ParsedSource, project: string): Promise<void> {
    const { spec } = source;
    if (!this.deps.supported(spec.connector, spec.variant)) {
      const what =
        spec.variant === undefined ? `connector "${spec.connector}"` : `variant "${spec.variant}"`;
      throw SourceErrors.SOURCE_NOT_SUPPORTED_YET(
        `${what} is valid but not supported by this version yet`,
        {
          details: [
            {
              path: spec.variant === undefined ? 'spec.connector' : 'spec.variant',
              message: 'not supported yet',
            },
          ],
        },
      );
    }
    const url = new URL(spec.endpoint);
    try {
      await this.deps.guard.checkTarget(url);
    } catch (err) {
      if (!isTouchstoneError(err)) throw err;
      throw SourceErrors.SOURCE_ENDPOINT_REFUSED(err.message, {
        details: [{ path: 'spec.endpoint', message: err.message }],
      });
    }
    if (spec.credentials !== undefined)
      this.deps.grants.check(spec.credentials, project, url.hostname);
    for (const [i, policy] of spec.policies.entries()) {
      if ((await this.deps.store.policies.get(project, policy)) === undefined) {
        throw SourceErrors.SOURCE_POLICY_NOT_FOUND(
          `no policy "${policy}" in project "${project}"`,
          {
            details: [{ path: `spec.policies[${i}]`, message: `apply policy "${policy}" first` }],
          },
        );
      }
    }
  }

  /** The resource with its status. */
  async view(record: SourceRecord): Promise<SourceView> {
    const state = await this.deps.store.sources.getState(record.project, record.name);
    const deferred =
      state === undefined
        ? 0
        : (await this.deps.store.sources.deferred(record.project, record.name, DEFERRED_COUNT_CAP))
            .length;
    const letters =
      state === undefined || state.deadLetters === 0
        ? []
        : await this.deps.store.sources.deadLetters(
            record.project,
            record.name,
            DEAD_LETTERS_SHOWN,
          );
    const now = this.deps.clock.now();
    return sourceView(record, {
      ...status(record, state, deferred, now),
      ...scheduleStatus(record, state, now, this.deps.connectors),
      ...(letters.length === 0
        ? {}
        : {
            lastDeadLetters: letters.map((l) => ({
              traceId: l.traceId,
              policy: l.policy,
              metric: l.metric,
              attempts: l.attempts,
              code: l.code,
              message: l.message,
              at: new Date(l.failedAt).toISOString(),
            })),
          }),
    });
  }
}

/**
 * A scheduled source's fields of the status; `missedWindows` counts the deadlines that passed
 * while nothing looked (paused, no replica pulling) too, as the scheduler will when it looks.
 */
function scheduleStatus(
  record: SourceRecord,
  state: SourceState | undefined,
  now: number,
  connectors: ConnectorRegistry | undefined,
): Partial<SourceStatus> {
  const progress = state?.schedule;
  if (progress === undefined) return {};
  let schedule: ParsedSource['spec']['schedule'];
  try {
    schedule = parseSource(record.resource, connectors).spec.schedule;
  } catch {
    // A stored source this build no longer reads shows what it has.
    return { missedWindows: progress.missedWindows };
  }
  if (schedule === undefined) return {};
  return {
    missedWindows: progress.missedWindows + windowsAt(schedule, progress.cursor, now).missed,
    ...(progress.lastScheduledAt === undefined
      ? {}
      : { lastScheduledAt: new Date(progress.lastScheduledAt).toISOString() }),
    ...(progress.lastRunId === undefined ? {} : { lastRunId: progress.lastRunId }),
  };
}

/** A new source's state: watermark at its backfill horizon, due at once. */
export function initialState(
  project: string,
  name: string,
  now: number,
  backfillMs: number,
  maxTraceDurationMs: number,
): SourceState {
  return {
    project,
    name,
    watermark: now - backfillMs,
    backfillUntil: backfillMs > 0 ? now - maxTraceDurationMs : now - backfillMs,
    phase: backfillMs > 0 ? 'backfilling' : 'tailing',
    nextPullAt: now,
    failures: 0,
    pulled: 0,
    scored: 0,
    recordsPerSecond: 0,
    deadLetters: 0,
  };
}

export function status(
  record: SourceRecord,
  state: SourceState | undefined,
  deferred: number,
  now: number,
): SourceStatus {
  const phase = record.paused ? 'paused' : (state?.phase ?? 'backfilling');
  return {
    phase,
    lagSeconds:
      state?.lastCompleteStartAt === undefined
        ? null
        : Math.max(0, Math.round((now - state.lastCompleteStartAt) / 1000)),
    recordsPerSecond: state?.recordsPerSecond ?? 0,
    watermark: new Date(state?.watermark ?? now).toISOString(),
    deferred,
    ...(state?.lastError === undefined ? {} : { lastError: state.lastError }),
    ...(state?.lastWriteBackAt === undefined
      ? {}
      : { lastWriteBack: new Date(state.lastWriteBackAt).toISOString() }),
    pulled: state?.pulled ?? 0,
    scored: state?.scored ?? 0,
    deadLetters: state?.deadLetters ?? 0,
  };
}
