import { duration, fmt } from './runs.js';

export type Writable = NodeJS.WritableStream & { isTTY?: boolean; columns?: number };

/** How a progress display counts: run items, or bytes. */
export interface ProgressUnit {
  /** `12/40 items`, `1.2/4.0 MiB`. */
  amount(done: number, total: number): string;
  /** `3.5/s`, `1.1 MiB/s`. */
  rate(perSecond: number): string;
}

export const ITEMS: ProgressUnit = {
  amount: (done, total) => `${done}/${total} items`,
  rate: (perSecond) => `${fmt(perSecond, 1)}/s`,
};

const MIB = 1024 * 1024;

export const BYTES: ProgressUnit = {
  amount: (done, total) => `${(done / MIB).toFixed(1)}/${(total / MIB).toFixed(1)} MiB`,
  rate: (perSecond) => `${(perSecond / MIB).toFixed(1)} MiB/s`,
};

export interface ProgressOptions {
  unit?: ProgressUnit;
  now?: () => number;
  /** Off a terminal: at most one line this often. */
  plainEveryMs?: number;
  /** Off a terminal: the first line only after this long (0: at once), so short work is quiet. */
  plainFirstAfterMs?: number;
}

/**
 * Progress on stderr (stdout stays for the report and `--json`): on a terminal one bar redrawn in
 * place (done of total, rate, ETA), otherwise a plain line at most every `plainEveryMs` and, once
 * a line was written, one when the count reaches the total.
 */
export class ProgressDisplay {
  private readonly tty: boolean;
  private readonly unit: ProgressUnit;
  private readonly now: () => number;
  private readonly plainEveryMs: number;
  private readonly plainFirstAfterMs: number;
  private readonly started: number;
  private first: { at: number; done: number } | undefined;
  private lastLine: number | undefined;
  private lastDone = -1;
  private drawn = false;

  constructor(
    private readonly out: Writable,
    options: ProgressOptions = {},
  ) {
    this.tty = out.isTTY === true;
    this.unit = options.unit ?? ITEMS;
    this.now = options.now ?? Date.now;
    this.plainEveryMs = options.plainEveryMs ?? 5_000;
    this.plainFirstAfterMs = options.plainFirstAfterMs ?? 0;
    this.started = this.now();
  }

  /** `label` names the state on a terminal (`running`, `uploading`). */
  update(done: number, total: number, label: string): void {
    // Before the total is known (a run that has not read its dataset yet) there is nothing to show.
    if (total === 0) return;
    const t = this.now();
    if (this.first === undefined || done < this.first.done) this.first = { at: t, done };
    const elapsed = (t - this.first.at) / 1000;
    const rate = elapsed > 0 ? (done - this.first.done) / elapsed : 0;
    const eta = rate > 0 && total > done ? ((total - done) / rate) * 1000 : undefined;
    const pct = Math.floor((done / total) * 100);
    const stats = `${this.unit.amount(done, total)} (${pct}%)  ${rate > 0 ? this.unit.rate(rate) : '-/s'}  ETA ${eta === undefined ? '-' : duration(eta)}`;
    if (this.tty) {
      const width = 24;
      const filled = Math.round((done / total) * width);
      const bar = `${'█'.repeat(filled)}${'░'.repeat(width - filled)}`;
      this.out.write(`\r\x1b[K${label} ${bar} ${stats}`);
      this.drawn = true;
      return;
    }
    const finished = done === total && done !== this.lastDone && this.lastLine !== undefined;
    const due =
      this.lastLine === undefined
        ? t - this.started >= this.plainFirstAfterMs
        : t - this.lastLine >= this.plainEveryMs;
    if ((!due && !finished) || done === this.lastDone) return;
    this.lastLine = t;
    this.lastDone = done;
    this.out.write(`progress: ${stats}\n`);
  }

  /** Ends the bar's line so what follows starts clean. */
  end(): void {
    if (this.tty && this.drawn) this.out.write('\n');
    this.drawn = false;
  }
}
