import { Worker } from 'node:worker_threads';
import type { CompletionRules, StoreConfig } from '../store/index.js';
import type { TraceCompleter } from './pipeline.js';

const STOP_TIMEOUT_MS = 10_000;

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
  | { type: 'warn'; msg: string; error: string }
  | { type: 'stopped' };

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
export class CompleterThread {
  private worker: Worker | undefined;
  private stopped = false;
  private exited: Promise<void> | undefined;
  private ready = false;

  constructor(private readonly deps: CompleterThreadDeps) {}

  start(): void {
    if (this.stopped || this.worker !== undefined) return;
    const worker = spawn(this.deps.data);
    this.worker = worker;
    worker.on('message', (msg: FromCompleterWorker) => {
      if (msg.type === 'ready') this.ready = true;
      else if (msg.type === 'completed') this.deps.onCompleted?.(msg.traces);
      else if (msg.type === 'warn') this.deps.logger?.warn({ error: msg.error }, msg.msg);
    });
    this.exited = new Promise((resolve) => {
      worker.on('error', (err) => {
        this.deps.logger?.warn(
          { error: `${err.name}: ${err.message}` },
          this.ready
            ? 'trace completion worker failed; completing in-process'
            : 'trace completion worker did not start; completing in-process',
        );
      });
      worker.on('exit', () => {
        this.worker = undefined;
        this.ready = false;
        if (!this.stopped) this.deps.fallback.start();
        resolve();
      });
    });
  }

  /** True while completion runs in the worker thread (not the in-process fallback). */
  get inWorker(): boolean {
    return this.ready;
  }

  /** Stops the worker (waiting for a pass in progress) and the fallback. Safe twice. */
  async shutdown(): Promise<void> {
    this.stopped = true;
    const worker = this.worker;
    if (worker !== undefined) {
      worker.postMessage({ type: 'stop' });
      // A pass in progress finishes within its transaction; a wedged worker is ended.
      const timer = setTimeout(() => void worker.terminate(), STOP_TIMEOUT_MS);
      timer.unref();
      await this.exited;
      clearTimeout(timer);
    }
    await this.deps.fallback.shutdown();
  }
}

function spawn(data: CompleterWorkerData): Worker {
  if (import.meta.url.endsWith('.ts')) {
    // Running from sources (tsx, vitest): the worker registers tsx before loading its entry.
    const entry = new URL('./completer-worker.ts', import.meta.url).href;
    const code = `import('tsx/esm/api').then((api) => { api.register(); return import(${JSON.stringify(entry)}); })`;
    return new Worker(code, { eval: true, workerData: data, resourceLimits: RESOURCE_LIMITS });
  }
  return new Worker(new URL('./completer-worker.js', import.meta.url), {
    workerData: data,
    resourceLimits: RESOURCE_LIMITS,
  });
}
