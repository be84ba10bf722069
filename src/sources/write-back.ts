import { createHash, randomBytes } from 'node:crypto';
import {
  BackgroundLoop,
  type BackoffPolicy,
  backoffMs,
  type Clock,
  CoreErrors,
  HUMAN_ANNOTATIONS,
  isTouchstoneError,
  type Score,
} from '../core/index.js';
import { PolicySpecSchema, type ResultSink, type StoredResults } from '../policies/index.js';
import type { NewWriteBack, Store, StoreTransaction, WriteBack } from '../store/index.js';
import type { TraceStoreConnector, WriteBackOutcome } from './connector.js';
import type { ConnectorRegistry } from './connectors/index.js';
import { failureText, loggedError, type RedactText } from './error-text.js';
import { type ParsedSource, parseSource } from './resource.js';
import { parseSinkKey, sinkSource } from './sinks.js';

/**
 * Write-back: scores of pulled traces go back onto the same traces in their store. Rows are
 * queued in the transaction that stores the results (ResultSink), then sent by the writer; a
 * ledger keyed (source, trace, policy, metric) keeps the remote id and the digest of the value
 * written, so an unchanged score is not written again and a changed one updates the same remote
 * score. Rows are never dropped for pressure: they wait in the database. A failure the store
 * says is transient (429, 5xx, timeouts, network) is retried with full-jitter backoff, never
 * before its Retry-After; one it would answer the same way again (401, 403, the trace gone, a
 * refused value) is dead-lettered after that one attempt: out of the queue, counted and shown in
 * the source's status. A person's annotation of a pulled trace takes the same path, under the
 * write-back policy `@human/<principal>` (annotationWriteBackPolicy).
 */

/**
 * The write-back `policy` of one person's annotations, `@human/<principal>`: the ledger key
 * (source, trace, policy, metric) then holds one remote score per person and name, as the
 * results do. No policy name contains `@` or `/`.
 */
export function annotationWriteBackPolicy(principal: string): string {
  return `${HUMAN_ANNOTATIONS}/${principal}`;
}

/** The annotator of a write-back `policy` made by `annotationWriteBackPolicy`, else undefined. */
function annotatorOf(policy: string): string | undefined {
  const prefix = `${HUMAN_ANNOTATIONS}/`;
  return policy.startsWith(prefix) ? policy.slice(prefix.length) : undefined;
}

/** How long a source's parsed resource is reused before it is read again. */
const CACHE_MS = 1_000;

/**
 * Reads sources for the engine and the writer: which policies may score a source's traces,
 * write-back, and the `trace_feedback` sinks of policies (a sink key resolves to its source).
 */
export class SourceDirectory {
  private cache = new Map<string, ParsedSource | null>();
  private sinks = new Map<string, ParsedSource[]>();
  private readAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly deps: { store: Store; clock: Clock; connectors?: ConnectorRegistry },
  ) {}

  /** Reads through `reader` — inside a transaction, the transaction's repositories. */
  async get(
    project: string,
    name: string,
    reader: Pick<Store, 'sources' | 'policies'> = this.deps.store,
  ): Promise<ParsedSource | undefined> {
    const sink = parseSinkKey(name);
    if (sink !== undefined) {
      return (await this.sinksOf(project, sink.policy, reader))[sink.index];
    }
    this.expire();
    const key = `${project}\u0000${name}`;
    if (!this.cache.has(key)) {
      const record = await reader.sources.get(project, name);
      let parsed: ParsedSource | null = null;
      try {
        parsed = record === undefined ? null : parseSource(record.resource, this.deps.connectors);
      } catch {
        parsed = null;
      }
      this.cache.set(key, parsed);
    }
    return this.cache.get(key) ?? undefined;
  }

  /** The `trace_feedback` sinks of a policy, as the sources they write like (none if it has none). */
  async sinksOf(
    project: string,
    policy: string,
    reader: Pick<Store, 'policies'> = this.deps.store,
  ): Promise<ParsedSource[]> {
    this.expire();
    const key = `${project}\u0000${policy}`;
    let found = this.sinks.get(key);
    if (found === undefined) {
      const record = await reader.policies.get(project, policy);
      const parsed = PolicySpecSchema.safeParse(
        (record?.resource as { spec?: unknown } | undefined)?.spec,
      );
      found = [];
      for (const sink of parsed.success ? parsed.data.sinks : []) {
        try {
          found.push(sinkSource(policy, sink, this.deps.connectors));
        } catch {
          // Checked at apply; a sink this build no longer reads writes nothing.
        }
      }
      this.sinks.set(key, found);
    }
    return found;
  }

  invalidate(): void {
    this.readAt = Number.NEGATIVE_INFINITY;
  }

  private expire(): void {
    const now = this.deps.clock.now();
    if (now - this.readAt > CACHE_MS) {
      this.cache.clear();
      this.sinks.clear();
      this.readAt = now;
    }
  }
}

