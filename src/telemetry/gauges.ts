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

/**
 * One read shared by the gauges that a scrape asks for at once (the registry collects every
 * metric together): the queue counts scan their table, so each is read once per scrape, not once
 * per gauge. Nothing is kept once the read settles; the next scrape reads again.
 */
export function sharedRead<T>(read: () => Promise<T>): () => Promise<T> {
  let inFlight: Promise<T> | undefined;
  return () => {
    inFlight ??= read().finally(() => {
      inFlight = undefined;
    });
    return inFlight;
  };
}

function webhookGauges(metrics: Metrics, webhooks: StateGaugeDeps['webhooks']): void {
  const stats = sharedRead(() => webhooks.queueStats());
  metrics.gauge(
    'touchstone_webhook_queue_depth',
    'Webhook deliveries not yet delivered or failed (PENDING or RETRYING).',
    async () => (await stats()).depth,
  );
  metrics.gauge(
    'touchstone_webhook_oldest_pending_age_seconds',
    'Age of the oldest webhook delivery not yet delivered or failed; 0 when none.',
    async () => (await stats()).oldestAgeSeconds,
  );
}

function sourceGauges(metrics: Metrics, { store, clock, sources }: StateGaugeDeps): void {
  const statuses = sharedRead(async () => {
    const out = [];
    for (const record of await store.sources.listAll()) {
      const view = (await sources.view(record)) as { status: SourceStatus };
      out.push({ labels: { project: record.project, source: record.name }, status: view.status });
    }
    return out;
  });
  const sourceGauge = (name: string, help: string, value: (s: SourceStatus) => number) =>
    metrics.labelledGauge(name, help, ['project', 'source'], async () =>
      (await statuses()).map(({ labels, status }) => ({ labels, value: value(status) })),
    );
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
  const stats = sharedRead(() => store.work.stats());
  metrics.gauge(
    'touchstone_online_queue_depth',
    'Trace versions waiting for online scoring (work items).',
    async () => (await stats()).depth,
  );
  metrics.gauge(
    'touchstone_online_oldest_item_age_seconds',
    'Age of the oldest work item waiting for online scoring; 0 when none.',
    async () => {
      const { oldestCreatedAt } = await stats();
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
