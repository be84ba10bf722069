import type { Result } from '../core/index.js';

/**
 * Per-metric summaries of a run's results: the mean with a 95% interval (Wilson score interval
 * for pass/fail metrics, Student's t for numbers), counts by outcome, and with several trials
 * pass@k and pass^k per task. Each (record, trial) is one sample. SKIPPED and ERROR results are
 * counted but never enter a mean, an interval or pass@k/pass^k.
 */

/** What a metric is: its name, the evaluator instance producing it, its kind. */
export interface MetricInfo {
  metric: string;
  evaluator: string;
  kind: 'number' | 'passed' | 'label';
}

export interface MetricSummary {
  metric: string;
  /** The evaluator instance producing it. */
  evaluator: string;
  kind: 'number' | 'passed' | 'label';
  /** The evaluator's results by outcome (one result per record and trial). */
  counts: { scored: number; skipped: number; error: number };
  /** Scored values of this metric. */
  n: number;
  /** Mean of the scored values (pass = 1, fail = 0); null without any, and for labels. */
  mean: number | null;
  /** 95% interval of the mean; null with no values (numbers: fewer than two). */
  interval: { low: number; high: number; method: 'wilson' | 't' } | null;
  /** Numbers: the sample standard deviation (null below two values), min and max. */
  stddev?: number | null;
  min?: number;
  max?: number;
  /** Pass/fail: how many passed and failed. */
  passed?: number;
  failed?: number;
  /** Labels: how many times each label was given. */
  labels?: Record<string, number>;
  /** Pass/fail with trials > 1: tasks (records) with at least one scored trial. */
  tasks?: number;
  /**
   * Pass/fail with trials > 1, by k = 1…trials: the mean over tasks of the unbiased estimators
   * pass@k = 1 − C(n−c, k)/C(n, k) (at least one of k trials passes) and pass^k = C(c, k)/C(n, k)
   * (all k trials pass), n = the task's scored trials, c = those that passed. Tasks with fewer
   * than k scored trials are left out of k; null when no task has k.
   */
  passAtK?: Record<string, number | null>;
  passHatK?: Record<string, number | null>;
}

/** z for a two-sided 95% interval. */
const Z95 = 1.959963984540054;

/** Two-sided 95% Student t quantiles for 1–30 degrees of freedom. */
const T95 = [
  12.7062047, 4.30265273, 3.18244631, 2.77644511, 2.57058184, 2.44691185, 2.36462425, 2.30600414,
  2.26215716, 2.22813885, 2.20098516, 2.17881283, 2.16036866, 2.14478669, 2.13144955, 2.1199053,
  2.10981558, 2.10092204, 2.09302405, 2.08596345, 2.07961384, 2.07387307, 2.06865761, 2.06389856,
  2.05953855, 2.05552944, 2.05183052, 2.04840714, 2.04522964, 2.04227246,
];

/** The 97.5% quantile of Student's t: a table to 30, then the Cornish–Fisher expansion. */
export function tQuantile95(df: number): number {
  if (df <= T95.length) return T95[Math.max(1, df) - 1] as number;
  const z = Z95;
  const z3 = z ** 3;
  const z5 = z ** 5;
  const z7 = z ** 7;
  const z9 = z ** 9;
  const g1 = (z3 + z) / 4;
  const g2 = (5 * z5 + 16 * z3 + 3 * z) / 96;
  const g3 = (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / 384;
  const g4 = (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / 92160;
  return z + g1 / df + g2 / df ** 2 + g3 / df ** 3 + g4 / df ** 4;
}

/** Wilson score interval of a proportion (95%). */
export function wilson(passed: number, n: number): { low: number; high: number } {
  const p = passed / n;
  const z2 = Z95 * Z95;
  const denominator = 1 + z2 / n;
  const centre = (p + z2 / (2 * n)) / denominator;
  const half = (Z95 * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))) / denominator;
  return { low: Math.max(0, centre - half), high: Math.min(1, centre + half) };
}

/** C(a, k) / C(n, k) without overflow; 0 when a < k. */
function combinationRatio(a: number, n: number, k: number): number {
  if (a < k) return 0;
  let ratio = 1;
  for (let i = 0; i < k; i++) ratio *= (a - i) / (n - i);
  return ratio;
}

/** pass@k and pass^k for k = 1…trials over tasks given as (scored trials, passed trials). */
export function passK(
  tasks: Iterable<{ n: number; c: number }>,
  trials: number,
): { passAtK: Record<string, number | null>; passHatK: Record<string, number | null> } {
  const list = [...tasks];
  const passAtK: Record<string, number | null> = {};
  const passHatK: Record<string, number | null> = {};
  for (let k = 1; k <= trials; k++) {
    let count = 0;
    let at = 0;
    let hat = 0;
    for (const { n, c } of list) {
      if (n < k) continue;
      count++;
      at += 1 - combinationRatio(n - c, n, k);
      hat += combinationRatio(c, n, k);
    }
    passAtK[String(k)] = count === 0 ? null : at / count;
    passHatK[String(k)] = count === 0 ? null : hat / count;
  }
  return { passAtK, passHatK };
}