/** One write-back row per scored metric of stored results, addressed to `source`'s store. */
export function writeBackRows(
  stored: StoredResults,
  to: { source: string; storeId: string; now: number },
): NewWriteBack[] {
  const { trace } = stored;
  return stored.results.flatMap((r) =>
    r.outcome !== 'OUTCOME_SCORED'
      ? []
      : r.scores.map((score) => ({
          project: trace.project,
          source: to.source,
          storeId: to.storeId,
          traceId: trace.traceId,
          policy:
            r.annotator === undefined
              ? stored.policy
              : annotationWriteBackPolicy(r.annotator.principal),
          metric: score.name,
          score: JSON.stringify(score),
          judge: stored.judged.has(r.evaluator),
          createdAt: to.now,
        })),
  );
}

/** The engine's sink for pulled traces: `spec.policies` and write-back rows. */
export class SourceResultSink implements ResultSink {
  constructor(private readonly deps: { directory: SourceDirectory; clock: Clock }) {}

  async allowedPolicies(project: string, source: string): Promise<ReadonlySet<string> | undefined> {
    const parsed = await this.deps.directory.get(project, source);
    if (parsed === undefined || parsed.spec.policies.length === 0) return undefined;
    return new Set(parsed.spec.policies);
  }

  async onStored(tx: StoreTransaction, stored: StoredResults): Promise<void> {
    const { trace } = stored;
    if (trace.source === '') return;
    const parsed = await this.deps.directory.get(trace.project, trace.source, tx);
    if (parsed === undefined || !parsed.spec.writeBack.enabled) return;
    const storeId = await tx.sources.storeIdOf(trace.project, trace.source, trace.traceId);
    if (storeId === undefined) return;
    const now = this.deps.clock.now();
    const rows = writeBackRows(stored, { source: trace.source, storeId, now });
    if (rows.length > 0) await tx.sources.enqueueWriteBacks(rows, now);
  }
}

export interface WriteBackObserver {
  /** `failed`: a transient failure, retried. */
  onWritten(
    project: string,
    source: string,
    outcome: 'created' | 'updated' | 'unchanged' | 'failed',
  ): void;
  /** The store refused a write-back for good: it moved to the source's dead letters. */
  onDeadLettered(project: string, source: string): void;
  /** A sink's score was not written: the store never got the trace (not a refusal). */
  onWriteSkipped(project: string, source: string, reason: 'trace_not_in_store'): void;
}

export interface WriteBackWriterDeps {
  store: Store;
  clock: Clock;
  directory: SourceDirectory;
  connector(
    source: ParsedSource,
    project: string,
  ): Promise<TraceStoreConnector> | TraceStoreConnector;
  observer?: WriteBackObserver;
  logger?: { warn(obj: object, msg: string): void };
  /** `traces.redaction`'s text rules, for dead letters and failure logs (identity when absent). */
  redactText?: RedactText;
  batchSize?: number;
  visibilityMs?: number;
  pollMs?: number;
  /** Dead letters kept per source (the newest); the counter counts them all. */
  deadLettersKept?: number;
}

/** Transient failures: 5 s, then up to 10 s, 20 s, … and at most an hour, drawn uniformly. */
export const WRITE_BACK_BACKOFF: BackoffPolicy = { baseMs: 5_000, maxMs: 60 * 60_000 };

