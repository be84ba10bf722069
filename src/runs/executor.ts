import { createHash, randomBytes } from 'node:crypto';
import {
  BackgroundLoop,
  type Clock,
  type EvalRecord,
  isTouchstoneError,
  type Result,
} from '../core/index.js';
import {
  type EvalContext,
  type EvaluationObserver,
  type EvaluatorInstance,
  type EvaluatorRegistry,
  type Judge,
  runEvaluators,
} from '../evaluators/index.js';
import type { RunOutput, RunProgress, RunRecord, RunResult, Store } from '../store/index.js';
import { RunErrors } from './error-codes.js';
import { type FinishOutcome, finishRun, type RunEventSink } from './finish.js';
import { type CompiledRun, compileStoredSpec, MAX_ITEMS } from './spec.js';
import { isFinal } from './states.js';
import { type MetricSummary, SummaryBuilder } from './summaries.js';
import { createTarget, type Target, type TargetDeps, type TargetOutput } from './targets/index.js';

/** Runs whose last failed execution an executor keeps the cause of (see `failureOf`). */
const FAILURES_KEPT = 100;

/**
 * The run executor. Every replica runs one: it claims pending runs, and running runs whose lease
 * lapsed (their executor died), holds each under a lease it renews, and works through its items
 * (record × trial) with bounded concurrency: the target's output (stored as soon as it exists),
 * then the evaluators. Outputs and results are written in batches, each batch in one transaction
 * fenced by the lease, and keyed by (run, record, trial[, evaluator]); an adopted run reads what
 * is stored and does only the rest. The last step computes summaries and gates and writes the
 * final status with its `run.finished` (and `run.gate_failed`) events in one transaction.
 */

/** Where a run's records come from when its spec names a dataset path (src/datasets fits it). */
export interface DatasetReader {
  read(project: string, path: string): Promise<readonly EvalRecord[]>;
}

export interface RunObserver {
  /** After each stored batch, and when a run starts with the items done before. */
  onProgress?(runId: string, done: number, total: number): void;
  onFinished?(run: RunRecord): void;
}

export interface RunExecutorOptions {
  /** Runs executed at once by this replica. */
  maxConcurrentRuns: number;
  /** A run's lease; another replica adopts the run this long after its executor stopped renewing. */
  leaseMs: number;
  /** How often pending runs are looked for when nothing wakes the executor. */
  pollMs: number;
  /** Items (record, trial) per write transaction. */
  flushItems: number;
  /** …or at most this long between writes while items finish. */
  flushMs: number;
  /** Items in flight for a run without a target whose evaluators call a judge. */
  judgeConcurrency: number;
}

export const DEFAULT_EXECUTOR_OPTIONS: RunExecutorOptions = {
  maxConcurrentRuns: 2,
  leaseMs: 30_000,
  pollMs: 1_000,
  flushItems: 1_000,
  flushMs: 250,
  judgeConcurrency: 8,
};

export interface RunExecutorDeps {
  store: Store;
  clock: Clock;
  registry: EvaluatorRegistry;
  /** A judge by name (undefined = the default); undefined when none is configured. */
  judge(name: string | undefined): Judge | undefined;
  events: RunEventSink;
  datasets?: DatasetReader;
  /**
   * How targets are built here: the server's grants and outbound rules, or the caller's own
   * machine for the CLI. Absent: a run with a target ends in ERROR.
   */
  targets?: Omit<TargetDeps, 'project'>;
  observer?: RunObserver;
  evaluation?: EvaluationObserver;
  logger?: { warn(obj: object, msg: string): void };
  /** Identifies this executor in the runs' lease column. Default: random per process. */
  holder?: string;
  options?: Partial<RunExecutorOptions>;
}

/** Why an execution stopped before its last item. */
class Stop extends Error {
  constructor(readonly why: 'cancelled' | 'lost' | 'shutdown') {
    super(`run execution stopped: ${why}`);
  }
}

/** Safe text for a failure (our errors carry safe messages; others may hold record content). */
function failureText(err: unknown): string {
  if (isTouchstoneError(err)) return `${err.code}: ${err.message}`.slice(0, 1000);
  return `failed (${err instanceof Error ? err.name : typeof err}); see the server log`;
}

