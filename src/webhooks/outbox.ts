import type { Clock } from '../core/index.js';
import type { NewDelivery, StoreTransaction, WebhookRecord } from '../store/index.js';
import { newDeliveryId } from './delivery-id.js';
import {
  eventFields,
  eventRefs,
  PING,
  type RunPayload,
  runFinishedEvents,
  subscribes,
  type WebhookEvent,
} from './events.js';

/**
 * Where events enter the outbox. Other areas (runs, online policies, alerts) call `emitEvent`
 * inside the transaction that makes the change the event reports, so the deliveries commit or
 * roll back with it: nothing is announced that did not happen, and nothing that happened is lost.
 */
export interface WebhookEmitter {
  /**
   * Writes one PENDING delivery per enabled webhook of the event's project that subscribes to it,
   * with the payload frozen now. Returns the delivery ids (none when no webhook matches).
   */
  emitEvent(tx: StoreTransaction, event: WebhookEvent): Promise<string[]>;
  /** `run.finished`, then `run.gate_failed` when the run FAILED a gate (runFinishedEvents). */
  emitRunFinished(tx: StoreTransaction, project: string, run: RunPayload): Promise<string[]>;
  /**
   * The event's body, unsigned, to one URL that is not a webhook resource (a policy's own
   * `alerts[].webhook`); delivered and retried like any other. Returns the delivery id.
   */
  emitToUrl(tx: StoreTransaction, event: WebhookEvent, url: string): Promise<string>;
}

export interface OutboxDeps {
  clock: Clock;
  /** Called after rows are written, so the dispatcher can look sooner than its next poll. */
  onEnqueued?: () => void;
}

/**
 * The payload: the envelope (`id` = the delivery id, `type`, `created_at`, `project`) followed by
 * the event's own fields. Built once per delivery and stored as text, so every attempt sends (and
 * signs) the same bytes.
 */
function payload(id: string, type: string, at: string, project: string, fields: object): string {
  return JSON.stringify({ id, type, created_at: at, project, ...fields });
}

export class WebhookOutbox implements WebhookEmitter {
  constructor(private readonly deps: OutboxDeps) {}

  async emitEvent(tx: StoreTransaction, event: WebhookEvent): Promise<string[]> {
    return this.emit(tx, [event]);
  }

  /** Several events in order, as `emitEvent` of each; the webhooks are read once per project. */
  async emitEvents(tx: StoreTransaction, events: readonly WebhookEvent[]): Promise<string[]> {
    return this.emit(tx, events);
  }

  async emitRunFinished(tx: StoreTransaction, project: string, run: RunPayload): Promise<string[]> {
    return this.emit(tx, runFinishedEvents(project, run));
  }

  async emitToUrl(tx: StoreTransaction, event: WebhookEvent, url: string): Promise<string> {
    const now = this.deps.clock.now();
    const id = newDeliveryId(now);
    const refs = eventRefs(event);
    await tx.webhooks.enqueue([
      {
        id,
        project: event.project,
        // Not a webhook row: names the policy whose alert this is (deliveries group by it).
        webhookId: `policy:${refs.policy ?? ''}`,
        webhookName: `policy:${refs.policy ?? ''}`,
        event: event.type,
        payload: payload(
          id,
          event.type,
          new Date(now).toISOString(),
          event.project,
          eventFields(event),
        ),
        targetUrl: url,
        createdAt: new Date(now).toISOString(),
        ...refs,
      },
    ]);
    this.deps.onEnqueued?.();
    return id;
  }

  /** A `ping` to one webhook (the test operation), whatever events it subscribes to. */
  async enqueuePing(tx: StoreTransaction, webhook: WebhookRecord): Promise<NewDelivery> {
    const now = this.deps.clock.now();
    const at = new Date(now).toISOString();
    const id = newDeliveryId(now);
    const ping: NewDelivery = {
      id,
      project: webhook.project,
      webhookId: webhook.id,
      webhookName: webhook.name,
      event: PING,
      payload: payload(id, PING, at, webhook.project, { webhook: webhook.name }),
      createdAt: at,
    };
    await tx.webhooks.enqueue([ping]);
    this.deps.onEnqueued?.();
    return ping;
  }

  private async emit(tx: StoreTransaction, events: readonly WebhookEvent[]): Promise<string[]> {
    const byProject = new Map<string, WebhookRecord[]>();
    const rows: NewDelivery[] = [];
    const now = this.deps.clock.now();
    const at = new Date(now).toISOString();
    for (const event of events) {
      // Read at enqueue, in the caller's transaction: a webhook applied or deleted on any replica
      // counts from the next event on, with no cache to go stale.
      let hooks = byProject.get(event.project);
      if (hooks === undefined) {
        hooks = await tx.webhooks.listEnabled(event.project);
        byProject.set(event.project, hooks);
      }
      const fields = eventFields(event);
      const refs = eventRefs(event);
      for (const hook of hooks) {
        if (!subscribes(hook.events, event.type)) continue;
        const id = newDeliveryId(now);
        rows.push({
          id,
          project: event.project,
          webhookId: hook.id,
          webhookName: hook.name,
          event: event.type,
          payload: payload(id, event.type, at, event.project, fields),
          createdAt: at,
          ...refs,
        });
      }
    }
    if (rows.length === 0) return [];
    await tx.webhooks.enqueue(rows);
    this.deps.onEnqueued?.();
    return rows.map((r) => r.id);
  }
}
