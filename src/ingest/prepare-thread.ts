import type { ResourceLimits, Worker } from 'node:worker_threads';
import {
  type ErrorKind,
  isTouchstoneError,
  Semaphore,
  TouchstoneError,
  workerThread,
} from '../core/index.js';
import type { RedactionConfig } from '../redaction/index.js';
import { IngestErrors } from './error-codes.js';
import type { SpanLimits } from './limits.js';
import { decodeOtlpJson, decodeOtlpJsonInSlices } from './otlp/json.js';
import { decodeOtlpProtobuf, decodeOtlpProtobufInSlices } from './otlp/protobuf.js';
import {
  type IngestResult,
  type IngestService,
  type IngestTarget,
  nextTurn,
  type PrepareDeps,
  type PreparedSpans,
  prepareSpans,
} from './pipeline.js';
import type { DecodedSpans, DecodeOptions } from './types.js';

/**
 * A prepare worker's heap limits: as the server's own (src/main.ts), so that a request the thread
 * answering requests could prepare, a worker can too.
 */
const RESOURCE_LIMITS = { maxOldGenerationSizeMb: 1024, maxYoungGenerationSizeMb: 16 };

/** Restarts of a worker that failed after it ran, before its jobs go in-process for good. */
const MAX_RESTARTS = 3;

/** An OTLP trace export request as received: what the worker decodes and prepares. */
export interface PrepareRequest {
  target: IngestTarget;
  encoding: 'protobuf' | 'json';
  /** Bytes for protobuf, text for JSON. */
  body: Uint8Array | string;
  options: DecodeOptions;
}

/** What a prepare worker needs to redact, limit and normalize as the server does. */
export interface PrepareWorkerData {
  redaction: RedactionConfig;
  limits: SpanLimits;
  /** `traces.complete_on_arrival`. */
  completeOnArrival: boolean;
}

/** An error as it crosses threads: a TouchstoneError keeps its code, kind and details. */
export interface SentError {
  message: string;
  code?: string;
  kind?: ErrorKind;
  retryable?: boolean;
  details?: { path: string; message: string }[];
}

/**
 * Decodes an OTLP trace request and prepares its spans (`prepareSpans`). With `pause`, in slices
 * (the thread answering requests); without, through (a worker thread).
 */
export async function prepareOtlp(
  deps: PrepareDeps,
  request: PrepareRequest,
  pause: (() => Promise<void>) | undefined,
): Promise<PreparedSpans> {
  const { body, options } = request;
  let decoded: DecodedSpans;
  if (typeof body === 'string') {
    decoded =
      pause === undefined
        ? decodeOtlpJson(body, options)
        : await decodeOtlpJsonInSlices(body, options, pause);
  } else {
    // A Buffer posted to a worker arrives as a plain Uint8Array; the decoder reads ids with
    // Buffer's methods.
    const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    decoded =
      pause === undefined
        ? decodeOtlpProtobuf(bytes, options)
        : await decodeOtlpProtobufInSlices(bytes, options, pause);
  }
  return prepareSpans(deps, request.target, decoded, pause);
}

export type ToPrepareWorker = { id: number; request: PrepareRequest };
export type FromPrepareWorker =
  | { type: 'ready' }
  | { type: 'prepared'; id: number; prepared: PreparedSpans }
  | { type: 'failed'; id: number; error: SentError };

