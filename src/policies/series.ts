import type { AlertState, AlertTransition, ScoreBucket } from '../store/index.js';

/**
 * The scores chart's data: each policy metric's numeric scores per time bucket, its window mean
 * (what alerts compare with their threshold) and its alert's threshold, state and transitions.
 * Pure: the policy service gathers buckets, policies and alert rows and calls `buildSeries`.
 */

/** What a metric's alert says, from the policy and its stored state. */
export interface SeriesAlert {
  below: number;
  minSamples: number;
  /** The stored state (absent before the alert was first evaluated). */
  firing?: boolean;
  mean?: number;
  n?: number;
  changedAt?: string;
}

export interface SeriesPoint {
  /** Start of the bucket (RFC 3339). */
  start: string;
  /** Numeric scores in the bucket and their mean. */
  n: number;
  mean: number;
  /**
   * Scores and mean over the metric's window ending with this bucket, counted in whole buckets
   * (a window shorter than a bucket is the bucket itself).
   */
  windowN: number;
  windowMean: number;
}

export interface ScoreSeries {
  policy: string;
  evaluator: string;
  metric: string;
  /** The window of the policy stage producing the metric (alerts average over it). */
  window: string;
  alert?: SeriesAlert;
  points: SeriesPoint[];
}

/** What a policy says about its metrics: stage windows and alert thresholds. */
export interface PolicyMetrics {
  windows: ReadonlyMap<string, number>;
  alerts: readonly { metric: string; below: number; minSamples: number }[];
}

export interface SeriesInput {
  /** Buckets from `since - longest window` (earlier ones only feed window means). */
  buckets: readonly ScoreBucket[];
  since: number;
  bucketMs: number;
  /** By policy name; a policy deleted since its results were stored has none. */
  policies: ReadonlyMap<string, PolicyMetrics>;
  states: readonly AlertState[];
  defaultWindowMs: number;
}

/** `3600000` → `1h`, `90000` → `1m30s`: the Go-style form resources use. */
export function durationText(ms: number): string {
  if (ms === 0) return '0s';
  const parts: string[] = [];
  let rest = Math.round(ms);
  for (const [unit, size] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
    ['ms', 1],
  ] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return parts.join('');
}

export function buildSeries(input: SeriesInput): ScoreSeries[] {
  const groups = new Map<string, ScoreBucket[]>();
  for (const b of input.buckets) {
    const key = JSON.stringify([b.policy, b.evaluator, b.metric]);
    const list = groups.get(key);
    if (list === undefined) groups.set(key, [b]);
    else list.push(b);
  }
  const out: ScoreSeries[] = [];
  for (const buckets of groups.values()) {
    const first = buckets[0] as ScoreBucket;
    const policy = input.policies.get(first.policy);
    const windowMs = policy?.windows.get(first.metric) ?? input.defaultWindowMs;
    const points = windowPoints(buckets, windowMs, input.bucketMs).filter(
      (p) => Date.parse(p.start) >= input.since,
    );
    if (points.length === 0) continue;
    const alert = policy?.alerts.find((a) => a.metric === first.metric);
    const state = input.states.find((s) => s.policy === first.policy && s.metric === first.metric);
    out.push({
      policy: first.policy,
      evaluator: first.evaluator,
      metric: first.metric,
      window: durationText(windowMs),
      ...(alert === undefined
        ? {}
        : {
            alert: {
              below: alert.below,
              minSamples: alert.minSamples,
              ...(state === undefined
                ? {}
                : {
                    firing: state.firing,
                    mean: state.mean,
                    n: state.n,
                    changedAt: new Date(state.changedAt).toISOString(),
                  }),
            },
          }),
      points,
    });
  }
  return out;
}

/** Bucket means, and means over the trailing window (whole buckets), for buckets in time order. */
function windowPoints(
  buckets: readonly ScoreBucket[],
  windowMs: number,
  bucketMs: number,
): SeriesPoint[] {
  const sorted = [...buckets].sort((a, b) => a.bucketStart - b.bucketStart);
  const span = Math.max(bucketMs, windowMs);
  const points: SeriesPoint[] = [];
  let from = 0;
  let n = 0;
  let sum = 0;
  for (const b of sorted) {
    n += b.n;
    sum += b.sum;
    // Buckets that end at or before this one's end minus the window have left it.
    while (
      (sorted[from] as ScoreBucket).bucketStart + bucketMs <=
      b.bucketStart + bucketMs - span
    ) {
      n -= (sorted[from] as ScoreBucket).n;
      sum -= (sorted[from] as ScoreBucket).sum;
      from++;
    }
    points.push({
      start: new Date(b.bucketStart).toISOString(),
      n: b.n,
      mean: b.sum / b.n,
      windowN: n,
      windowMean: sum / n,
    });
  }
  return points;
}

/** Transitions as the API shows them. */
export function transitionView(t: AlertTransition) {
  return {
    policy: t.policy,
    metric: t.metric,
    firing: t.firing,
    at: new Date(t.at).toISOString(),
    mean: t.mean,
    n: t.n,
    below: t.below,
  };
}
