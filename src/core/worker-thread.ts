import { setPriority } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import { type ResourceLimits, Worker } from 'node:worker_threads';

/** A loop that can run in-process instead of in its worker thread. */
export interface InProcessLoop {
  start(): void;
  shutdown(): Promise<void>;
}

export interface LoopWorkerOptions<FromWorker> {
  /** The entry module, beside the caller's: `new URL('./x-worker.js', import.meta.url)`. */
  entry: URL;
  workerData: unknown;
  resourceLimits: ResourceLimits;
  /** The in-process loop, started when the worker cannot start or dies. */
  fallback: InProcessLoop;
  /** Messages from the worker other than `ready`. */
  onMessage(msg: FromWorker): void;
  /** How the warnings name the work (`trace completion`) and its fallback (`completing`). */
  work: string;
  doing: string;
  logger?: { warn(obj: object, msg: string): void } | undefined;
  /** How long `shutdown()` waits for the worker's pass in progress before ending it. */
  stopTimeoutMs?: number;
}

const STOP_TIMEOUT_MS = 10_000;

/** The nice value of a loop worker's thread. */
const BACKGROUND_NICE = 10;

/**
 * Called by a loop worker's entry: its work is background work, so on a busy machine the thread
 * answering requests comes first and the worker gets what it leaves (Linux nice values are per
 * thread; `setPriority` with no pid names the calling one). Where that is not permitted or not
 * supported the worker simply competes as an equal.
 */
export function lowerThisThreadsPriority(): void {
  try {
    setPriority(BACKGROUND_NICE);
  } catch {
    // Not permitted or not supported here.
  }
}

/**
 * A background loop run in a worker thread, the in-process loop as its fallback. The worker
 * posts `{type: 'ready'}` once it runs and ends its pass in progress on `{type: 'stop'}`. The
 * work itself is recorded in the database, so which thread does it changes nothing else.
 */
export class LoopWorker<ToWorker extends { type: string }, FromWorker extends { type: string }> {
  private worker: Worker | undefined;
  private stopped = false;
  private exited: Promise<void> | undefined;
  private ready = false;

  constructor(private readonly options: LoopWorkerOptions<FromWorker>) {}

  start(): void {
    if (this.stopped || this.worker !== undefined) return;
    const { fallback, logger, work, doing } = this.options;
    const worker = spawn(this.options);
    this.worker = worker;
    worker.on('message', (msg: FromWorker) => {
      if (msg.type === 'ready') this.ready = true;
      else this.options.onMessage(msg);
    });
    this.exited = new Promise((resolve) => {
      worker.on('error', (err) => {
        logger?.warn(
          { error: `${err.name}: ${err.message}` },
          this.ready
            ? `${work} worker failed; ${doing} in-process`
            : `${work} worker did not start; ${doing} in-process`,
        );
      });
      worker.on('exit', () => {
        this.worker = undefined;
        this.ready = false;
        if (!this.stopped) fallback.start();
        resolve();
      });
    });
  }

  /** True while the work runs in the worker thread (not the in-process fallback). */
  get inWorker(): boolean {
    return this.ready;
  }

  /** A worker thread runs (started, not stopped, not exited: the fallback does not run). */
  get running(): boolean {
    return !this.stopped && this.worker !== undefined;
  }

  /** Posts to the worker; false when none runs (stopped, or the fallback took over). */
  post(msg: ToWorker): boolean {
    if (this.stopped || this.worker === undefined) return false;
    this.worker.postMessage(msg);
    return true;
  }

  /** Stops the worker (its pass in progress finishes; a wedged one is ended) and the fallback. */
  async shutdown(): Promise<void> {
    this.stopped = true;
    const worker = this.worker;
    if (worker !== undefined) {
      worker.postMessage({ type: 'stop' });
      const timer = setTimeout(
        () => void worker.terminate(),
        this.options.stopTimeoutMs ?? STOP_TIMEOUT_MS,
      );
      timer.unref();
      await this.exited;
      clearTimeout(timer);
    }
    await this.options.fallback.shutdown();
  }
}

/**
 * A worker's young generation is its `resourceLimits.maxYoungGenerationSizeMb` only when no
 * `--max-semi-space-size` flag is set: V8 reads the flag (which `serve` sets for the main thread,
 * src/main.ts) for every isolate it creates, over the isolate's own limits, so the scoring worker
 * had 16 MB semi-spaces (a new space of 34 MB) instead of its 16 MB young generation. The flag is
 * read when an isolate's heap is set up: cleared here, it still holds for the main thread's heap,
 * set up at start, and no longer for the workers created after (Node 22 and 24 alike).
 */
function letWorkersKeepTheirLimits(): void {
  setFlagsFromString('--max-semi-space-size=0');
}

function spawn(options: LoopWorkerOptions<unknown>): Worker {
  const { workerData, resourceLimits } = options;
  return workerThread(options.entry, { workerData, resourceLimits });
}

/**
 * Starts a worker thread on `entry` (a module beside the caller's: `new URL('./x-worker.js',
 * import.meta.url)`) with its own heap limits, from the compiled files or, under tsx and vitest,
 * from the sources.
 */
export function workerThread(
  entry: URL,
  options: { workerData?: unknown; resourceLimits: ResourceLimits },
): Worker {
  letWorkersKeepTheirLimits();
  if (import.meta.url.endsWith('.ts')) {
    // Running from sources (tsx, vitest): the worker registers tsx before loading its entry.
    const source = JSON.stringify(entry.href.replace(/\.js$/, '.ts'));
    const code = `import('tsx/esm/api').then((api) => { api.register(); return import(${source}); })`;
    return new Worker(code, { ...options, eval: true });
  }
  return new Worker(entry, options);
}
