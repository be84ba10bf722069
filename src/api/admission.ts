import { Transform } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isTouchstoneError } from '../core/index.js';
import { ApiErrors } from './error-codes.js';

/**
 * Load shedding for writes. Every request that may change something (any method but GET, HEAD
 * and OPTIONS: OTLP ingest, REST writes, Connect RPC) is admitted before its body is read, against
 * two budgets: requests in flight and body bytes they hold (the declared Content-Length at once,
 * streamed and inflated bytes as they arrive). Past either, it is refused at once with 503 and
 * `Retry-After` instead of waiting in a queue that only grows. Reads are never counted, so they
 * keep answering while writes are shed. OTLP requests then take turns (`Turnstile`) to decode and
 * store, so the database connection never holds more than a few of them ahead of a read.
 */

/** Why a write was refused. */
export type ShedReason = 'requests' | 'bytes' | 'queue';

export interface AdmissionObserver {
  onShed(reason: ShedReason): void;
}

export interface AdmissionLimits {
  /** Writes in flight (from their headers to the end of their answer). */
  maxRequests: number;
  /** Body bytes those writes hold; one larger write is let in alone. */
  maxBytes: number;
}

/** What a refused write is told: retry after this many seconds… */
export const SHED_RETRY_AFTER_SECONDS = 1;
/**
 * …or, refused for the backlog of OTLP requests, after the time the server expects to need for
 * it, up to this. Every refusal costs the server a request's worth of work, so under sustained
 * overload fewer retries leave more for storing; the OTLP/HTTP exporters honour `Retry-After`
 * only while it fits in their 10 s timeout, hence the cap.
 */
export const MAX_RETRY_AFTER_SECONDS = 3;

/**
 * Longest an admitted OTLP request waits for its turn before it is refused: exporters give up on
 * a request after 10 s, which must also cover sending it, its own turn and the answer (each of
 * which takes seconds on a saturated machine), and a request still queued then is only sent again.
 */
export const MAX_TURN_WAIT_MS = 3_000;

/** One admitted write: its share of the byte budget, held until its answer and its work end. */
export class Ticket {
  private reserved = 0;
  /** The response, plus each `hold()` not yet released. */
  private holds = 1;
  private answered = false;

  constructor(private readonly admission: WriteAdmission) {}

  /** Grows the reservation to `total` bytes; false when that would pass the byte budget. */
  ensure(total: number): boolean {
    if (total <= this.reserved || this.holds === 0) return true;
    if (!this.admission.reserve(total - this.reserved, this.reserved)) return false;
    this.reserved = total;
    return true;
  }

  /** Keeps the bytes counted while work on them goes on (after a client hung up, too). */
  hold(): () => void {
    this.holds++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.drop();
    };
  }

  /** The response ended (answered or cut off); safe to call more than once. */
  readonly responseEnded = (): void => {
    if (this.answered) return;
    this.answered = true;
    this.drop();
  };

  private drop(): void {
    this.holds--;
    if (this.holds > 0) return;
    this.admission.leave(this.reserved);
    this.reserved = 0;
  }
}

export class WriteAdmission {
  private requests = 0;
  private bytes = 0;

  constructor(
    readonly limits: AdmissionLimits,
    private readonly observer?: AdmissionObserver,
  ) {}

  get inFlight(): { requests: number; bytes: number } {
    return { requests: this.requests, bytes: this.bytes };
  }

  /** Admits a write declaring `bytes` of body, or throws OVERLOADED. */
  admit(bytes: number): Ticket {
    if (this.requests >= this.limits.maxRequests) throw this.shed('requests');
    const ticket = new Ticket(this);
    this.requests++;
    if (!ticket.ensure(bytes)) {
      this.requests--;
      throw this.shed('bytes');
    }
    return ticket;
  }

  /** Counts `more` bytes for a ticket already holding `held`, when the budget allows. */
  reserve(more: number, held: number): boolean {
    // A write larger than the whole budget still gets in when it is the only one holding bytes.
    if (this.bytes + more > this.limits.maxBytes && this.bytes > held) return false;
    this.bytes += more;
    return true;
  }

  leave(bytes: number): void {
    this.requests--;
    this.bytes -= bytes;
  }

  /** Counts a refusal and returns the error that answers it. */
  shed(reason: ShedReason, retryAfterSeconds = SHED_RETRY_AFTER_SECONDS): Error {
    this.observer?.onShed(reason);
    const limit =
      reason === 'requests'
        ? `its limit of ${this.limits.maxRequests} write requests in flight`
        : reason === 'bytes'
          ? `its limit of ${this.limits.maxBytes} bytes of write bodies in flight`
          : 'its limit of time a write may wait for its turn';
    return ApiErrors.OVERLOADED(`the server is at ${limit}; retry after Retry-After`, {
      retryAfterSeconds,
    });
  }
}

/**
 * Whether an error is a load-shedding refusal. Those are counted by
 * `touchstone_requests_shed_total`, not logged one by one: under the load they shed, a log line
 * each would cost more than the refusal.
 */
