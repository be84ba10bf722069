import { describe, expect, it } from 'vitest';
import { FakeClock } from '../core/index.js';
import type { StateGaugeDeps } from './gauges.js';
import { registerStateGauges } from './gauges.js';
import { Metrics } from './metrics.js';

/** The state gauges read each table once per scrape, however many gauges show it. */
describe('state gauges', () => {
  it('read the work queue, the webhook queue and the sources once per scrape', async () => {
    const clock = new FakeClock(Date.parse('2026-01-01T00:01:00Z'));
    const reads = { work: 0, webhooks: 0, sources: 0 };
    const deps = {
      clock,
      store: {
        traces: { countOpen: async () => 3 },
        work: {
          stats: async () => {
            reads.work++;
            return { depth: 7, oldestCreatedAt: Date.parse('2026-01-01T00:00:00Z') };
          },
        },
        sources: {
          listAll: async () => {
            reads.sources++;
            return [{ project: 'p', name: 'mlflow' }];
          },
        },
        alerts: { states: async () => [] },
      },
      webhooks: {
        queueStats: async () => {
          reads.webhooks++;
          return { depth: 2, oldestAgeSeconds: 5 };
        },
      },
      sources: {
        view: async () => ({
          status: { lagSeconds: 4, watermark: '2026-01-01T00:00:30Z', phase: 'error', deferred: 1 },
        }),
      },
    } as unknown as StateGaugeDeps;
    const metrics = new Metrics({ processMetrics: false });
    registerStateGauges(metrics, deps);

    const text = await metrics.registry.metrics();
    expect(reads).toEqual({ work: 1, webhooks: 1, sources: 1 });
    expect(text).toContain('touchstone_online_queue_depth 7');
    expect(text).toContain('touchstone_online_oldest_item_age_seconds 60');
    expect(text).toContain('touchstone_webhook_queue_depth 2');
    expect(text).toContain('touchstone_webhook_oldest_pending_age_seconds 5');
    expect(text).toContain('touchstone_source_lag_seconds{project="p",source="mlflow"} 4');
    expect(text).toContain(
      'touchstone_source_watermark_age_seconds{project="p",source="mlflow"} 30',
    );
    expect(text).toContain('touchstone_source_failing{project="p",source="mlflow"} 1');
    expect(text).toContain('touchstone_source_deferred_traces{project="p",source="mlflow"} 1');

    // Nothing is kept between scrapes.
    await metrics.registry.metrics();
    expect(reads).toEqual({ work: 2, webhooks: 2, sources: 2 });
  });
});
