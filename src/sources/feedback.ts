import type { Clock } from '../core/index.js';
import type { ResultSink, StoredResults } from '../policies/index.js';
import type { StoredTrace, StoreTransaction } from '../store/index.js';
import { feedbackStoreId, mlflowTraceIdIn, sinkKey, spanCarriers } from './sinks.js';
import { type SourceDirectory, SourceResultSink, writeBackRows } from './write-back.js';

/** The engine's sink for pushed traces: each scored metric queued for every sink of the policy. */
export class FeedbackSink implements ResultSink {
  constructor(private readonly deps: { directory: SourceDirectory; clock: Clock }) {}

  async onStored(tx: StoreTransaction, stored: StoredResults): Promise<void> {
    const { trace } = stored;
    if (trace.source !== '') return;
    const sinks = await this.deps.directory.sinksOf(trace.project, stored.policy, tx);
    if (sinks.length === 0) return;
    const mlflowId = sinks.some((s) => s.spec.connector === 'mlflow')
      ? await mlflowIdOf(tx, trace)
      : undefined;
    const now = this.deps.clock.now();
    const rows = sinks.flatMap((sink, index) =>
      writeBackRows(stored, {
        source: sinkKey(stored.policy, index),
        storeId: feedbackStoreId(sink.spec.connector, trace.traceId, mlflowId),
        now,
      }),
    );
    if (rows.length > 0) await tx.sources.enqueueWriteBacks(rows, now);
  }
}

/**
 * MLflow's own id of a pushed trace, when a span names it: the stored root (its attributes and
 * resource) first, then every span, root first, read only when the root does not name it.
 */
async function mlflowIdOf(tx: StoreTransaction, trace: StoredTrace): Promise<string | undefined> {
  const root = (await tx.traces.get(trace.project, trace.traceId))?.root;
  const onRoot = mlflowTraceIdIn([root?.attributes, root?.resource]);
  if (onRoot !== undefined) return onRoot;
  const spans = await tx.traces.spans(trace.project, trace.traceId, { maxEventsPerSpan: 0 });
  return mlflowTraceIdIn(spanCarriers(spans));
}

/**
 * What stored results are handed to: write-back to the store a trace came from, and the
 * `trace_feedback` sinks of policies (both read sources through `directory`).
 */
export function resultSinks(directory: SourceDirectory, clock: Clock): ResultSink[] {
  return [new SourceResultSink({ directory, clock }), new FeedbackSink({ directory, clock })];
}
