import { BackgroundLoop, type Clock, CoreErrors, newId } from '../core/index.js';
import type { AuditEntry, AuditFilter, AuditStore } from '../store/index.js';
import { authorize, type Principal } from './principal.js';

/** Entries waiting to be written; past it new entries are dropped and counted. */
export const AUDIT_BUFFER_MAX = 10_000;
/** How often waiting entries are written (one insert per batch). */
const FLUSH_INTERVAL_MS = 1_000;
const SWEEP_INTERVAL_MS = 60 * 60_000;
const SWEEP_BATCH = 5_000;
const BATCH = 500;

export interface AuditTrailDeps {
  store: AuditStore;
  clock: Clock;
  /** Entries older than this are deleted by the hourly sweep. */
  retentionMs: number;
  logger: { warn(obj: object, msg: string): void };
}

export type AuditRecord = Omit<AuditEntry, 'id' | 'at'>;

/**
 * The audit trail of writes and refusals. Entries are buffered and written in batches (a refusal
 * costs no database write of its own, so a flood of bad credentials cannot become a flood of
 * inserts); a full buffer drops and counts (`dropped`), and the loss is logged.
 */
export class AuditTrail {
  private buffer: AuditEntry[] = [];
  private droppedSinceLog = 0;
  /** Entries dropped because the buffer was full, since start. */
  dropped = 0;
  private readonly flusher: BackgroundLoop;
  private readonly sweeper: BackgroundLoop;

  constructor(private readonly deps: AuditTrailDeps) {
    const warn = (msg: string) => (err: unknown) => deps.logger.warn({ err }, msg);
    this.flusher = new BackgroundLoop(
      () => this.flush(),
      FLUSH_INTERVAL_MS,
      warn('audit write failed'),
    );
    this.sweeper = new BackgroundLoop(
      () => this.sweep(),
      SWEEP_INTERVAL_MS,
      warn('audit sweep failed'),
    );
  }

  record(entry: AuditRecord): void {
    if (this.buffer.length >= AUDIT_BUFFER_MAX) {
      this.dropped++;
      this.droppedSinceLog++;
      return;
    }
    this.buffer.push({
      id: newId('aud'),
      at: new Date(this.deps.clock.now()).toISOString(),
      ...entry,
    });
  }

  /** Writes every waiting entry (tests call it; the loop does every second). */
  async flush(): Promise<void> {
    if (this.droppedSinceLog > 0) {
      this.deps.logger.warn(
        { dropped: this.droppedSinceLog },
        'audit entries dropped: buffer full',
      );
      this.droppedSinceLog = 0;
    }
    while (this.buffer.length > 0) {
      const batch = this.buffer.slice(0, BATCH);
      await this.deps.store.append(batch);
      this.buffer.splice(0, batch.length);
    }
  }

  /** Deletes entries past the retention; returns how many. */
  async sweep(): Promise<number> {
    const before = this.deps.clock.now() - this.deps.retentionMs;
    let total = 0;
    for (;;) {
      const n = await this.deps.store.deleteBefore(before, SWEEP_BATCH);
      total += n;
      if (n < SWEEP_BATCH || this.sweeper.stopped) return total;
    }
  }

  /**
   * Entries newest first. Needs `audit.read`; a project-bound principal reads its own project's
   * entries and those that name no project (refusals of callers not yet known: every admin
   * should see someone knocking), the open principal any project's (all when none is named).
   */
  async list(
    caller: Principal,
    filter: AuditFilter,
    page: { pageSize: number; pageToken?: string },
  ): Promise<{ items: AuditEntry[]; nextPageToken?: string }> {
    const project = authorize(caller, 'audit.read', filter.project);
    for (const [name, value] of [
      ['since', filter.since],
      ['until', filter.until],
    ] as const) {
      if (value !== undefined && Number.isNaN(Date.parse(value))) {
        throw CoreErrors.INVALID_ARGUMENT(`${name} is not an RFC 3339 time`, {
          details: [{ path: name, message: 'expected an RFC 3339 time' }],
        });
      }
    }
    const scoped =
      caller.project === undefined ? filter : { ...filter, project, orNoProject: true };
    return this.deps.store.list(scoped, page);
  }

  start(): void {
    this.flusher.start();
    this.sweeper.start();
  }

  /** Stops the loops and writes what is waiting; safe twice. */
  async shutdown(): Promise<void> {
    await this.flusher.stop();
    await this.sweeper.stop();
    await this.flush().catch((err) => this.deps.logger.warn({ err }, 'audit write failed'));
  }
}