export function sendableError(err: unknown): SentError {
  if (isTouchstoneError(err)) {
    const { message, code, kind, retryable, details } = err;
    return { message, code, kind, retryable, details };
  }
  return { message: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
}

function received(sent: SentError): Error {
  if (sent.code === undefined || sent.kind === undefined) return new Error(sent.message);
  return new TouchstoneError(
    { code: sent.code, kind: sent.kind, retryable: sent.retryable ?? false, doc: '' },
    sent.message,
    { details: sent.details ?? [] },
  );
}

interface Job {
  resolve: (prepared: PreparedSpans) => void;
  reject: (err: Error) => void;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  restarts: number;
  jobs: Map<number, Job>;
}

export interface PrepareThreadsDeps {
  data: PrepareWorkerData;
  /** Worker threads (`traces.ingest_threads`). */
  size: number;
  /**
   * Requests given to the workers and not yet stored, at most (see `reserve`): enough to keep
   * the workers and the writers busy.
   */
  ahead: number;
  logger?: { warn(obj: object, msg: string): void };
  /** The workers' heap limits; by default the server's own. */
  resourceLimits?: ResourceLimits;
}

/**
 * Worker threads that decode, limit, redact, normalize and encode OTLP trace requests
 * (`prepareSpans`), leaving the thread that holds the store's connection only the statements.
 * A request goes to the worker with the fewest requests in hand; each worker prepares one at a
 * time. Nothing is stored by a worker, so a worker that dies loses nothing acknowledged: the
 * requests it held are answered with a retryable error and the worker is started again (up to
 * MAX_RESTARTS times; then, as when none could start, requests are prepared in-process, in
 * slices, by the caller).
 */
export class PrepareThreads {
  private readonly slots: Slot[] = [];
  private nextId = 0;
  private stopped = false;
  private readonly ahead: Semaphore;

  constructor(private readonly deps: PrepareThreadsDeps) {
    this.ahead = new Semaphore(deps.ahead);
  }

  /**
   * Waits for a place among the requests prepared ahead of their store; the returned function
   * gives it back (once stored, or failed). A prepared request is several times its body, so
   * without this every admitted request was held prepared while the writers caught up: under
   * overload, 20 MB more at the peak (docs/performance.md).
   */
  reserve(): Promise<() => void> {
    return this.ahead.acquire();
  }

  start(): void {
    if (this.stopped) return;
    while (this.slots.length < this.deps.size) this.slots.push(this.spawn(0));
  }

  /** Workers that run (ready for requests). */
  get running(): number {
    return this.slots.filter((s) => s.ready).length;
  }

  /**
   * Prepares a request in the worker with the fewest in hand; undefined when no worker runs
   * (not started yet, stopped, or none could start): the caller prepares it in-process then.
   */
  prepare(request: PrepareRequest): Promise<PreparedSpans> | undefined {
    let slot: Slot | undefined;
    for (const s of this.slots) {
      if (s.ready && (slot === undefined || s.jobs.size < slot.jobs.size)) slot = s;
    }
    if (slot === undefined || this.stopped) return undefined;
    const id = ++this.nextId;
    const { worker, jobs } = slot;
    return new Promise((resolve, reject) => {
      jobs.set(id, { resolve, reject });
      worker.postMessage({ id, request } satisfies ToPrepareWorker);
    });
  }

  /** Ends the workers; requests they hold are answered with a retryable error. */
  async shutdown(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.slots.map((s) => s.worker.terminate()));
    this.slots.length = 0;
  }

  private spawn(restarts: number): Slot {
    const worker = workerThread(new URL('./prepare-worker.js', import.meta.url), {
      workerData: this.deps.data,
      resourceLimits: this.deps.resourceLimits ?? RESOURCE_LIMITS,
    });
    const slot: Slot = { worker, ready: false, restarts, jobs: new Map() };
    worker.on('message', (msg: FromPrepareWorker) => {
      if (msg.type === 'ready') {
        slot.ready = true;
        return;
      }
      const job = slot.jobs.get(msg.id);
      if (job === undefined) return;
      slot.jobs.delete(msg.id);
      if (msg.type === 'prepared') job.resolve(msg.prepared);
      else job.reject(received(msg.error));
    });
    let failure = '';
    worker.on('error', (err) => {
      failure = `${err.name}: ${err.message}`;
    });
    worker.on('exit', () => {
      const ran = slot.ready;
      slot.ready = false;
      for (const job of slot.jobs.values()) {
        job.reject(
          IngestErrors.INGEST_WORKER_STOPPED(
            'the thread preparing this request stopped before it was stored; nothing of it was kept: send it again',
          ),
        );
      }
      slot.jobs.clear();
      const at = this.slots.indexOf(slot);
      if (this.stopped || at === -1) return;
      const again = ran && restarts < MAX_RESTARTS;
      this.deps.logger?.warn(
        { error: failure || 'exited' },
        again
          ? 'ingest worker failed; starting it again'
          : ran
            ? 'ingest worker failed again; preparing requests in-process'
            : 'ingest worker did not start; preparing requests in-process',
      );
      if (again) this.slots[at] = this.spawn(restarts + 1);
      else this.slots.splice(at, 1);
    });
    return slot;
  }
}

/** Runs `work` in the request's turn to write (the OTLP route's turnstile). */
export type WriteTurn = <T>(work: () => Promise<T>) => Promise<T>;

/**
 * Receives an OTLP trace request: decoded and prepared by a worker thread when one runs (this
 * thread meanwhile stores other requests; it waits for a place among those prepared ahead,
 * `reserve`), then stored in `turn`; without a worker, decoded and prepared in slices within the
 * turn.
 */
export async function receiveOtlpTraces(
  ingest: Pick<IngestService, 'store' | 'preparing'>,
  threads: PrepareThreads | undefined,
  request: PrepareRequest,
  turn: WriteTurn,
): Promise<IngestResult> {
  if (threads !== undefined && threads.running > 0) {
    const release = await threads.reserve();
    try {
      const inWorker = threads.prepare(request);
      if (inWorker !== undefined) {
        const prepared = await inWorker;
        return await turn(() => ingest.store(request.target, prepared));
      }
    } finally {
      release();
    }
  }
  return turn(async () =>
    ingest.store(request.target, await prepareOtlp(ingest.preparing, request, nextTurn)),
  );
}
