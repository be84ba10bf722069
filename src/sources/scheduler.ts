import {
  type BackoffPolicy,
  backoffMs,
  type Clock,
  CoreErrors,
  type EvalRecord,
  isTouchstoneError,
  type NormalizedTrace,
} from '../core/index.js';
import type { PulledTrace } from '../ingest/index.js';
import { isFinal } from '../runs/index.js';
import type { ScheduleState, SourceRecord, SourceState, Store } from '../store/index.js';
import type { TraceHeader, TraceStoreConnector } from './connector.js';
import { failureText, loggedError, type RedactText } from './error-text.js';
import { withResource } from './pulled-trace.js';
import type { ParsedSource } from './resource.js';
import {
  type DueWindow,
  MAX_SNAPSHOT_BYTES,
  windowRunId,
  windowRunName,
  windowsAt,
} from './schedule.js';

/**
 * Scheduled mode: at each due window of a source's cron, the window's traces are listed and
 * fetched through the connector, redacted and normalized, and evaluated as an ordinary batch run
 * of the source's `runSpec` (the records are the run's dataset: the snapshot). The run and the
 * moved cursor commit in one transaction, under an id derived from the window, so a window is
 * evaluated once whoever retries it. Only a complete fetch moves the cursor; a window whose
 * starting deadline passes first (a slow or failing store, the source paused, the previous run
 * still going) is counted in `missedWindows` and skipped, never piled up.
 */

/** Labels of a scheduled window's run. */
export const WINDOW_LABELS = {
  source: 'touchstone.dev/source',
  start: 'touchstone.dev/window-start',
  end: 'touchstone.dev/window-end',
  /** `maxRecords` or `snapshot-bytes`: the window had more traces than the run holds. */
  truncated: 'touchstone.dev/window-truncated',
} as const;

/** A failed window fetch waits as a failed pull does: 5 s doubling to 5 min. */
const FETCH_BACKOFF: BackoffPolicy = { baseMs: 5_000, maxMs: 5 * 60_000, jitter: 'none' };

export interface WindowSchedulerDeps {
  store: Store;
  clock: Clock;
  connector(
    source: ParsedSource,
    project: string,
  ): Promise<TraceStoreConnector> | TraceStoreConnector;
  /** The record of a pulled trace, redacted and normalized, nothing stored. */
  snapshot(
    trace: PulledTrace,
    adjust?: (n: NormalizedTrace) => NormalizedTrace,
  ): Promise<EvalRecord>;
  overrides?(source: ParsedSource): ((n: NormalizedTrace) => NormalizedTrace) | undefined;
  /** A window's run was created: the executor looks at once. */
  onRunCreated?(): void;
  logger?: { warn(obj: object, msg: string): void };
  redactText: RedactText;
  pageSize: number;
}

/** How one step runs: under a lease `renew` keeps, stopped by `stop`, within `budgetMs`. */
export interface WindowStepControl {
  renew: () => Promise<boolean>;
  stop: AbortSignal;
  /** The fetch's time budget: a pull's (90 s), longer for a store that runs long searches. */
  budgetMs: number;
}

/** What one fetch of a window gave. */
interface WindowFetch {
  records: EvalRecord[];
  /** Why the snapshot stops short of the window's traces. */
  truncated?: 'maxRecords' | 'snapshot-bytes';
  /** Traces the store still reports running (younger than `maxInProgressAge`). */
  running: number;
}

/** A scheduled source's state at apply: windows that end after `now` are its first. */
export function initialSchedule(now: number): ScheduleState {
  return { cursor: now, missedWindows: 0 };
}

export class WindowScheduler {
  constructor(private readonly deps: WindowSchedulerDeps) {}

