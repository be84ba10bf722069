import { createHash, randomBytes } from 'node:crypto';
import {
  BackgroundLoop,
  type BackoffPolicy,
  backoffMs,
  type Clock,
  type EvalRecord,
  isTouchstoneError,
  type NormalizedTrace,
} from '../core/index.js';
import type { PulledTrace } from '../ingest/index.js';
import type { SourceRecord, SourceState, SourceTrace, Store } from '../store/index.js';
import type { TraceHeader, TraceStoreConnector } from './connector.js';
import { BUILTIN_CONNECTORS, type ConnectorRegistry } from './connectors/index.js';
import { failureText, loggedError, type RedactText } from './error-text.js';
import { withResource } from './pulled-trace.js';
import { type ParsedSource, parseSource } from './resource.js';
import { WindowScheduler } from './scheduler.js';

/**
 * The source manager: the same pull loop for every store. For each source whose lease it holds
 * (two minutes, renewed per page), a pull reads the traces that started since the watermark —
 * which trails real time by `maxTraceDuration`, so late-ending traces are read again — page by
 * page in start order; skips traces whose store version it already stored; defers traces the
 * store reports running (scored as they are after `maxInProgressAge`); stores each changed trace
 * (and queues it for scoring) in one transaction before the watermark may pass it; and commits the
 * watermark after every page, so a long backfill resumes where it stopped. Pulls are capped in
 * records per second and in time (90 s; 6 minutes, with a lease that outlasts them, for a store
 * whose listing waits on a search it runs); failures back off, honouring Retry-After.
 */

/** How much longer than a pull's budget its lease lasts. */
const LEASE_MARGIN_MS = 30_000;

export interface SourceObserver {
  onPulled(project: string, source: string, traces: number): void;
  onSkipped(project: string, source: string, reason: 'missing' | 'unchanged'): void;
  onPullFailed(project: string, source: string): void;
}

export interface SourceManagerOptions {
  /** How often due sources are looked for. */
  tickMs: number;
  leaseMs: number;
  /** Time budget of one pull. */
  pullBudgetMs: number;
  /**
   * Time budget of one pull of a store whose listing may wait on a search it runs on its own
   * time (`long-running-search`: Databricks catalog schemas, polled up to five minutes).
   */
  longSearchBudgetMs: number;
  /** `sources.max_records_per_second`, unless the source sets `poll.maxRecordsPerSecond`. */
  maxRecordsPerSecond: number;
  pageSize: number;
}

export const DEFAULT_MANAGER_OPTIONS: SourceManagerOptions = {
  tickMs: 1000,
  leaseMs: 120_000,
  pullBudgetMs: 90_000,
  longSearchBudgetMs: 6 * 60_000,
  maxRecordsPerSecond: 200,
  pageSize: 100,
};

export interface SourceManagerDeps {
  store: Store;
  clock: Clock;
  /** The declarations stored specs are read with; this build's by default. */
  connectors?: ConnectorRegistry;
  /** Builds the connector of a source (its credential resolved at each call). */
  connector(
    source: ParsedSource,
    project: string,
  ): Promise<TraceStoreConnector> | TraceStoreConnector;
  /** Stores a pulled trace (redaction, normalization, work item); true when its content changed. */
  write(trace: PulledTrace, adjust?: (n: NormalizedTrace) => NormalizedTrace): Promise<boolean>;
  /**
   * A pulled trace's record, redacted and normalized, nothing stored (scheduled windows'
   * snapshots). Absent: scheduled sources are not run by this manager.
   */
  snapshot?(
    trace: PulledTrace,
    adjust?: (n: NormalizedTrace) => NormalizedTrace,
  ): Promise<EvalRecord>;
  /** A scheduled window's run was created: the executor looks at once. */
  onRunCreated?(): void;
  /** The source's overrides applied to a normalized trace (identity when it has none). */
  overrides?(source: ParsedSource): ((n: NormalizedTrace) => NormalizedTrace) | undefined;
  observer?: SourceObserver;
  logger?: { warn(obj: object, msg: string): void };
  /** `traces.redaction`'s text rules, for `lastError` and failure logs (identity when absent). */
  redactText?: RedactText;
  options?: Partial<SourceManagerOptions>;
  /** Waits between pages for the rate cap; injectable for tests. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** A failed pull waits 5 s, doubling to 5 min, as docs/sources.md states (no jitter). */
const PULL_BACKOFF: BackoffPolicy = { baseMs: 5_000, maxMs: 5 * 60_000, jitter: 'none' };

function retryAfterMs(err: unknown): number | undefined {
  if (!isTouchstoneError(err) || err.retryAfterSeconds === undefined) return undefined;
  return err.retryAfterSeconds * 1000;
}

/** What identifies a version of a trace in the store's listing: end, state and trace-level attributes. */
export function headerVersion(h: TraceHeader): string {
  return createHash('sha256')
    .update(JSON.stringify([h.endMs ?? null, h.inProgress, h.resource]))
    .digest('base64url')
    .slice(0, 22);
}

const realSleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    });
  });

