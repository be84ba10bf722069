/** The CLI's exit codes, in one place. */
export const EXIT = {
  OK: 0,
  /** Operation failed, run ERROR or CANCELLED, server unreachable. */
  ERROR: 1,
  /** Usage or validation error. */
  USAGE: 2,
  /** A run finished FAILED because a gate failed. */
  GATE_FAILED: 3,
} as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];
