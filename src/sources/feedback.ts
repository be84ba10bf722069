import type { Clock } from '../core/index.js';
import type { ResultSink, StoredResults } from '../policies/index.js';
import type { StoreTransaction } from '../store/index.js';
import { feedbackStoreId, sinkKey } from './sinks.js';
import { type SourceDirectory, writeBackRows } from './write-back.js';

/** The engine's sink for pushed traces: each scored metric queued for every sink of the policy. */
export class FeedbackSink implements ResultSink {
  constructor(private readonly deps: { directory: SourceDirectory; clock: Clock }) {}

  async onStored(tx: StoreTransaction, stored: StoredResults): Promise<void> {
    const { trace } = stored;
    if (trace.source !== '') return;
    const sinks = await this.deps.directory.sinksOf(trace.project, stored.policy, tx);
    if (sinks.length === 0) return;
    // MLflow's id of the trace may be on its root span (read only for an MLflow sink).
    const root = sinks.some((s) => s.spec.connector === 'mlflow')
      ? (await tx.traces.get(trace.project, trace.traceId))?.root
      : undefined;
    const now = this.deps.clock.now();
    const rows = sinks.flatMap((sink, index) =>
      writeBackRows(stored, {
        source: sinkKey(stored.policy, index),
        storeId: feedbackStoreId(sink.spec.connector, trace.traceId, root),
        now,
      }),
    );
    if (rows.length > 0) await tx.sources.enqueueWriteBacks(rows, now);
  }
}