/**
 * How long a sink waits for a pushed trace to reach its store: an agent's exporters send to
 * Touchstone and to the store independently, and a store may take the trace after Touchstone
 * scored it (batching exporters, a collector's retries, asynchronous logging). Phoenix keeps
 * queued annotations of unknown traces about as long.
 */
export const SINK_TRACE_WAIT_MS = 10 * 60_000;

/** Looks for the trace again after about 15 s, 30 s, 1 min, then every 2 min or so. */
const SINK_TRACE_BACKOFF: BackoffPolicy = { baseMs: 15_000, maxMs: 2 * 60_000, jitter: 'equal' };
export const DEAD_LETTERS_KEPT = 1000;

function valueDigest(score: Score): string {
  const { name: _n, ...value } = score;
  return createHash('sha256').update(JSON.stringify(value)).digest('base64url');
}

/** What a log line says of a write-back: where it goes, never the score. */
function logged(row: WriteBack) {
  const { project, source, traceId, policy, metric } = row;
  return { project, source, traceId, policy, metric };
}

/** Sends queued write-backs, one batch per source, from every replica (claims are exclusive). */
export class WriteBackWriter {
  private readonly loop: BackgroundLoop;
  private readonly redact: RedactText;

  constructor(private readonly deps: WriteBackWriterDeps) {
    this.redact = deps.redactText ?? ((text) => text);
    this.loop = new BackgroundLoop(
      () => this.tick(),
      deps.pollMs ?? 1000,
      (err) => this.deps.logger?.warn({ err }, 'write-back pass failed'),
    );
  }

  start(): void {
    this.loop.start();
  }

  wake(): void {
    this.loop.wake();
  }

  async shutdown(): Promise<void> {
    await this.loop.stop();
  }

  /** Sends every visible write-back; returns how many were settled (written or unchanged). */
  async tick(): Promise<number> {
    const { store, clock } = this.deps;
    let settled = 0;
    for (;;) {
      if (this.loop.stopped) return settled;
      const now = clock.now();
      const claim = randomBytes(9).toString('base64url');
      const rows = await store.sources.claimWriteBacks(
        now,
        this.deps.batchSize ?? 50,
        now + (this.deps.visibilityMs ?? 60_000),
        claim,
      );
      if (rows.length === 0) return settled;
      const bySource = new Map<string, WriteBack[]>();
      for (const r of rows) {
        const key = `${r.project}\u0000${r.source}`;
        bySource.set(key, [...(bySource.get(key) ?? []), r]);
      }
      for (const group of bySource.values()) settled += await this.send(group);
    }
  }

