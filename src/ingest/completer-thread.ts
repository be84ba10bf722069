import { LoopWorker } from '../core/index.js';
import type { CompletionRules, StoreConfig } from '../store/index.js';
import type { TraceCompleter } from './pipeline.js';

/**
 * The worker's heap limits, as the server's own (src/main.ts). Under an old-generation limit below
 * 2 GB, V8 lets an old generation grow less past its live size before collecting it (1.6× at
 * 1 GB; 4× under Node's default of 4 GB): the worker's heap under sustained ingest went from 123
 * to 75 MB, with no measurable CPU cost. A young generation of 48 MB is 16 MB semi-spaces, Node
 * 22's default (Node 24 doubles it on a large machine). A batch that needs more ends the worker,
 * and completion goes on in-process.
 */
const RESOURCE_LIMITS = { maxOldGenerationSizeMb: 1024, maxYoungGenerationSizeMb: 48 };

/** What the completer worker needs to open its own store connection and apply the rules. */
export interface CompleterWorkerData {
  store: StoreConfig;
  dataDir: string | undefined;
  rules: CompletionRules;
  /** `traces.limits.max_events_per_span` (see CompleterDeps). */
  maxEventsPerSpan: number;
  intervalMs?: number;
}

export type FromCompleterWorker =
  | { type: 'ready' }
  | { type: 'completed'; traces: number }
  | { type: 'warn'; msg: string; error: string };

export interface CompleterThreadDeps {
  data: CompleterWorkerData;
  /** The in-process completer, used when the worker cannot start (and by tests via `tick()`). */
  fallback: TraceCompleter;
  onCompleted?: (traces: number) => void;
  logger?: { warn(obj: object, msg: string): void };
}

/**
 * Runs trace completion in a worker thread with its own store connection. Completion is still
 * recorded in the database, conditional on `last_span_at`, so the worker changes where the CPU is
 * spent and nothing else: a crash or restart re-finds open traces. When the worker cannot load
 * (an environment without worker support for the sources), the in-process completer runs instead.
 */
export class CompleterThread extends LoopWorker<{ type: 'stop' }, FromCompleterWorker> {
  constructor(deps: CompleterThreadDeps) {
    super({
      entry: new URL('./completer-worker.js', import.meta.url),
      workerData: deps.data,
      resourceLimits: RESOURCE_LIMITS,
      fallback: deps.fallback,
      work: 'trace completion',
      doing: 'completing',
      logger: deps.logger,
      onMessage: (msg) => {
        if (msg.type === 'completed') deps.onCompleted?.(msg.traces);
        else if (msg.type === 'warn') deps.logger?.warn({ error: msg.error }, msg.msg);
      },
    });
  }
}
