/**
 * The words of a run's life, owned by runs: the store records them and learns them from here.
 * A leaf: it imports nothing, so the store can import it without a cycle
 * (dependency-cruiser checks both).
 */

/** A run's status: pending → running → one of the four final ones (DECISIONS "States"). */
export const RUN_STATUSES = [
  'RUN_STATUS_PENDING',
  'RUN_STATUS_RUNNING',
  'RUN_STATUS_SUCCEEDED',
  'RUN_STATUS_FAILED',
  'RUN_STATUS_ERROR',
  'RUN_STATUS_CANCELLED',
] as const;

export type RunStatus = (typeof RUN_STATUSES)[number];

/** The statuses a run ends in: nothing changes it after one of them. */
export const FINAL_STATUSES: ReadonlySet<RunStatus> = new Set([
  'RUN_STATUS_SUCCEEDED',
  'RUN_STATUS_FAILED',
  'RUN_STATUS_ERROR',
  'RUN_STATUS_CANCELLED',
]);

export function isFinal(status: RunStatus): boolean {
  return FINAL_STATUSES.has(status);
}