  private async send(rows: WriteBack[]): Promise<number> {
    const { store, clock, observer } = this.deps;
    const first = rows[0] as WriteBack;
    const source = await this.deps.directory.get(first.project, first.source);
    if (source === undefined || !source.spec.writeBack.enabled) {
      // The source was deleted or stopped writing back: nothing is owed any more.
      for (const r of rows) await store.sources.finishWriteBack(r.id, r.claim);
      return rows.length;
    }
    const pending: { row: WriteBack; score: Score; digest: string; remoteId?: string }[] = [];
    let settled = 0;
    for (const row of rows) {
      const score = JSON.parse(row.score) as Score;
      const digest = valueDigest(score);
      const ledger = await store.sources.ledger(
        row.project,
        row.source,
        row.traceId,
        row.policy,
        row.metric,
      );
      if (ledger !== undefined && ledger.valueDigest === digest) {
        await store.sources.finishWriteBack(row.id, row.claim);
        observer?.onWritten(row.project, row.source, 'unchanged');
        settled++;
        continue;
      }
      pending.push({
        row,
        score,
        digest,
        ...(ledger === undefined ? {} : { remoteId: ledger.remoteId }),
      });
    }
    if (pending.length === 0) return settled;
    let outcomes: WriteBackOutcome[];
    try {
      const connector = await this.deps.connector(source, first.project);
      outcomes = await connector.writeBack(
        pending.map((p) => {
          const annotator = annotatorOf(p.row.policy);
          return {
            storeId: p.row.storeId,
            traceId: p.row.traceId,
            policy: p.row.policy,
            metric: p.row.metric,
            score: p.score,
            judge: p.row.judge,
            ...(annotator === undefined ? {} : { annotator }),
            ...(p.remoteId === undefined ? {} : { remoteId: p.remoteId }),
          };
        }),
      );
    } catch (err) {
      // The source as a whole (its connector, credential or grant) failed, not an item: fixing
      // the configuration lets the rows through, so they wait and retry.
      this.deps.logger?.warn(
        { err: loggedError(err, this.redact), project: first.project, source: first.source },
        'write-back failed; retrying',
      );
      const retryAfter = isTouchstoneError(err) ? err.retryAfterSeconds : undefined;
      outcomes = pending.map(() => ({
        status: 'failed',
        error: failureText(err, 'write-back', this.redact),
        retryable: true,
        code: isTouchstoneError(err) ? err.code : CoreErrors.INTERNAL.code,
        ...(retryAfter === undefined ? {} : { retryAfterSeconds: retryAfter }),
      }));
    }
    for (const [i, p] of pending.entries()) {
      const outcome = outcomes[i] ?? {
        status: 'failed',
        error: 'the connector gave no outcome',
        retryable: true,
        code: CoreErrors.INTERNAL.code,
      };
      const now = clock.now();
      if (outcome.status === 'failed') {
        if (outcome.traceMissing === true && parseSinkKey(p.row.source) !== undefined) {
          await this.awaitTrace(p.row, now);
        } else if (outcome.retryable) {
          const wait = backoffMs(p.row.attempts, WRITE_BACK_BACKOFF, outcome.retryAfterSeconds);
          await store.sources.retryWriteBack(p.row.id, p.row.claim, now + wait);
          observer?.onWritten(p.row.project, p.row.source, 'failed');
        } else {
          await this.deadLetter(p.row, outcome, now);
        }
        continue;
      }
      await store.withTransaction(async (tx) => {
        await tx.sources.saveLedger({
          project: p.row.project,
          source: p.row.source,
          traceId: p.row.traceId,
          policy: p.row.policy,
          metric: p.row.metric,
          remoteId: outcome.remoteId,
          valueDigest: p.digest,
        });
        if (await tx.sources.finishWriteBack(p.row.id, p.row.claim)) {
          await tx.sources.count(p.row.project, p.row.source, 'scored', 1, now);
        }
      });
      observer?.onWritten(p.row.project, p.row.source, outcome.status);
      settled++;
    }
    return settled;
  }

  /**
   * A sink's pushed trace its store does not hold: looked for again until SINK_TRACE_WAIT_MS
   * after it was scored, then skipped (counted and logged; neither retried nor a dead letter).
   */
  private async awaitTrace(row: WriteBack, now: number): Promise<void> {
    const { store, observer } = this.deps;
    const giveUpAt = row.createdAt + SINK_TRACE_WAIT_MS;
    if (now < giveUpAt) {
      const wait = backoffMs(row.attempts, SINK_TRACE_BACKOFF);
      await store.sources.retryWriteBack(row.id, row.claim, Math.min(now + wait, giveUpAt));
      return;
    }
    if (!(await store.sources.finishWriteBack(row.id, row.claim))) return;
    observer?.onWriteSkipped(row.project, row.source, 'trace_not_in_store');
    this.deps.logger?.warn(
      { ...logged(row), reason: 'trace_not_in_store' },
      `sink write-back skipped: the store did not receive the trace within ${SINK_TRACE_WAIT_MS / 60_000} min of scoring`,
    );
  }

  private async deadLetter(
    row: WriteBack,
    outcome: Extract<WriteBackOutcome, { status: 'failed' }>,
    now: number,
  ): Promise<void> {
    const { code } = outcome;
    const message = this.redact(outcome.error).slice(0, 500);
    const moved = await this.deps.store.withTransaction((tx) =>
      tx.sources.deadLetterWriteBack(
        row,
        { code, message, at: now },
        this.deps.deadLettersKept ?? DEAD_LETTERS_KEPT,
      ),
    );
    if (!moved) return;
    this.deps.observer?.onDeadLettered(row.project, row.source);
    this.deps.logger?.warn(
      { ...logged(row), code, error: message },
      'write-back refused by the store; dead-lettered (not retried)',
    );
  }
}