/** Lets timers and I/O (requests, lease renewals) run between items. */
function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** A digest of the records, so an adopted run notices a dataset that changed under it. */
function digestRecords(records: readonly EvalRecord[]): string {
  const hash = createHash('sha256');
  for (const r of records) hash.update(JSON.stringify(r)).update('\n');
  return hash.digest('hex');
}

/**
 * Collects finished items and writes them in batches. A writer that fills a batch waits for the
 * previous batch's write, not its own, so evaluating and writing overlap (on PostgreSQL).
 */
class BatchWriter {
  private outputs: RunOutput[] = [];
  private results: RunResult[] = [];
  private items = 0;
  private lastFlush = performance.now();
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly write: (batch: RunProgress) => Promise<void>,
    private readonly flushItems: number,
    private readonly flushMs: number,
  ) {}

  addOutput(output: RunOutput): void {
    this.outputs.push(output);
  }

  async addResults(
    recordIndex: number,
    trial: number,
    recordId: string,
    results: readonly Result[],
  ): Promise<void> {
    results.forEach((result, position) => {
      this.results.push({ recordIndex, trial, recordId, position, result });
    });
    this.items++;
    if (this.items >= this.flushItems || performance.now() - this.lastFlush >= this.flushMs) {
      await this.flush(false);
    }
  }

  /** Writes what is waiting when the last write is older than `flushMs` (slow items). */
  flushIfDue(): Promise<void> {
    if (performance.now() - this.lastFlush < this.flushMs) return Promise.resolve();
    return this.flush(true);
  }

  /** Queues a write of what is waiting; resolves after it (`all`) or after the one before it. */
  flush(all = true): Promise<void> {
    const previous = this.chain;
    if (this.items === 0 && this.outputs.length === 0) return all ? previous : Promise.resolve();
    const batch: RunProgress = { done: this.items, outputs: this.outputs, results: this.results };
    this.outputs = [];
    this.results = [];
    this.items = 0;
    this.lastFlush = performance.now();
    this.chain = previous.then(() => this.write(batch));
    return all ? this.chain : previous;
  }
}

interface Execution {
  controller: AbortController;
  done: Promise<void>;
}

/**
 * Claims and executes runs (see the module comment above). `start()` polls and is woken by
 * `wake()`; tests and the CLI's embedded mode drive it with `drain()` or `waitFor()`.
 */
export class RunExecutor {
  private readonly options: RunExecutorOptions;
  private readonly loop: BackgroundLoop;
  private readonly active = new Map<string, Execution>();
  /** Why executions of runs failed here, the latest per run (at most FAILURES_KEPT runs). */
  private readonly failures = new Map<string, string>();
  private readonly listeners = new Set<() => void>();
  readonly holder: string;

  constructor(private readonly deps: RunExecutorDeps) {
    this.options = { ...DEFAULT_EXECUTOR_OPTIONS, ...deps.options };
    this.holder = deps.holder ?? `runs-${randomBytes(6).toString('hex')}`;
    this.loop = new BackgroundLoop(
      () => this.tick(),
      this.options.pollMs,
      (err) => this.deps.logger?.warn({ err }, 'claiming runs failed; retrying'),
    );
  }

  start(): void {
    this.loop.start();
  }

  /** A run was created (or a slot freed): look now. Nothing before start(). */
  wake(): void {
    this.loop.wake();
  }

  /**
   * Stops claiming, stops the runs in progress after their current items, writes what they
   * finished and gives their leases up, so another replica (or this one restarted) adopts them at
   * once. Safe twice and before start.
   */
  async shutdown(): Promise<void> {
    await this.loop.stop();
    for (const e of this.active.values()) e.controller.abort(new Stop('shutdown'));
    await Promise.all([...this.active.values()].map((e) => e.done));
  }

  /** Runs this executor is working on. */
  get running(): number {
    return this.active.size;
  }

