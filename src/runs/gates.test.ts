import { describe, expect, it } from 'vitest';
import { checkGates, evaluateGates, type Gate, parseGate } from './gates.js';
import type { MetricSummary } from './summaries.js';

const gate = (input: Parameters<typeof parseGate>[0]): Gate => {
  const g = parseGate(input);
  if (typeof g === 'string') throw new Error(g);
  return g;
};

describe('gate syntax', () => {
  it('reads the text and structured forms alike', () => {
    expect(gate('exact-match.pass^3 >= 0.9')).toEqual({
      text: 'exact-match.pass^3',
      metric: 'exact-match',
      stat: 'pass^k',
      k: 3,
      op: '>=',
      threshold: 0.9,
    });
    expect(gate({ metric: 'exact-match.pass^3', min: 0.9 })).toEqual(
      gate('exact-match.pass^3 >= 0.9'),
    );
    expect(gate('latency.within.pass@2>=0.5')).toMatchObject({
      metric: 'latency.within',
      stat: 'pass@k',
      k: 2,
    });
    expect(gate('latency <= 1500')).toEqual({
      text: 'latency',
      metric: 'latency',
      stat: 'mean',
      op: '<=',
      threshold: 1500,
    });
    expect(gate({ metric: 'latency', max: 1500 })).toEqual(gate('latency <= 1500'));
  });

  it('says what is wrong with a malformed gate', () => {
    expect(parseGate('exact-match > 0.9')).toMatch(/expected `<metric> >= <value>`/);
    expect(parseGate('exact-match >= high')).toMatch(/"high" is not a number/);
    expect(parseGate('exact-match.pass^3 >= 90')).toMatch(/fraction/);
    expect(parseGate('>= 0.9')).toMatch(/expected/);
  });

  it('checks metrics, kinds and k against the run', () => {
    const metrics = [
      { metric: 'exact-match', evaluator: 'exact-match', kind: 'passed' as const },
      { metric: 'latency', evaluator: 'latency', kind: 'number' as const },
      { metric: 'tone', evaluator: 'tone', kind: 'label' as const },
    ];
    const details = checkGates(
      [
        gate('exact-match.pass^3 >= 0.9'),
        gate('latency.pass^1 >= 0.5'),
        gate('tone >= 1'),
        gate('exact-mach >= 0.5'),
        parseGate('nonsense'),
        gate('exact-match >= 0.5'),
      ],
      metrics,
      2,
      'gates',
      [],
    );
    expect(details).toEqual([
      { path: 'gates[0]', message: "k = 3 is more than the run's trials (2)" },
      { path: 'gates[1]', message: 'pass^k needs a pass/fail metric; "latency" is a number' },
      { path: 'gates[2]', message: 'metric "tone" is a label, not a number' },
      {
        path: 'gates[3]',
        message:
          'no evaluator of the run produces metric "exact-mach"; known metrics: exact-match, latency, tone',
      },
      { path: 'gates[4]', message: expect.stringMatching(/^expected/) },
    ]);
  });
});

describe('gate checks beside other problems', () => {
  const metrics = [{ metric: 'exact-match', evaluator: 'exact-match', kind: 'passed' as const }];

  it('skips what another problem leaves open, and gates the shape refused', () => {
    const gates = [
      undefined,
      gate('judge.score >= 0.5'),
      gate('judgement >= 0.5'),
      gate('exact-match.pass^3 >= 0.5'),
    ];
    // `judge` did not bind: its metrics are unknown, and trials is invalid.
    expect(checkGates(gates, metrics, undefined, 'gates', ['judge'])).toEqual([
      { path: 'gates[2]', message: expect.stringContaining('"judgement"') },
    ]);
    // An evaluator without even a shape: no metric can be called missing.
    expect(checkGates(gates, metrics, 2, 'gates', undefined)).toEqual([
      { path: 'gates[3]', message: "k = 3 is more than the run's trials (2)" },
    ]);
  });
});

describe('gate evaluation', () => {
  const summary = (over: Partial<MetricSummary>): MetricSummary => ({
    metric: 'exact-match',
    evaluator: 'exact-match',
    kind: 'passed',
    counts: { scored: 3, skipped: 0, error: 0 },
    n: 3,
    mean: 2 / 3,
    interval: null,
    ...over,
  });

  it('compares means and pass^k, and fails a gate whose metric scored nothing', () => {
    const results = evaluateGates(
      [
        gate('exact-match >= 0.6'),
        gate('exact-match.pass^2 >= 0.5'),
        gate('exact-match.pass^1 >= 0.7'),
        gate('latency <= 100'),
      ],
      [
        summary({ passHatK: { '1': 2 / 3, '2': 1 / 3 } }),
        summary({
          metric: 'latency',
          evaluator: 'latency',
          kind: 'number',
          n: 0,
          mean: null,
          counts: { scored: 0, skipped: 2, error: 1 },
        }),
      ],
    );
    expect(results).toEqual([
      { gate: { metric: 'exact-match', min: 0.6 }, passed: true, value: 2 / 3 },
      { gate: { metric: 'exact-match.pass^2', min: 0.5 }, passed: false, value: 1 / 3 },
      { gate: { metric: 'exact-match.pass^1', min: 0.7 }, passed: false, value: 2 / 3 },
      {
        gate: { metric: 'latency', max: 100 },
        passed: false,
        value: null,
        reason: expect.stringContaining('no scored results'),
      },
    ]);
  });

  it('reads pass^1 as the mean when the run has one trial', () => {
    const [r] = evaluateGates([gate('exact-match.pass^1 >= 0.5')], [summary({})]);
    expect(r).toMatchObject({ passed: true, value: 2 / 3 });
  });
});