interface Accumulator {
  info: MetricInfo;
  n: number;
  mean: number;
  /** Welford's sum of squared differences. */
  m2: number;
  min: number;
  max: number;
  passed: number;
  labels: Map<string, number>;
  /** recordIndex → [scored trials, passed trials]. */
  tasks: Map<number, [number, number]>;
}

/** One stored result with its item. */
export interface ItemResult {
  recordIndex: number;
  trial: number;
  result: Result;
}

/**
 * Builds summaries one result at a time, so an executor summarises as it writes (memory bounded by
 * the metrics and, for pass/fail metrics, two counters per task).
 */
export class SummaryBuilder {
  private readonly counts = new Map<string, { scored: number; skipped: number; error: number }>();
  private readonly acc = new Map<string, Accumulator>();

  /** The metrics the run's evaluators declare, in their order, come first in `build()`. */
  constructor(
    metrics: readonly MetricInfo[],
    private readonly trials: number,
  ) {
    for (const m of metrics) this.accumulator(m);
  }

  private accumulator(info: MetricInfo): Accumulator {
    let a = this.acc.get(info.metric);
    if (a === undefined) {
      a = {
        info,
        n: 0,
        mean: 0,
        m2: 0,
        min: Number.POSITIVE_INFINITY,
        max: Number.NEGATIVE_INFINITY,
        passed: 0,
        labels: new Map(),
        tasks: new Map(),
      };
      this.acc.set(info.metric, a);
    }
    return a;
  }

  add(recordIndex: number, result: Result): void {
    let c = this.counts.get(result.evaluator);
    if (c === undefined) {
      c = { scored: 0, skipped: 0, error: 0 };
      this.counts.set(result.evaluator, c);
    }
    if (result.outcome === 'OUTCOME_SKIPPED') c.skipped++;
    else if (result.outcome === 'OUTCOME_ERROR') c.error++;
    else c.scored++;
    if (result.outcome !== 'OUTCOME_SCORED') return;
    for (const score of result.scores) {
      const kind =
        score.passed !== undefined ? 'passed' : score.value !== undefined ? 'number' : 'label';
      const a =
        this.acc.get(score.name) ??
        this.accumulator({ metric: score.name, evaluator: result.evaluator, kind });
      if (score.label !== undefined) {
        a.labels.set(score.label, (a.labels.get(score.label) ?? 0) + 1);
        a.n++;
        continue;
      }
      const value = score.passed !== undefined ? (score.passed ? 1 : 0) : score.value;
      if (value === undefined || !Number.isFinite(value)) continue;
      a.n++;
      const delta = value - a.mean;
      a.mean += delta / a.n;
      a.m2 += delta * (value - a.mean);
      if (value < a.min) a.min = value;
      if (value > a.max) a.max = value;
      if (score.passed !== undefined) {
        if (score.passed) a.passed++;
        const task = a.tasks.get(recordIndex);
        if (task === undefined) a.tasks.set(recordIndex, [1, score.passed ? 1 : 0]);
        else {
          task[0]++;
          if (score.passed) task[1]++;
        }
      }
    }
  }

  build(): MetricSummary[] {
    return [...this.acc.values()].map((a) => summaryOf(a, this.counts, this.trials));
  }
}

/**
 * Summaries for the metrics the run's evaluators declare (in their order), followed by any other
 * metric a result carried.
 */
export function summarize(
  metrics: readonly MetricInfo[],
  results: Iterable<ItemResult>,
  trials: number,
): MetricSummary[] {
  const builder = new SummaryBuilder(metrics, trials);
  for (const { recordIndex, result } of results) builder.add(recordIndex, result);
  return builder.build();
}

function summaryOf(
  a: Accumulator,
  counts: ReadonlyMap<string, { scored: number; skipped: number; error: number }>,
  trials: number,
): MetricSummary {
  const { info, n } = a;
  const base = {
    metric: info.metric,
    evaluator: info.evaluator,
    kind: info.kind,
    counts: counts.get(info.evaluator) ?? { scored: 0, skipped: 0, error: 0 },
    n,
  };
  if (info.kind === 'label') {
    return {
      ...base,
      mean: null,
      interval: null,
      labels: Object.fromEntries([...a.labels].sort((x, y) => y[1] - x[1])),
    };
  }
  const mean = n === 0 ? null : a.mean;
  if (info.kind === 'passed') {
    const summary: MetricSummary = {
      ...base,
      mean,
      interval: n === 0 ? null : { ...wilson(a.passed, n), method: 'wilson' },
      passed: a.passed,
      failed: n - a.passed,
    };
    if (trials > 1) {
      const tasks = [...a.tasks.values()].map(([scored, passed]) => ({ n: scored, c: passed }));
      summary.tasks = tasks.length;
      Object.assign(summary, passK(tasks, trials));
    }
    return summary;
  }
  const stddev = n < 2 ? null : Math.sqrt(a.m2 / (n - 1));
  const half = stddev === null ? undefined : (tQuantile95(n - 1) * stddev) / Math.sqrt(n);
  return {
    ...base,
    mean,
    interval:
      mean === null || half === undefined
        ? null
        : { low: mean - half, high: mean + half, method: 't' },
    stddev,
    ...(n === 0 ? {} : { min: a.min, max: a.max }),
  };
}
