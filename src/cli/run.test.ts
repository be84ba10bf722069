import { describe, expect, it } from 'vitest';
import { errorReasons } from './run.js';
import { exitCodeFor, gateLines, type RunJson, runReport, summaryTable } from './runs.js';

const RUN = {
  id: 'run_1',
  name: 'nightly',
  project: 'support',
  labels: {},
  status: 'RUN_STATUS_FAILED',
  createdBy: 'open',
  createdAt: '2026-01-01T00:00:00.000Z',
  startedAt: '2026-01-01T00:00:00.000Z',
  finishedAt: '2026-01-01T00:01:05.000Z',
  progress: { total: 6, done: 6 },
  summaries: [
    {
      metric: 'exact-match',
      evaluator: 'exact-match',
      kind: 'passed',
      counts: { scored: 6, skipped: 0, error: 0 },
      n: 6,
      mean: 4 / 6,
      interval: { low: 0.3, high: 0.9, method: 'wilson' },
      passAtK: { 1: 4 / 6, 2: 1 },
      passHatK: { 1: 4 / 6, 2: 1 / 3 },
    },
    {
      metric: 'tone',
      evaluator: 'tone',
      kind: 'label',
      counts: { scored: 5, skipped: 0, error: 1 },
      n: 5,
      mean: null,
      interval: null,
      labels: { calm: 4, rude: 1 },
    },
  ],
  gates: [
    { gate: { metric: 'exact-match.pass^2', min: 0.5 }, passed: false, value: 1 / 3 },
    { gate: { metric: 'latency', max: 2000 }, passed: false, value: null, reason: 'no scores' },
    { gate: { metric: 'exact-match', min: 0.5 }, passed: true, value: 4 / 6 },
  ],
} as unknown as RunJson;

describe('run report', () => {
  it('maps statuses to exit codes', () => {
    expect(exitCodeFor('RUN_STATUS_SUCCEEDED')).toBe(0);
    expect(exitCodeFor('RUN_STATUS_FAILED')).toBe(3);
    expect(exitCodeFor('RUN_STATUS_ERROR')).toBe(1);
    expect(exitCodeFor('RUN_STATUS_CANCELLED')).toBe(1);
  });

  it('prints summaries with pass@k / pass^k and gates with value and threshold', () => {
    const lines = summaryTable(RUN).split('\n');
    expect(lines[0]).toMatch(
      /^METRIC\s+N\s+MEAN\s+95% CI\s+PASS@K\s+PASS\^K\s+SCORED\/SKIPPED\/ERROR$/,
    );
    expect(lines[1]).toMatch(
      /^exact-match\s+6\s+0\.667\s+\[0\.3, 0\.9\]\s+1:0\.67 2:1\s+1:0\.67 2:0\.33\s+6\/0\/0$/,
    );
    expect(lines[2]).toMatch(/^tone\s+5\s+calm=4 rude=1\s+-\s+-\s+-\s+5\/0\/1$/);
    expect(gateLines(RUN)).toEqual([
      '✗ exact-match.pass^2 >= 0.5 (value 0.333)',
      '✗ latency <= 2000 (no scores)',
      '✓ exact-match >= 0.5 (value 0.667)',
    ]);
    expect(runReport(RUN).split('\n')[0]).toBe(
      'run run_1 "nightly" (project support): FAILED in 1m05s, 6/6 items',
    );
    const single = {
      ...RUN,
      summaries: [{ ...(RUN.summaries[0] as object), passAtK: undefined, passHatK: undefined }],
    };
    expect(summaryTable(single as RunJson)).not.toContain('PASS@K');
  });

  it('names the most frequent errors', () => {
    expect(
      errorReasons([
        { error: 'TARGET_TIMEOUT: slow' },
        { error: 'TARGET_TIMEOUT: slow' },
        {
          results: [{ evaluator: 'judge', outcome: 'OUTCOME_ERROR', reason: 'JUDGE_UNAVAILABLE' }],
        },
        { results: [{ evaluator: 'exact-match', outcome: 'OUTCOME_SCORED' }] },
      ]),
    ).toEqual(['2× TARGET_TIMEOUT: slow', '1× judge: JUDGE_UNAVAILABLE']);
  });
});
