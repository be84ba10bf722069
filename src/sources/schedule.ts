import { createHash } from 'node:crypto';
import { Cron } from 'croner';

/**
 * Scheduled mode's calendar: a five-field UTC cron says when a window ends; the window is the
 * `window` before that moment, start included, end excluded. Pure functions over epoch ms, so
 * the scheduler and the status agree and tests need no real clock.
 */

/** `schedule.maxRecords`' ceiling and default. */
export const MAX_WINDOW_RECORDS = 10_000;
/** Serialized records of one window's snapshot (the run's dataset). */
export const MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024;
/**
 * Windows counted one by one when a source comes back from a long pause; past this many the
 * count stops growing (a minutely cron paused for a year), and the cursor jumps ahead.
 */
const MAX_WINDOWS_COUNTED = 100_000;

const compiled = new Map<string, Cron>();

function cronOf(text: string): Cron {
  let cron = compiled.get(text);
  if (cron === undefined) {
    cron = new Cron(text, { timezone: 'UTC', mode: '5-part', paused: true });
    compiled.set(text, cron);
  }
  return cron;
}

/** Why `text` is not a five-field cron that fires, or undefined when it is. */
export function cronProblem(text: string): string | undefined {
  const fields = text
    .trim()
    .split(/\s+/)
    .filter((f) => f !== '');
  if (fields.length !== 5) {
    return `five fields (minute hour day-of-month month day-of-week, UTC); found ${fields.length}`;
  }
  try {
    if (cronOf(text).nextRun(new Date(0)) === null) return 'never fires';
  } catch {
    // The library's message quotes the pattern; the field path says enough.
    return 'not a valid cron expression';
  }
  return undefined;
}

/** The first moment after `afterMs` the cron fires (windows end there), or undefined for never. */
export function nextWindowEnd(cron: string, afterMs: number): number | undefined {
  return cronOf(cron).nextRun(new Date(afterMs))?.getTime();
}

export interface DueWindow {
  /** Inclusive. */
  startMs: number;
  /** Exclusive; a fire time of the cron. */
  endMs: number;
}

export interface ScheduleCalendar {
  cron: string;
  window: number;
  startingDeadline: number;
}

/**
 * Where a source stands at `now` from its cursor (the end of the last window handled or missed):
 * the windows whose deadline passed (`missed`, counted, with the cursor moved past them), and the
 * window due now (`due`) or the moment the next one is (`nextAt`).
 */
export function windowsAt(
  calendar: ScheduleCalendar,
  cursor: number,
  now: number,
): { missed: number; cursor: number; due?: DueWindow; nextAt?: number } {
  let missed = 0;
  let at = cursor;
  for (;;) {
    const end = nextWindowEnd(calendar.cron, at);
    if (end === undefined) return { missed, cursor: at };
    if (end > now) return { missed, cursor: at, nextAt: end };
    if (end + calendar.startingDeadline >= now) {
      return { missed, cursor: at, due: { startMs: end - calendar.window, endMs: end } };
    }
    missed++;
    at = end;
    if (missed >= MAX_WINDOWS_COUNTED) at = Math.max(at, now - calendar.startingDeadline);
  }
}

/**
 * The run id of a window: the same for the same window of the same source (created at
 * `createdAt`), so a window is never evaluated twice whoever retries it; a source deleted and
 * applied again starts new ids.
 */
export function windowRunId(
  project: string,
  source: string,
  createdAt: string,
  window: DueWindow,
): string {
  const digest = createHash('sha256')
    .update(JSON.stringify([project, source, createdAt, window.startMs, window.endMs]))
    .digest('hex');
  return `run_${digest.slice(0, 24)}`;
}

/** `<source>-<yyyymmddhhmm>` of the window's end (UTC), within a run name's 63 characters. */
export function windowRunName(source: string, window: DueWindow): string {
  const stamp = new Date(window.endMs)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace('T', '')
    .slice(0, 12);
  return `${source.slice(0, 63 - stamp.length - 1)}-${stamp}`;
}
