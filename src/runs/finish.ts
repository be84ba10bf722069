import { type Clock, isTouchstoneError } from '../core/index.js';
import type { EvaluatorRegistry } from '../evaluators/index.js';
import type { RunRecord, Store, StoreTransaction } from '../store/index.js';
import type { RunPayload } from '../webhooks/index.js';
import { evaluateGates, type GateResult } from './gates.js';
import { type CompiledRun, compileStoredSpec } from './spec.js';
import type { RunStatus } from './states.js';
import { type MetricSummary, summarize } from './summaries.js';
import { runView } from './view.js';

/** Where a run's final events go: the webhook outbox, inside the finishing transaction. */
export interface RunEventSink {
  /** `run.finished`, then `run.gate_failed` when the run FAILED a gate. */
  emitRunFinished(tx: StoreTransaction, project: string, run: RunPayload): Promise<string[]>;
}

export interface FinishDeps {
  store: Store;
  clock: Clock;
  registry: EvaluatorRegistry;
  events: RunEventSink;
}

export interface FinishOutcome {
  /** The run was cancelled: CANCELLED whatever its results say. */
  cancelled?: boolean;
  /** The run could not run (dataset, target, spec): ERROR with this safe text. */
  error?: string;
}

/** The final status: CANCELLED, ERROR (could not run, or nothing scored), FAILED (a gate), SUCCEEDED. */
export function finalStatus(
  outcome: FinishOutcome,
  summaries: readonly MetricSummary[],
  gates: readonly GateResult[],
): { status: RunStatus; error?: string } {
  if (outcome.cancelled === true) return { status: 'RUN_STATUS_CANCELLED' };
  if (outcome.error !== undefined) return { status: 'RUN_STATUS_ERROR', error: outcome.error };
  // Per evaluator: every summary of one evaluator carries the same counts.
  const counts = new Map(summaries.map((s) => [s.evaluator, s.counts]));
  let scored = 0;
  let errors = 0;
  let skipped = 0;
  for (const c of counts.values()) {
    scored += c.scored;
    errors += c.error;
    skipped += c.skipped;
  }
  if (scored === 0) {
    // A run that measured nothing never passes.
    return {
      status: 'RUN_STATUS_ERROR',
      error:
        errors + skipped === 0
          ? 'no result was produced'
          : `no result was scored (${errors} errors, ${skipped} skipped); see the results`,
    };
  }
  if (gates.some((g) => !g.passed)) return { status: 'RUN_STATUS_FAILED' };
  return { status: 'RUN_STATUS_SUCCEEDED' };
}

/**
 * Gives a run its final status, summaries and gates from the results stored for it, and writes
 * `run.finished` (and `run.gate_failed`) to the outbox in the same transaction. With `holder`,
 * only while that executor holds the run's lease; without, only while no live lease holds it.
 * Returns the finished run, or undefined when the condition failed (another executor finished or
 * holds it).
 */
export async function finishRun(
  deps: FinishDeps,
  run: RunRecord,
  holder: string | undefined,
  outcome: FinishOutcome,
  /** Summaries the caller built while writing the results; read from the store when absent. */
  built?: MetricSummary[],
): Promise<RunRecord | undefined> {
  let summaries: MetricSummary[] = [];
  let gates: GateResult[] = [];
  let error = outcome.error;
  let compiled: CompiledRun | undefined;
  try {
    compiled = compileStoredSpec(run.spec, deps.registry);
  } catch (err) {
    // The spec no longer binds (an evaluator type this build lacks): nothing can be summarised.
    if (!isTouchstoneError(err)) throw err;
    error ??= `the run spec cannot be run by this server: ${err.message}`;
  }
  if (compiled !== undefined) {
    summaries =
      built ??
      summarize(compiled.metrics, await deps.store.runs.allResults(run.id), compiled.spec.trials);
    gates = evaluateGates(compiled.gates, summaries);
  }
  const final = finalStatus(
    { ...outcome, ...(error === undefined ? {} : { error }) },
    summaries,
    gates,
  );
  const now = deps.clock.now();
  return deps.store.withTransaction(async (tx) => {
    const finished = await tx.runs.finish(run.id, holder, now, {
      status: final.status,
      summaries,
      gates,
      ...(final.error === undefined ? {} : { error: final.error }),
      finishedAt: now,
    });
    if (finished === undefined) return undefined;
    await deps.events.emitRunFinished(tx, finished.project, runView(finished, false));
    return finished;
  });
}