  /** Claims runs while it has room; they execute in the background. Returns how many it took. */
  async tick(): Promise<number> {
    let claimed = 0;
    while (this.active.size < this.options.maxConcurrentRuns && !this.loop.stopped) {
      const run = await this.deps.store.runs.claim(
        this.holder,
        this.deps.clock.now(),
        this.options.leaseMs,
      );
      if (run === undefined) break;
      claimed++;
      const controller = new AbortController();
      const done = this.execute(run, controller)
        .catch((err: unknown) => {
          this.failed(run.id, err);
          this.deps.logger?.warn(
            { err, runId: run.id },
            'run execution failed; another executor adopts it when its lease lapses',
          );
        })
        .finally(() => {
          this.active.delete(run.id);
          this.notify();
          this.loop.wake();
        });
      this.active.set(run.id, { controller, done });
    }
    return claimed;
  }

  /**
   * Why this executor's last execution of a run failed (the run stays leased, for another try),
   * if it did: what a caller driving it (the CLI's embedded mode) tells its user.
   */
  failureOf(id: string): string | undefined {
    return this.failures.get(id);
  }

  private failed(id: string, err: unknown): void {
    this.failures.delete(id);
    this.failures.set(id, err instanceof Error ? err.message : String(err));
    if (this.failures.size > FAILURES_KEPT) {
      this.failures.delete(this.failures.keys().next().value as string);
    }
  }

  /** Claims and executes runs until none is left to claim (tests; the CLI's embedded mode). */
  async drain(): Promise<void> {
    for (;;) {
      const claimed = await this.tick();
      if (claimed === 0 && this.active.size === 0) return;
      await Promise.all([...this.active.values()].map((e) => e.done));
    }
  }

  /**
   * Resolves with the run once it is final, calling `onProgress` whenever its progress moves.
   * Reads the store, so it follows runs executed by any replica.
   */
  async waitFor(
    id: string,
    options: {
      onProgress?: (run: RunRecord) => void;
      signal?: AbortSignal;
      pollMs?: number;
    } = {},
  ): Promise<RunRecord> {
    let last = '';
    for (;;) {
      options.signal?.throwIfAborted();
      const run = await this.deps.store.runs.get(id, { spec: false });
      if (run === undefined) throw RunErrors.RUN_NOT_FOUND(`no run ${id}`);
      const seen = `${run.status}/${run.done}/${run.total}`;
      if (seen !== last) {
        last = seen;
        options.onProgress?.(run);
      }
      if (isFinal(run.status)) return run;
      await this.nextChange(options.pollMs ?? 250, options.signal);
    }
  }