export class SourceManager {
  private readonly options: SourceManagerOptions;
  private readonly holder = `sources-${randomBytes(6).toString('hex')}`;
  private readonly loop: BackgroundLoop;
  private readonly stop = new AbortController();

  private readonly redact: RedactText;
  private readonly windows: WindowScheduler | undefined;

  constructor(private readonly deps: SourceManagerDeps) {
    this.options = { ...DEFAULT_MANAGER_OPTIONS, ...deps.options };
    this.redact = deps.redactText ?? ((text) => text);
    const { snapshot } = deps;
    this.windows =
      snapshot === undefined
        ? undefined
        : new WindowScheduler({
            store: deps.store,
            clock: deps.clock,
            connector: deps.connector,
            snapshot,
            ...(deps.overrides === undefined ? {} : { overrides: deps.overrides }),
            ...(deps.onRunCreated === undefined ? {} : { onRunCreated: deps.onRunCreated }),
            ...(deps.logger === undefined ? {} : { logger: deps.logger }),
            redactText: this.redact,
            pageSize: this.options.pageSize,
          });
    this.loop = new BackgroundLoop(
      () => this.tick(),
      this.options.tickMs,
      (err) => this.deps.logger?.warn({ err }, 'source manager pass failed'),
    );
  }

  start(): void {
    this.loop.start();
  }

  /** Looks for due sources now (a source changed); nothing before start() (tests drive tick()). */
  wake(): void {
    this.loop.wake();
  }

  /** Stops pulling (a pull in progress stops after its current page) and gives leases up. */
  async shutdown(): Promise<void> {
    this.stop.abort();
    await this.loop.stop();
  }

  /** Pulls every due source whose lease this replica can take. */
  async tick(): Promise<void> {
    const sources = await this.deps.store.sources.listAll();
    for (const record of sources) {
      if (this.loop.stopped) return;
      if (record.paused) continue;
      const state = await this.deps.store.sources.getState(record.project, record.name);
      if (state === undefined || state.nextPullAt > this.deps.clock.now()) continue;
      const lease = `source/${record.project}/${record.name}`;
      const { leaseMs } = this.timing(record);
      if (!(await this.deps.store.leases.acquire(lease, this.holder, leaseMs))) continue;
      try {
        await this.handle(record, state, lease);
      } finally {
        await this.deps.store.leases.release(lease, this.holder).catch(() => undefined);
      }
    }
  }

  /** A scheduled source's due window, or an online source's pull. */
  private async handle(record: SourceRecord, state: SourceState, lease: string): Promise<void> {
    const source = parseSource(record.resource, this.deps.connectors);
    if (source.spec.schedule === undefined) return this.pull(record, state, lease);
    if (this.windows === undefined) return;
    // A window is fetched as a pull reads: a store's long searches get the longer budget.
    const { budgetMs, leaseMs } = this.timing(record);
    const renew = () => this.deps.store.leases.acquire(lease, this.holder, leaseMs);
    await this.windows.step(record, source, state, { renew, stop: this.stop.signal, budgetMs });
  }

