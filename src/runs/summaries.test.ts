import { describe, expect, it } from 'vitest';
import type { Result } from '../core/index.js';
import { type ItemResult, passK, summarize, tQuantile95, wilson } from './summaries.js';

const passed = (evaluator: string, ok: boolean): Result => ({
  evaluator,
  outcome: 'OUTCOME_SCORED',
  scores: [{ name: evaluator, passed: ok }],
  durationMs: 0,
});
const valued = (evaluator: string, value: number): Result => ({
  evaluator,
  outcome: 'OUTCOME_SCORED',
  scores: [{ name: evaluator, value }],
  durationMs: 0,
});
const skipped = (evaluator: string): Result => ({
  evaluator,
  outcome: 'OUTCOME_SKIPPED',
  scores: [],
  reason: 'record has no reference',
  durationMs: 0,
});
const errored = (evaluator: string): Result => ({
  evaluator,
  outcome: 'OUTCOME_ERROR',
  scores: [],
  reason: 'judge failed',
  durationMs: 0,
});

describe('intervals', () => {
  it('Wilson score interval of 8/10 and of 0/5', () => {
    const w = wilson(8, 10);
    expect(w.low).toBeCloseTo(0.4902, 4);
    expect(w.high).toBeCloseTo(0.9433, 4);
    const zero = wilson(0, 5);
    expect(zero.low).toBe(0);
    expect(zero.high).toBeCloseTo(0.4345, 4);
  });

  it('Student t quantiles from the table and the expansion', () => {
    expect(tQuantile95(1)).toBeCloseTo(12.7062, 4);
    expect(tQuantile95(30)).toBeCloseTo(2.04227, 5);
    expect(tQuantile95(40)).toBeCloseTo(2.021075, 5);
    expect(tQuantile95(60)).toBeCloseTo(2.000298, 5);
    expect(tQuantile95(100)).toBeCloseTo(1.983972, 5);
    expect(tQuantile95(1000)).toBeCloseTo(1.962339, 5);
  });
});

describe('pass@k and pass^k', () => {
  // Three tasks, three trials each: all pass; two of three pass; none pass.
  const tasks = [
    { n: 3, c: 3 },
    { n: 3, c: 2 },
    { n: 3, c: 0 },
  ];

  it('are the per-task estimators averaged over tasks (computed by hand)', () => {
    const { passAtK, passHatK } = passK(tasks, 3);
    // pass^1 = mean of c/n = (1 + 2/3 + 0) / 3; pass^2 = (C(3,2)/C(3,2) + C(2,2)/C(3,2) + 0) / 3;
    // pass^3 = share of tasks whose three trials all passed.
    expect(passHatK['1']).toBeCloseTo(5 / 9, 10);
    expect(passHatK['2']).toBeCloseTo((1 + 1 / 3) / 3, 10);
    expect(passHatK['3']).toBeCloseTo(1 / 3, 10);
    // pass@k = 1 − C(n−c,k)/C(n,k): the second task passes any two or three trials.
    expect(passAtK['1']).toBeCloseTo(5 / 9, 10);
    expect(passAtK['2']).toBeCloseTo(2 / 3, 10);
    expect(passAtK['3']).toBeCloseTo(2 / 3, 10);
  });

  it('leave out tasks with fewer than k scored trials', () => {
    const { passHatK } = passK(
      [
        { n: 1, c: 1 },
        { n: 2, c: 1 },
      ],
      3,
    );
    expect(passHatK['1']).toBeCloseTo(0.75, 10);
    expect(passHatK['2']).toBe(0);
    expect(passHatK['3']).toBeNull();
  });
});

describe('summarize', () => {
  const metrics = [
    { metric: 'exact-match', evaluator: 'exact-match', kind: 'passed' as const },
    { metric: 'latency', evaluator: 'latency', kind: 'number' as const },
  ];

  it('counts outcomes but keeps SKIPPED and ERROR out of means, intervals and pass^k', () => {
    const rows: ItemResult[] = [];
    const marks = [
      [true, true, true],
      [true, false, true],
      [false, false, false],
    ];
    for (const [recordIndex, trials] of marks.entries()) {
      for (const [trial, ok] of trials.entries()) {
        rows.push({ recordIndex, trial, result: passed('exact-match', ok) });
      }
    }
    rows.push({ recordIndex: 3, trial: 0, result: skipped('exact-match') });
    rows.push({ recordIndex: 3, trial: 1, result: errored('exact-match') });
    for (const [i, v] of [1, 2, 3, 4].entries()) {
      rows.push({ recordIndex: i, trial: 0, result: valued('latency', v) });
    }
    rows.push({ recordIndex: 0, trial: 1, result: errored('latency') });

    const [em, latency] = summarize(metrics, rows, 3);
    expect(em).toMatchObject({
      metric: 'exact-match',
      kind: 'passed',
      counts: { scored: 9, skipped: 1, error: 1 },
      n: 9,
      passed: 5,
      failed: 4,
      tasks: 3,
      interval: { method: 'wilson' },
    });
    expect(em?.mean).toBeCloseTo(5 / 9, 10);
    expect(em?.passHatK?.['3']).toBeCloseTo(1 / 3, 10);
    expect(em?.passAtK?.['2']).toBeCloseTo(2 / 3, 10);

    expect(latency).toMatchObject({
      metric: 'latency',
      kind: 'number',
      counts: { scored: 4, skipped: 0, error: 1 },
      n: 4,
      mean: 2.5,
      min: 1,
      max: 4,
      interval: { method: 't' },
    });
    expect(latency?.stddev).toBeCloseTo(1.290994, 5);
    // 2.5 ± t(3) · s / √4
    expect(latency?.interval?.low).toBeCloseTo(2.5 - (3.18244631 * 1.2909944) / 2, 5);
    expect(latency?.passHatK).toBeUndefined();
  });

  it('reports declared metrics with nothing scored as empty, and labels as counts', () => {
    const rows: ItemResult[] = [
      { recordIndex: 0, trial: 0, result: skipped('exact-match') },
      {
        recordIndex: 0,
        trial: 0,
        result: {
          evaluator: 'tone',
          outcome: 'OUTCOME_SCORED',
          scores: [{ name: 'tone', label: 'calm' }],
          durationMs: 0,
        },
      },
      {
        recordIndex: 1,
        trial: 0,
        result: {
          evaluator: 'tone',
          outcome: 'OUTCOME_SCORED',
          scores: [{ name: 'tone', label: 'calm' }],
          durationMs: 0,
        },
      },
    ];
    const [em, latency, tone] = summarize(metrics, rows, 1);
    expect(em).toMatchObject({ n: 0, mean: null, interval: null, counts: { skipped: 1 } });
    expect(em?.passHatK).toBeUndefined();
    expect(latency).toMatchObject({ n: 0, mean: null, interval: null, stddev: null });
    expect(tone).toMatchObject({ kind: 'label', n: 2, mean: null, labels: { calm: 2 } });
  });
});
