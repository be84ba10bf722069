import { BackgroundLoop, type Clock } from '../core/index.js';
import type { Store } from '../store/index.js';

/**
 * Run retention: finished runs older than `runs.retention` (or their project's
 * `runs.project_retention`) are deleted with their outputs and results, except runs labelled
 * `touchstone.keep: "true"`; a retention of 0 keeps forever. Every replica sweeps hourly; two
 * sweeping at once is safe, since each deletion is one transaction conditional on the run still
 * being final and unleased, and a run already gone is skipped.
 */

export interface RetentionOptions {
  /** Milliseconds after `finishedAt`; 0 keeps forever. */
  retentionMs: number;
  /** Per project; 0 keeps that project's runs forever. */
  projectRetentionMs: Readonly<Record<string, number>>;
  /** How often to sweep. */
  intervalMs: number;
}

export const SWEEP_INTERVAL_MS = 60 * 60 * 1000;
/** Runs looked up per query; each is deleted in its own short transaction. */
const BATCH = 100;

export class RunRetention {
  private readonly loop: BackgroundLoop;

  constructor(
    private readonly deps: {
      store: Store;
      clock: Clock;
      options: RetentionOptions;
      logger?: { warn(obj: object, msg: string): void; info?(obj: object, msg: string): void };
    },
  ) {
    this.loop = new BackgroundLoop(
      () => this.sweep(),
      deps.options.intervalMs,
      (err) => deps.logger?.warn({ err }, 'run retention sweep failed; retrying next hour'),
    );
  }

  start(): void {
    this.loop.start();
  }

  /** Safe twice and before start. */
  async shutdown(): Promise<void> {
    await this.loop.stop();
  }

  /** Deletes every run past its retention now; returns how many this call deleted. */
  async sweep(): Promise<number> {
    const { retentionMs, projectRetentionMs } = this.deps.options;
    const now = this.deps.clock.now();
    let deleted = 0;
    for (const [project, ms] of Object.entries(projectRetentionMs)) {
      if (ms > 0)
        deleted += await this.sweepWhere({ finishedBefore: now - ms, projects: [project] });
    }
    if (retentionMs > 0) {
      deleted += await this.sweepWhere({
        finishedBefore: now - retentionMs,
        exceptProjects: Object.keys(projectRetentionMs),
      });
    }
    if (deleted > 0) this.deps.logger?.info?.({ deleted }, 'run retention deleted finished runs');
    return deleted;
  }

  private async sweepWhere(filter: {
    finishedBefore: number;
    projects?: string[];
    exceptProjects?: string[];
  }): Promise<number> {
    const { store, clock } = this.deps;
    let deleted = 0;
    for (;;) {
      if (this.loop.stopped) return deleted;
      const due = await store.runs.expired(filter, BATCH);
      let batch = 0;
      for (const run of due) {
        const outcome = await store.withTransaction((tx) => tx.runs.delete(run.id, clock.now()));
        if (outcome === 'deleted') batch++;
      }
      deleted += batch;
      // A full batch none of which could go (still leased) would come back unchanged.
      if (due.length < BATCH || batch === 0) return deleted;
    }
  }
}
