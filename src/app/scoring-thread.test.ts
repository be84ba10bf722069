import { describe, expect, it } from 'vitest';
import { Metrics } from '../telemetry/index.js';
import { applyObserverCalls, ForwardingObserver, type ObserverCall } from './scoring-thread.js';

describe('ForwardingObserver', () => {
  it('sends the calls of a period in one message, replayed as the same Prometheus series', async () => {
    const sent: ObserverCall[][] = [];
    const forward = new ForwardingObserver((calls) => sent.push(calls), 20);
    forward.onSelected('p', 'weather');
    forward.onSampledOut('p', 'other');
    forward.onScored('p', 'weather', [
      { evaluator: 'tool-errors', outcome: 'OUTCOME_SCORED', scores: [], durationMs: 1 },
      { evaluator: 'latency', outcome: 'OUTCOME_SKIPPED', scores: [], durationMs: 0 },
    ]);
    forward.onExpressionError('p', 'broken', 'selector', 'cost');
    forward.onFreshness(0.25);
    forward.onPostponed('trace_open');
    forward.onResult('tool-errors', 'OUTCOME_SCORED', 1.5);
    expect(sent).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(sent).toHaveLength(1);
    expect(sent[0]).toHaveLength(7);

    const metrics = new Metrics({ processMetrics: false });
    applyObserverCalls(metrics, sent[0] ?? []);
    const text = (await metrics.registry.metrics()).split('\n');
    expect(text).toEqual(
      expect.arrayContaining([
        'touchstone_policy_traces_selected_total{project="p",policy="weather"} 1',
        'touchstone_policy_traces_scored_total{project="p",policy="weather"} 1',
        'touchstone_policy_results_total{project="p",policy="weather",outcome="OUTCOME_SCORED"} 1',
        'touchstone_policy_results_total{project="p",policy="weather",outcome="OUTCOME_SKIPPED"} 1',
        'touchstone_policy_expression_errors_total{project="p",policy="broken",field="selector",reason="cost"} 1',
        'touchstone_online_freshness_seconds_count 1',
        'touchstone_evaluator_results_total{evaluator="tool-errors",outcome="OUTCOME_SCORED"} 1',
        'touchstone_online_postponed_total{reason="trace_open"} 1',
        'touchstone_policy_traces_sampled_out_total{project="p",policy="other"} 1',
      ]),
    );

    // Nothing pending: flush sends nothing; a call after it starts a new period.
    forward.flush();
    expect(sent).toHaveLength(1);
    forward.onFreshness(1);
    forward.flush();
    expect(sent[1]).toEqual([['freshness', 1]]);
  });
});
