import type { Worker } from 'node:worker_threads';
import { workerThread } from '../core/index.js';
import type { WasiCall } from './wasi.js';
import type { Ending, FromWorker, ToWorker } from './worker.js';

/**
 * A pool of worker threads running plug-in modules. Each worker holds every loaded compiled
 * module (posted once: V8 shares the code, nothing is recompiled) and runs one record at a time.
 * The wall-clock deadline is enforced from here: wasm has no fuel in V8, but terminating the
 * thread interrupts it at the next loop back-edge, so a module that never returns costs one
 * worker, which is replaced, and never the server's event loop.
 */

export type RunEnding = Ending | { kind: 'deadline' };

interface Job {
  sha256: string;
  call: WasiCall;
  timeoutMs: number;
  resolve: (ending: RunEnding) => void;
}

interface Slot {
  worker: Worker;
  job: Job | undefined;
  timer: NodeJS.Timeout | undefined;
}

/** The JS heap a worker needs for its host code and captured output (wasm memory is outside). */
const RESOURCE_LIMITS = { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 16 };

function spawn(): Worker {
  return workerThread(new URL('./worker.js', import.meta.url), { resourceLimits: RESOURCE_LIMITS });
}

export class WorkerPool {
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private readonly modules = new Map<string, WebAssembly.Module>();
  private stopped = false;
  /** Workers replaced after a deadline or a crash (for tests and metrics). */
  replaced = 0;

  constructor(readonly size: number) {}

  /** Starts the workers now, so the first records do not pay for thread start-up. */
  start(): void {
    while (!this.stopped && this.slots.length < this.size) this.slots.push(this.newSlot());
  }

  /** Hands a compiled module to every worker, present and future. */
  load(sha256: string, module: WebAssembly.Module): void {
    if (this.modules.has(sha256)) return;
    this.modules.set(sha256, module);
    for (const slot of this.slots) this.post(slot, { type: 'module', sha256, module });
  }

  has(sha256: string): boolean {
    return this.modules.has(sha256);
  }

  run(sha256: string, call: WasiCall, timeoutMs: number): Promise<RunEnding> {
    if (this.stopped)
      return Promise.resolve({ kind: 'trap', message: 'the plug-in pool is stopped' });
    this.start();
    return new Promise((resolve) => {
      this.queue.push({ sha256, call, timeoutMs, resolve });
      this.dispatch();
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const job of this.queue.splice(0))
      job.resolve({ kind: 'trap', message: 'the server is stopping' });
    const slots = this.slots.splice(0);
    for (const slot of slots) {
      clearTimeout(slot.timer);
      slot.job?.resolve({ kind: 'trap', message: 'the server is stopping' });
    }
    await Promise.all(slots.map((s) => s.worker.terminate()));
  }

  private post(slot: Slot, msg: ToWorker): void {
    slot.worker.postMessage(msg);
  }

  private newSlot(): Slot {
    const slot: Slot = { worker: spawn(), job: undefined, timer: undefined };
    slot.worker.on('message', (msg: FromWorker) => this.finish(slot, msg.ending));
    // A worker that dies on its own (out of heap, an engine fault) fails its record, not the pool.
    slot.worker.on('error', () => undefined);
    slot.worker.on('exit', () => this.lost(slot));
    slot.worker.unref();
    for (const [sha256, module] of this.modules) {
      slot.worker.postMessage({ type: 'module', sha256, module } satisfies ToWorker);
    }
    return slot;
  }

  private dispatch(): void {
    for (const slot of this.slots) {
      if (slot.job !== undefined) continue;
      const job = this.queue.shift();
      if (job === undefined) return;
      slot.job = job;
      slot.timer = setTimeout(() => this.replace(slot, { kind: 'deadline' }), job.timeoutMs);
      this.post(slot, { type: 'run', sha256: job.sha256, call: job.call });
    }
  }

  private finish(slot: Slot, ending: RunEnding): void {
    const job = slot.job;
    clearTimeout(slot.timer);
    slot.job = undefined;
    slot.timer = undefined;
    job?.resolve(ending);
    this.dispatch();
  }

  /**
   * A worker ended on its own. Busy, it fails its record and is replaced; idle, it is dropped and
   * the next record starts another, so a worker that cannot start is not respawned in a loop.
   */
  private lost(slot: Slot): void {
    if (slot.job !== undefined) {
      this.replace(slot, { kind: 'trap', message: 'the worker stopped' });
      return;
    }
    const at = this.slots.indexOf(slot);
    if (at !== -1) this.slots.splice(at, 1);
  }

  /** Ends `slot`'s record with `ending`, terminates its worker and puts a fresh one in its place. */
  private replace(slot: Slot, ending: RunEnding): void {
    const at = this.slots.indexOf(slot);
    if (at === -1) return;
    this.replaced++;
    slot.worker.removeAllListeners('exit');
    void slot.worker.terminate();
    const fresh = this.newSlot();
    this.slots[at] = fresh;
    this.finish(slot, ending);
  }
}
