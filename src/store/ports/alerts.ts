/** Storage port: policy metric windows and alert states. The conventions are in ../ports.ts. */

/** A point of a policy metric's window (pass/fail as 1/0, numbers as is). */
export interface MetricPoint {
  project: string;
  policy: string;
  metric: string;
  at: number;
  value: number;
}

export interface AlertState {
  project: string;
  policy: string;
  metric: string;
  firing: boolean;
  /** The window mean and size at the last transition (or evaluation). */
  mean: number;
  n: number;
  /** When `firing` last changed. */
  changedAt: number;
}

/** An alert that fired or resolved, with the window it saw and the threshold then. */
export interface AlertTransition {
  project: string;
  policy: string;
  metric: string;
  at: number;
  firing: boolean;
  mean: number;
  n: number;
  below: number;
}

export interface AlertStore {
  addPoints(points: readonly MetricPoint[]): Promise<void>;
  /** Mean and count of a metric's points at or after `since` (mean 0 when there are none). */
  window(
    project: string,
    policy: string,
    metric: string,
    since: number,
  ): Promise<{ mean: number; n: number }>;
  /**
   * The alert's state, locked for the rest of the transaction (row lock on PostgreSQL), so two
   * replicas adding points at once decide the transition once. Undefined before the first one.
   */
  lockState(project: string, policy: string, metric: string): Promise<AlertState | undefined>;
  saveState(state: AlertState): Promise<void>;
  /** Every alert state (the gauges). */
  states(): Promise<AlertState[]>;
  /** One project's alert states, by policy and metric. */
  statesOf(project: string): Promise<AlertState[]>;
  /** Records a transition (call in the transaction that saved the new state). */
  addTransition(transition: AlertTransition): Promise<void>;
  /** A project's transitions in [since, until), oldest first, at most `limit`. */
  transitions(
    project: string,
    filter: { policy?: string; since: number; until: number },
    limit: number,
  ): Promise<AlertTransition[]>;
  /**
   * Deletes one metric's points older than `before` (its window's start), so the table holds
   * only what windows can still read. Returns how many.
   */
  trimWindow(project: string, policy: string, metric: string, before: number): Promise<number>;
}