  /**
   * Handles the window due now, if any, for a source whose lease `control.renew` keeps: counts
   * missed windows, waits for the previous run, fetches, and creates the run with the moved cursor.
   */
  async step(
    record: SourceRecord,
    source: ParsedSource,
    initial: SourceState,
    control: WindowStepControl,
  ): Promise<void> {
    const { renew, stop, budgetMs } = control;
    const { clock, store } = this.deps;
    const { schedule, poll } = source.spec;
    if (schedule === undefined) return;
    const now = clock.now();
    const at = windowsAt(schedule, (initial.schedule ?? initialSchedule(now)).cursor, now);
    let state: SourceState = withSchedule(initial, now, {
      cursor: at.cursor,
      missedWindows: (initial.schedule?.missedWindows ?? 0) + at.missed,
    });
    const due = at.due;
    if (due === undefined) {
      await store.sources.saveState({ ...state, nextPullAt: at.nextAt ?? now + poll.interval });
      return;
    }
    const deadline = due.endMs + schedule.startingDeadline;
    // Looked at again no later than just past the deadline, when the window counts as missed.
    const retryAt = Math.min(now + poll.interval, deadline + 1);
    if (await this.previousRunGoing(state.schedule)) {
      await store.sources.saveState({ ...state, nextPullAt: retryAt });
      return;
    }
    const budget = AbortSignal.any([stop, AbortSignal.timeout(budgetMs)]);
    let fetched: WindowFetch | undefined;
    try {
      fetched = await this.fetchWindow(record.project, source, due, renew, budget);
    } catch (err) {
      if (stop.aborted) return;
      state = this.failed(state, err, budget.aborted ? budgetMs : undefined, now);
      await store.sources.saveState({
        ...state,
        nextPullAt: Math.min(state.nextPullAt, deadline + 1),
      });
      return;
    }
    if (fetched === undefined) return; // the lease went to another replica
    const done = clock.now();
    const { lastError: _cleared, ...ok } = state;
    state = { ...ok, phase: 'tailing', failures: 0, lastPullAt: done };
    if (done > deadline) {
      await store.sources.saveState(
        withSchedule(
          {
            ...state,
            lastError: `the window ending ${iso(due.endMs)} was missed: its fetch ended after the starting deadline`,
          },
          done,
          { cursor: due.endMs, missedWindows: (state.schedule?.missedWindows ?? 0) + 1 },
        ),
      );
      return;
    }
    if (fetched.running > 0) {
      await store.sources.saveState({
        ...state,
        lastError: `the window ending ${iso(due.endMs)} has ${fetched.running} traces still running; fetched again until its starting deadline`,
        nextPullAt: Math.min(done + poll.interval, deadline + 1),
      });
      return;
    }
    await this.evaluate(record, source, state, due, fetched, done);
  }

  /** Commits the window: its run (when it has traces) and the cursor past it, together. */
  private async evaluate(
    record: SourceRecord,
    source: ParsedSource,
    state: SourceState,
    due: DueWindow,
    fetched: WindowFetch,
    now: number,
  ): Promise<void> {
    const { store } = this.deps;
    const previous = state.schedule ?? initialSchedule(now);
    const moved: ScheduleState = { ...previous, cursor: due.endMs, lastScheduledAt: now };
    // The next window may be due already (a minutely cron after a slow fetch): looked at at once.
    const next = { ...state, recordsPerSecond: 0, lastCompleteStartAt: now, nextPullAt: now };
    if (fetched.records.length === 0) {
      await store.sources.saveState({ ...next, schedule: moved });
      return;
    }
    const id = windowRunId(record.project, record.name, record.createdAt, due);
    const commit = () =>
      store.withTransaction(async (tx) => {
        // Already there when another holder of the source (a restart, a lapsed lease) evaluated it.
        if ((await tx.runs.get(id, { spec: false })) === undefined) {
          await tx.runs.create({
            id,
            project: record.project,
            name: windowRunName(record.name, due),
            labels: {
              [WINDOW_LABELS.source]: record.name,
              [WINDOW_LABELS.start]: iso(due.startMs),
              [WINDOW_LABELS.end]: iso(due.endMs),
              ...(fetched.truncated === undefined
                ? {}
                : { [WINDOW_LABELS.truncated]: fetched.truncated }),
            },
            keep: false,
            spec: { ...source.spec.runSpec, dataset: { records: fetched.records } },
            createdBy: `source:${record.name}`,
            createdAt: now,
          });
          await tx.sources.count(
            record.project,
            record.name,
            'pulled',
            fetched.records.length,
            now,
          );
        }
        await tx.sources.saveState({ ...next, schedule: { ...moved, lastRunId: id } });
      });
    try {
      await commit();
    } catch (err) {
      // Inserted meanwhile by another holder (PostgreSQL does not wait on the id it checked):
      // the window is evaluated; the cursor moves past it.
      if (!isTouchstoneError(err) || err.code !== CoreErrors.ALREADY_EXISTS.code) throw err;
      await commit();
    }
    this.deps.onRunCreated?.();
  }