export function isShed(err: unknown): boolean {
  return isTouchstoneError(err) && err.code === ApiErrors.OVERLOADED.code;
}

const tickets = new WeakMap<FastifyRequest, Ticket>();

/** The admission ticket of a write request (undefined for reads). */
export function ticketOf(request: FastifyRequest): Ticket | undefined {
  return tickets.get(request);
}

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

function declaredLength(request: FastifyRequest): number | undefined {
  const raw = request.headers['content-length'];
  if (raw === undefined) return undefined;
  const n = Number(raw);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/**
 * Admits every write before its body is read, and counts the bytes of bodies that declare no
 * length as they arrive. Install after the auth hook: a caller without a valid key (when keys are
 * required) is refused before it can hold a place, so only key holders can fill the budget.
 */
export function installAdmission(app: FastifyInstance, admission: WriteAdmission): void {
  app.addHook('onRequest', async (request, reply) => {
    if (READS.has(request.method)) return;
    const ticket = admission.admit(declaredLength(request) ?? 0);
    tickets.set(request, ticket);
    reply.raw.once('close', ticket.responseEnded);
  });
  app.addHook('preParsing', async (request, _reply, payload) => {
    const ticket = tickets.get(request);
    if (ticket === undefined || declaredLength(request) !== undefined) return payload;
    // A stream read by its handler (Connect RPC) would also feed a counter nobody drains, which
    // would keep the whole body; such calls count their Content-Length only (limits: docs).
    if (request.routeOptions.config.readsRawBody === true) return payload;
    return payload.pipe(countingStream(ticket, admission));
  });
}

/** Passes bytes through, growing the ticket's reservation; fails once the budget refuses. */
function countingStream(ticket: Ticket, admission: WriteAdmission): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      seen += chunk.length;
      if (!ticket.ensure(seen)) {
        callback(admission.shed('bytes'));
        return;
      }
      callback(null, chunk);
    },
  });
}

/**
 * Turns for the work of OTLP requests (decode, redact, store): at most `concurrency` at once, the
 * rest in arrival order, and a turn starts only from `setImmediate`, one per turn of the event
 * loop. With SQLite a request's whole work runs without yielding (every store call completes
 * synchronously), so a turn started where its body ended would run every body that completed in
 * the same poll of the sockets back to back, and reads and health checks would wait for all of
 * them; started one per loop iteration, every waiting socket is served between two of them. A
 * request that waited `maxWaitMs` is refused (503) instead of worked on: its client is about to
 * give up on it.
 */
export class Turnstile {
  private active = 0;
  private scheduled = false;
  private readonly queue: (() => void)[] = [];
  /** Moving average of a turn's length, for the wait a new request would have. */
  private turnMs = 0;

  constructor(
    private readonly concurrency: number,
    private readonly maxWaitMs: number,
    private readonly admission: WriteAdmission,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * Refuses (OVERLOADED) a request that would wait longer than `maxWaitMs` behind those already
   * waiting, before its body is read.
   */
  refuseIfBacklogged(): void {
    if (this.expectedWaitMs() > this.maxWaitMs) throw this.refusal();
  }

  /** How long a request arriving now would wait for its turn, from recent turns' length. */
  private expectedWaitMs(): number {
    return ((this.queue.length + this.active) * this.turnMs) / this.concurrency;
  }

  /** A backlog refusal, telling the client to come back once the backlog is expected gone. */
  private refusal(): Error {
    const seconds = Math.ceil(this.expectedWaitMs() / 1000);
    return this.admission.shed(
      'queue',
      Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(SHED_RETRY_AFTER_SECONDS, seconds)),
    );
  }

  /**
   * Waits for a turn; resolves to the function that ends it. Throws OVERLOADED after `maxWaitMs`,
   * or once `signal` aborts (the client hung up: its body is let go without being worked on).
   */
  async take(signal?: AbortSignal): Promise<() => void> {
    // A client that left while its request was prepared (in a worker thread) gets no turn either.
    if (signal?.aborted === true) {
      throw ApiErrors.OVERLOADED('the client left before its request had its turn');
    }
    const enqueuedAt = this.now();
    await new Promise<void>((resolve, reject) => {
      this.queue.push(resolve);
      signal?.addEventListener(
        'abort',
        () => {
          const at = this.queue.indexOf(resolve);
          if (at === -1) return;
          this.queue.splice(at, 1);
          reject(ApiErrors.OVERLOADED('the client left while its request waited for its turn'));
        },
        { once: true },
      );
      this.schedule();
    });
    const startedAt = this.now();
    if (startedAt - enqueuedAt > this.maxWaitMs) {
      this.active--;
      this.schedule();
      throw this.refusal();
    }
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      this.active--;
      const took = this.now() - startedAt;
      this.turnMs = this.turnMs === 0 ? took : 0.8 * this.turnMs + 0.2 * took;
      this.schedule();
    };
    return end;
  }

  private schedule(): void {
    if (this.scheduled || this.queue.length === 0 || this.active >= this.concurrency) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const next = this.queue.shift();
      if (next === undefined) return;
      this.active++;
      next();
      this.schedule();
    });
  }
}
