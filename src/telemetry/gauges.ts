import type { Clock } from '../core/index.js';
import type { SourceService, SourceStatus } from '../sources/index.js';
import type { Store } from '../store/index.js';
import type { WebhookService } from '../webhooks/index.js';
import type { Metrics } from './metrics.js';

/**
 * The gauges of the service's state, read from the database at scrape time so every replica
 * reports the same values: open traces, the webhook queue, each source's health, the online
 * scoring queue and firing alerts.
 */
export interface StateGaugeDeps {
  store: Store;
  clock: Clock;
  webhooks: Pick<WebhookService, 'queueStats'>;
  sources: Pick<SourceService, 'view'>;
}

export function registerStateGauges(metrics: Metrics, deps: StateGaugeDeps): void {
  metrics.gauge('touchstone_open_traces', 'Traces received but not yet complete.', () =>
    deps.store.traces.countOpen(),
  );
  webhookGauges(metrics, deps.webhooks);
  sourceGauges(metrics, deps);
  onlineGauges(metrics, deps);
  alertGauges(metrics, deps.store);
}

function webhookGauges(metrics: Metrics, webhooks: StateGaugeDeps['webhooks']): void {
  metrics.gauge(
    'touchstone_webhook_queue_depth',
    'Webhook deliveries not yet delivered or failed (PENDING or RETRYING).',
    async () => (await webhooks.queueStats()).depth,
  );
  metrics.gauge(
    'touchstone_webhook_oldest_pending_age_seconds',
    'Age of the oldest webhook delivery not yet delivered or failed; 0 when none.',
    async () => (await webhooks.queueStats()).oldestAgeSeconds,
  );
}

function sourceGauges(metrics: Metrics, { store, clock, sources }: StateGaugeDeps): void {
  const sourceGauge = (name: string, help: string, value: (s: SourceStatus) => number) =>
    metrics.labelledGauge(name, help, ['project', 'source'], async () => {
      const out = [];
      for (const record of await store.sources.listAll()) {
        const view = (await sources.view(record)) as { status: SourceStatus };
        out.push({
          labels: { project: record.project, source: record.name },
          value: value(view.status),
        });
      }
      return out;
    });
  sourceGauge(
    'touchstone_source_lag_seconds',
    'Seconds since the last complete pull of a source began.',
    (s) => s.lagSeconds ?? 0,
  );
  sourceGauge(
    'touchstone_source_watermark_age_seconds',
    'Seconds the watermark trails real time (healthy: about maxTraceDuration).',
    (s) => Math.max(0, (clock.now() - Date.parse(s.watermark)) / 1000),
  );
  sourceGauge('touchstone_source_failing', '1 while a source is in phase error.', (s) =>
    s.phase === 'error' ? 1 : 0,
  );
  sourceGauge(
    'touchstone_source_deferred_traces',
    'Traces the store still reports running.',
    (s) => s.deferred,
  );
}

function onlineGauges(metrics: Metrics, { store, clock }: StateGaugeDeps): void {
  metrics.gauge(
    'touchstone_online_queue_depth',
    'Trace versions waiting for online scoring (work items).',
    async () => (await store.work.stats()).depth,
  );
  metrics.gauge(
    'touchstone_online_oldest_item_age_seconds',
    'Age of the oldest work item waiting for online scoring; 0 when none.',
    async () => {
      const { oldestCreatedAt } = await store.work.stats();
      return oldestCreatedAt === undefined
        ? 0
        : Math.max(0, (clock.now() - oldestCreatedAt) / 1000);
    },
  );
}

function alertGauges(metrics: Metrics, store: Store): void {
  metrics.labelledGauge(
    'touchstone_policy_alert_firing',
    'Policy alerts: 1 while firing, 0 otherwise.',
    ['project', 'policy', 'metric'],
    async () =>
      (await store.alerts.states()).map((s) => ({
        labels: { project: s.project, policy: s.policy, metric: s.metric },
        value: s.firing ? 1 : 0,
      })),
  );
}