  private nextChange(ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.listeners.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.listeners.add(done);
      signal?.addEventListener('abort', done);
    });
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }

  private finish(
    run: RunRecord,
    outcome: FinishOutcome,
    summaries?: MetricSummary[],
  ): Promise<RunRecord | undefined> {
    return finishRun(this.deps, run, this.holder, outcome, summaries).then((finished) => {
      if (finished !== undefined) this.deps.observer?.onFinished?.(finished);
      return finished;
    });
  }

  /** The run's records, or why it cannot have them. */
  private async records(run: RunRecord, compiled: CompiledRun): Promise<EvalRecord[] | string> {
    const { dataset } = compiled.spec;
    if (dataset.records !== undefined) return dataset.records as EvalRecord[];
    const path = dataset.path as string;
    if (this.deps.datasets === undefined) return 'datasets are not available on this executor';
    try {
      const records = await this.deps.datasets.read(run.project, path);
      return records.map((r, i) => (r.id === undefined ? { ...r, id: String(i) } : r));
    } catch (err) {
      if (!isTouchstoneError(err)) throw err;
      // A database or root that is down is worth another try (the lease lapses, a replica adopts).
      if (err.retryable) throw err;
      return `dataset ${path}: ${err.message}`;
    }
  }

  private async execute(claimed: RunRecord, controller: AbortController): Promise<void> {
    const { store, clock } = this.deps;
    const { leaseMs } = this.options;
    const run = claimed;
    if (this.loop.stopped) {
      await store.runs.release(run.id, this.holder);
      return;
    }
    let compiled: CompiledRun;
    try {
      compiled = compileStoredSpec(run.spec, this.deps.registry);
    } catch (err) {
      if (!isTouchstoneError(err)) throw err;
      await this.finish(run, { error: `the run spec cannot be run here: ${err.message}` });
      return;
    }
    if (run.cancelRequested) {
      await this.finish(run, { cancelled: true });
      return;
    }
    const records = await this.records(run, compiled);
    if (typeof records === 'string') {
      await this.finish(run, { error: records });
      return;
    }
    const { trials } = compiled.spec;
    const total = records.length * trials;
    if (total === 0 || total > MAX_ITEMS) {
      await this.finish(run, {
        error:
          total === 0
            ? 'the dataset has no records'
            : `records × trials is ${total}; at most ${MAX_ITEMS}`,
      });
      return;
    }
    // Inline records live in the stored spec, which never changes; a dataset path is re-read.
    const digest = compiled.spec.dataset.records !== undefined ? 'inline' : digestRecords(records);
    if (run.datasetDigest !== undefined && run.datasetDigest !== digest) {
      await this.finish(run, {
        error: 'the dataset changed since the run started; start a new run',
      });
      return;
    }
    const finished = new Set<number>();
    for (const item of await store.runs.finishedItems(run.id)) {
      finished.add(item.recordIndex * trials + item.trial);
    }
    if (
      !(await store.runs.prepare(run.id, this.holder, {
        total,
        done: finished.size,
        datasetDigest: digest,
      }))
    )
      return;
    let done = finished.size;
    this.deps.observer?.onProgress?.(run.id, done, total);
    // Summarised as batches commit; what an earlier executor stored is read once here.
    const summary = new SummaryBuilder(compiled.metrics, trials);
    if (finished.size > 0) {
      for (const r of await store.runs.allResults(run.id)) summary.add(r.recordIndex, r.result);
    }

    let target: Target | undefined;
    if (compiled.spec.target !== undefined) {
      if (this.deps.targets === undefined) {
        await this.finish(run, { error: 'this executor does not run targets' });
        return;
      }
      try {
        target = await createTarget(
          compiled.spec.target,
          compiled.spec.harness,
          compiled.spec.environment,
          { ...this.deps.targets, project: run.project },
        );
      } catch (err) {
        if (!isTouchstoneError(err)) throw err;
        await this.finish(run, { error: `target: ${failureText(err)}` });
        return;
      }
    }

    const signal = controller.signal;
    const writer = new BatchWriter(
      async (batch) => {
        const ok = await store.withTransaction((tx) =>
          tx.runs.record(run.id, this.holder, clock.now(), leaseMs, batch),
        );
        if (!ok) {
          controller.abort(new Stop('lost'));
          throw new Stop('lost');
        }
        for (const r of batch.results) summary.add(r.recordIndex, r.result);
        done += batch.done;
        this.deps.observer?.onProgress?.(run.id, done, total);
        this.notify();
      },
      this.options.flushItems,
      this.options.flushMs,
    );
    const heartbeat = setInterval(
      () => void this.heartbeat(run.id, controller, writer),
      Math.min(1_000, Math.max(50, Math.floor(leaseMs / 3))),
    );
    try {
      const stored =
        target === undefined
          ? new Map<number, RunOutput>()
          : new Map(
              (await store.runs.outputs(run.id)).map((o) => [o.recordIndex * trials + o.trial, o]),
            );
      await this.work(run, compiled, records, finished, stored, target, writer, signal);
      await writer.flush();
    } catch (err) {
      if (!(err instanceof Stop) && !signal.aborted) throw err;
    } finally {
      clearInterval(heartbeat);
      await target?.close();
    }
    const why = signal.aborted ? (signal.reason as Stop).why : undefined;
    if (why === 'lost') return;
    if (why === 'shutdown') {
      await writer.flush().catch(() => undefined);
      await store.runs.release(run.id, this.holder);
      return;
    }
    await this.finish(run, why === 'cancelled' ? { cancelled: true } : {}, summary.build());
  }

  /** Renews the lease, notices a cancel request, and writes slow items. */
  private async heartbeat(
    id: string,
    controller: AbortController,
    writer: BatchWriter,
  ): Promise<void> {
    if (controller.signal.aborted) return;
    try {
      const lease = await this.deps.store.runs.renew(
        id,
        this.holder,
        this.deps.clock.now(),
        this.options.leaseMs,
      );
      if (lease === undefined) controller.abort(new Stop('lost'));
      else if (lease.cancelRequested) controller.abort(new Stop('cancelled'));
      else await writer.flushIfDue();
    } catch (err) {
      if (err instanceof Stop) return;
      this.deps.logger?.warn({ err, runId: id }, 'renewing a run lease failed; retrying');
    }
  }

  private async work(
    run: RunRecord,
    compiled: CompiledRun,
    records: readonly EvalRecord[],
    finished: ReadonlySet<number>,
    stored: ReadonlyMap<number, RunOutput>,
    target: Target | undefined,
    writer: BatchWriter,
    signal: AbortSignal,
  ): Promise<void> {
    const { trials } = compiled.spec;
    const total = records.length * trials;
    const judge = compiled.needsJudge ? this.deps.judge(compiled.spec.judge) : undefined;
    const ctx: EvalContext = judge === undefined ? { signal } : { judge, signal };
    const onError = (err: unknown, inst: EvaluatorInstance) =>
      this.deps.logger?.warn({ err, runId: run.id, evaluator: inst.name }, 'evaluator failed');
    const concurrency =
      target !== undefined
        ? target.concurrency
        : compiled.needsJudge
          ? this.options.judgeConcurrency
          : 1;
    let next = 0;
    const worker = async () => {
      let sinceYield = 0;
      for (;;) {
        while (next < total && finished.has(next)) next++;
        if (next >= total || signal.aborted) return;
        const item = next++;
        const recordIndex = Math.floor(item / trials);
        const trial = item % trials;
        const record = records[recordIndex] as EvalRecord;
        const evaluated = await this.generate(
          run,
          record,
          recordIndex,
          trial,
          stored.get(item),
          target,
          writer,
          signal,
        );
        if (evaluated === undefined) return;
        const results =
          'error' in evaluated
            ? compiled.instances.map(
                (inst): Result => ({
                  evaluator: inst.name,
                  outcome: 'OUTCOME_ERROR',
                  scores: [],
                  reason: `the target failed: ${evaluated.error}`,
                  durationMs: 0,
                }),
              )
            : await runEvaluators(
                evaluated.record,
                compiled.instances,
                ctx,
                this.deps.evaluation,
                onError,
              );
        // A judge call cut short by the stop is not a result: whoever resumes does it again.
        if (signal.aborted) return;
        await writer.addResults(recordIndex, trial, record.id, results);
        if (++sinceYield >= 64) {
          sinceYield = 0;
          await yieldToEventLoop();
        }
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
  }

  /**
   * The record to evaluate for one item: the dataset's own, or with the target's output (stored
   * earlier, or generated now and queued for storage). Undefined when stopped meanwhile.
   */
  private async generate(
    run: RunRecord,
    record: EvalRecord,
    recordIndex: number,
    trial: number,
    prior: RunOutput | undefined,
    target: Target | undefined,
    writer: BatchWriter,
    signal: AbortSignal,
  ): Promise<{ record: EvalRecord } | { error: string } | undefined> {
    const provenance = { ...record.provenance, runId: run.id, taskId: record.id, trial };
    if (target === undefined) return { record: { ...record, provenance } };
    let generated: TargetOutput;
    if (prior !== undefined) {
      if (prior.output === undefined) return { error: prior.error ?? 'no output' };
      generated = JSON.parse(prior.output) as TargetOutput;
    } else {
      try {
        generated = await target.generate({ record, trial }, signal);
      } catch (err) {
        if (signal.aborted) return undefined;
        const error = failureText(err);
        writer.addOutput({ recordIndex, trial, recordId: record.id, error });
        return { error };
      }
      writer.addOutput({
        recordIndex,
        trial,
        recordId: record.id,
        output: JSON.stringify(generated),
      });
    }
    const { output: _output, trajectory: _trajectory, usage: _usage, ...rest } = record;
    const evaluated: EvalRecord = { ...rest, provenance };
    if (generated.output !== undefined) evaluated.output = generated.output;
    if (generated.trajectory !== undefined) evaluated.trajectory = generated.trajectory;
    if (generated.usage !== undefined) evaluated.usage = generated.usage;
    return { record: evaluated };
  }
}