  /** Whether the source's last run is still pending or running (a source waits for it). */
  private async previousRunGoing(schedule: ScheduleState | undefined): Promise<boolean> {
    if (schedule?.lastRunId === undefined) return false;
    const run = await this.deps.store.runs.get(schedule.lastRunId, { spec: false });
    return run !== undefined && !isFinal(run.status);
  }

  /**
   * Every trace that started in the window, in start order, up to `maxRecords` and the snapshot
   * cap; undefined when the lease was lost on the way.
   */
  private async fetchWindow(
    project: string,
    source: ParsedSource,
    window: DueWindow,
    renew: () => Promise<boolean>,
    signal: AbortSignal,
  ): Promise<WindowFetch | undefined> {
    const { spec } = source;
    const maxRecords = spec.schedule?.maxRecords ?? 0;
    const connector = await this.deps.connector(source, project);
    const adjust = this.deps.overrides?.(source);
    const records: EvalRecord[] = [];
    let bytes = 0;
    let running = 0;
    let pageToken: string | undefined;
    for (;;) {
      const page = await connector.list({
        fromMs: window.startMs,
        toMs: window.endMs,
        pageSize: this.deps.pageSize,
        ...(pageToken === undefined ? {} : { pageToken }),
        signal,
      });
      const now = this.deps.clock.now();
      const ready: TraceHeader[] = [];
      for (const h of page.traces) {
        if (h.startMs < window.startMs || h.startMs >= window.endMs) continue;
        // A trace running past `maxInProgressAge` is evaluated as it is, as online.
        if (h.inProgress && now - h.startMs < spec.maxInProgressAge) running++;
        else ready.push(h);
      }
      const room = maxRecords - records.length;
      const taken = ready.slice(0, room);
      const spans = taken.length === 0 ? new Map() : await connector.fetch(taken, signal);
      for (const h of taken) {
        const got = spans.get(h.storeId);
        if (got === undefined || 'missing' in got) {
          this.deps.logger?.warn(
            {
              source: source.name,
              project,
              storeId: h.storeId,
              reason: this.deps.redactText(got?.missing ?? 'not returned'),
            },
            'scheduled window trace skipped',
          );
          continue;
        }
        const record = await this.deps.snapshot(
          {
            project,
            traceId: h.traceId,
            source: source.name,
            labels: spec.traceLabels,
            spans: withResource(got.spans, h.resource),
          },
          adjust,
        );
        bytes += Buffer.byteLength(JSON.stringify(record));
        if (bytes > MAX_SNAPSHOT_BYTES) return { records, truncated: 'snapshot-bytes', running };
        records.push(record);
      }
      if (!(await renew())) return undefined;
      pageToken = page.nextPageToken;
      if (ready.length > room) return { records, truncated: 'maxRecords', running };
      if (pageToken === undefined) return { records, running };
      if (records.length >= maxRecords) {
        // Full: one more listing says whether the window held more.
        const more = await connector.list({
          fromMs: window.startMs,
          toMs: window.endMs,
          pageSize: 1,
          pageToken,
          signal,
        });
        return more.traces.length > 0
          ? { records, truncated: 'maxRecords', running }
          : { records, running };
      }
    }
  }

  /** The state after a failed fetch; `timedOutAfterMs` when it ran out of that budget. */
  private failed(
    state: SourceState,
    err: unknown,
    timedOutAfterMs: number | undefined,
    now: number,
  ): SourceState {
    const timedOut = timedOutAfterMs !== undefined;
    const failures = timedOut ? state.failures : state.failures + 1;
    const retryAfter =
      isTouchstoneError(err) && err.retryAfterSeconds !== undefined
        ? err.retryAfterSeconds * 1000
        : undefined;
    if (!timedOut) {
      this.deps.logger?.warn(
        { err: loggedError(err, this.deps.redactText), project: state.project, source: state.name },
        'scheduled window fetch failed; backing off',
      );
    }
    return {
      ...state,
      phase: 'error',
      lastError: timedOut
        ? `the window fetch did not finish within ${timedOutAfterMs / 1000} s; it is fetched again until its starting deadline`
        : failureText(err, 'pull', this.deps.redactText),
      lastPullAt: now,
      failures,
      nextPullAt: now + (timedOut ? 0 : (retryAfter ?? backoffMs(failures, FETCH_BACKOFF))),
    };
  }
}

function withSchedule(state: SourceState, now: number, schedule: Partial<ScheduleState>) {
  return {
    ...state,
    schedule: { ...(state.schedule ?? initialSchedule(now)), ...schedule },
  };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