  /**
   * A pull's time budget and lease. A store that runs searches on its own time gets a longer
   * budget, and a lease that outlasts it: no page is read (and the lease not renewed) while its
   * search runs.
   */
  private timing(record: SourceRecord): { budgetMs: number; leaseMs: number } {
    const { pullBudgetMs, longSearchBudgetMs, leaseMs } = this.options;
    let spec: ParsedSource['spec'];
    try {
      spec = parseSource(record.resource, this.deps.connectors).spec;
    } catch {
      return { budgetMs: pullBudgetMs, leaseMs };
    }
    const capabilities =
      (this.deps.connectors ?? BUILTIN_CONNECTORS).get(spec.connector, spec.variant)?.manifest
        .capabilities ?? [];
    if (!capabilities.includes('long-running-search')) return { budgetMs: pullBudgetMs, leaseMs };
    const budgetMs = Math.max(pullBudgetMs, longSearchBudgetMs);
    return { budgetMs, leaseMs: Math.max(leaseMs, budgetMs + LEASE_MARGIN_MS) };
  }

  /** One pull of one source: pages until the store has no more, the budget ends, or it fails. */
  async pull(record: SourceRecord, initial: SourceState, lease: string): Promise<void> {
    const { store, clock } = this.deps;
    const source = parseSource(record.resource, this.deps.connectors);
    const { spec } = source;
    const project = record.project;
    const started = clock.now();
    const { budgetMs, leaseMs } = this.timing(record);
    const budget = AbortSignal.any([this.stop.signal, AbortSignal.timeout(budgetMs)]);
    const rate = spec.poll.maxRecordsPerSecond ?? this.options.maxRecordsPerSecond;
    const sleep = this.deps.sleep ?? realSleep;
    const adjust = this.deps.overrides?.(source);
    let state = { ...initial };
    const from = state.watermark;
    const to = started;
    let handled = 0;
    let minDeferred = Number.POSITIVE_INFINITY;
    let pageToken: string | undefined;
    try {
      const connector = await this.deps.connector(source, project);
      for (;;) {
        const page = await connector.list({
          fromMs: from,
          toMs: to,
          pageSize: this.options.pageSize,
          ...(pageToken === undefined ? {} : { pageToken }),
          signal: budget,
        });
        // A store may answer with traces outside the window; those started before it are not ours.
        const headers = page.traces.filter((h) => h.startMs >= from && h.startMs < to);
        const known = new Map(
          (
            await store.sources.traces(
              project,
              record.name,
              headers.map((h) => h.storeId),
            )
          ).map((t) => [t.storeId, t]),
        );
        const now = clock.now();
        const saves: SourceTrace[] = [];
        const fetchList: TraceHeader[] = [];
        for (const h of headers) {
          const seen = known.get(h.storeId);
          const base = {
            project,
            source: record.name,
            storeId: h.storeId,
            traceId: h.traceId,
            startMs: h.startMs,
          };
          if (h.inProgress) {
            const since = seen?.deferredSince ?? now;
            if (now - since < spec.maxInProgressAge) {
              minDeferred = Math.min(minDeferred, h.startMs);
              if (seen?.deferredSince === undefined)
                saves.push({ ...base, version: seen?.version ?? '', deferredSince: since });
              continue;
            }
          }
          const version = headerVersion(h);
          if (seen !== undefined && seen.version === version && seen.deferredSince === undefined) {
            this.deps.observer?.onSkipped(project, record.name, 'unchanged');
            continue;
          }
          fetchList.push(h);
        }
        const fetched =
          fetchList.length === 0 ? new Map() : await connector.fetch(fetchList, budget);
        for (const h of fetchList) {
          const base = {
            project,
            source: record.name,
            storeId: h.storeId,
            traceId: h.traceId,
            startMs: h.startMs,
          };
          const got = fetched.get(h.storeId);
          if (got === undefined || 'missing' in got) {
            // Skipped with its reason; marked so it is not fetched again until the store changes it.
            this.deps.observer?.onSkipped(project, record.name, 'missing');
            this.deps.logger?.warn(
              {
                source: record.name,
                project,
                storeId: h.storeId,
                reason: this.redact(got?.missing ?? 'not returned'),
              },
              'pulled trace skipped',
            );
            saves.push({ ...base, version: `missing:${headerVersion(h)}` });
            continue;
          }
          await this.deps.write(
            {
              project,
              traceId: h.traceId,
              source: record.name,
              labels: spec.traceLabels,
              spans: withResource(got.spans, h.resource),
              index: { ...base, version: headerVersion(h) },
            },
            adjust,
          );
          handled++;
        }
        if (saves.length > 0) await store.sources.saveTraces(saves);
        if (handled > 0) this.deps.observer?.onPulled(project, record.name, fetchList.length);
        // Per-page commit: every trace that started before the last one listed is handled (the
        // listing is in start order; equal starts are read again next time and skipped).
        const last = headers.at(-1);
        if (last !== undefined) {
          const mark = Math.min(last.startMs, minDeferred, clock.now() - spec.maxTraceDuration);
          state = { ...state, watermark: Math.max(state.watermark, mark) };
        }
        const pulledNow = fetchList.length;
        state = await this.saveProgress(state, pulledNow, record.name);
        if (!(await store.leases.acquire(lease, this.holder, leaseMs))) return;
        pageToken = page.nextPageToken;
        if (pageToken === undefined) break;
        if (budget.aborted) throw budget.reason;
        const elapsed = Math.max(1, clock.now() - started);
        const ahead = (handled / rate) * 1000 - elapsed;
        if (ahead > 0) await sleep(ahead, budget);
      }
      const end = clock.now();
      const watermark = Math.max(
        state.watermark,
        Math.min(minDeferred, to - spec.maxTraceDuration),
      );
      const { lastError: _cleared, ...ok } = state;
      await store.sources.saveState({
        ...ok,
        watermark,
        phase: watermark < state.backfillUntil ? 'backfilling' : 'tailing',
        lastCompleteStartAt: started,
        lastPullAt: end,
        nextPullAt: started + spec.poll.interval,
        failures: 0,
        recordsPerSecond: handled / Math.max(0.001, (end - started) / 1000),
      });
    } catch (err) {
      const now = clock.now();
      const timedOut = budget.aborted && !this.stop.signal.aborted;
      if (this.stop.signal.aborted) return;
      this.deps.observer?.onPullFailed(project, record.name);
      const failures = state.failures + 1;
      const wait = retryAfterMs(err) ?? backoffMs(failures, PULL_BACKOFF);
      const { lastError: _drop, ...rest } = state;
      await store.sources.saveState({
        ...rest,
        phase: timedOut ? state.phase : 'error',
        lastError: timedOut
          ? `the pull did not finish within ${budgetMs / 1000} s; it continues from its watermark (narrow the window or raise poll.maxRecordsPerSecond)`
          : failureText(err, 'pull', this.redact),
        lastPullAt: now,
        failures: timedOut ? state.failures : failures,
        nextPullAt: timedOut ? now : now + wait,
      });
      if (!timedOut)
        this.deps.logger?.warn(
          { err: loggedError(err, this.redact), project, source: record.name },
          'source pull failed; backing off',
        );
    }
  }

  private async saveProgress(
    state: SourceState,
    pulled: number,
    name: string,
  ): Promise<SourceState> {
    const { store } = this.deps;
    await store.sources.saveState(state);
    if (pulled > 0)
      await store.sources.count(state.project, name, 'pulled', pulled, this.deps.clock.now());
    return state;
  }
}
