import { type AuditLogger, authorize, coversTrace, type Principal } from '../auth/index.js';
import {
  type Clock,
  describeDetails,
  issuesToDetails,
  isTouchstoneError,
  newId,
  newSecret,
} from '../core/index.js';
import type { OutboundGuard } from '../net/index.js';
import { ResourceService } from '../resources/index.js';
import type { Page, PageRequest, Store, WebhookRecord } from '../store/index.js';
import { WEBHOOK_RESOURCE } from './descriptor.js';
import { WebhookErrors } from './error-codes.js';
import type { WebhookOutbox } from './outbox.js';
import {
  type DeliveryView,
  deliveryView,
  parseWebhook,
  type WebhookSpec,
  type WebhookView,
  webhookView,
} from './resource.js';

export interface WebhookServiceDeps {
  store: Store;
  clock: Clock;
  outbox: WebhookOutbox;
  /** The outbound guard's DNS-free checks, to refuse obviously internal URLs at apply. */
  guard: Pick<OutboundGuard, 'checkTarget'>;
  logger: AuditLogger;
}

/** The apply response: the webhook, plus its secret only when Touchstone just generated it. */
export type AppliedWebhook = WebhookView & { secret?: string };

/**
 * The webhook resource's operations (REST, CLI local mode and later the SDK call these): the
 * kit's apply, get, list and delete, plus test and deliveries. Every write is audited: principal,
 * action, project and webhook name, never the secret or the URL.
 *
 * Apply creates or replaces a webhook by name within its project. A new webhook without a secret
 * gets a generated `whsec_…` one, returned in this response only; a replaced one without a secret
 * keeps the stored one. A secret the caller sets is never echoed back.
 */
export class WebhookService extends ResourceService<
  WebhookSpec,
  WebhookRecord,
  WebhookView,
  AppliedWebhook
> {
  constructor(private readonly deps: WebhookServiceDeps) {
    super(WEBHOOK_RESOURCE, deps, deps.store.webhooks);
  }

  protected parse(input: unknown): WebhookSpec {
    const parsed = parseWebhook(input);
    if (parsed.ok) return parsed.spec;
    const details = issuesToDetails(parsed.issues);
    throw WebhookErrors.WEBHOOK_INVALID(`invalid webhook: ${describeDetails(details)}`, {
      details,
    });
  }

  protected async check(spec: WebhookSpec): Promise<void> {
    try {
      await this.deps.guard.checkTarget(new URL(spec.url));
    } catch (err) {
      if (!isTouchstoneError(err)) throw err;
      throw WebhookErrors.WEBHOOK_URL_REFUSED(err.message, {
        details: [{ path: 'url', message: err.message }],
      });
    }
  }

  protected preview(
    spec: WebhookSpec,
    project: string,
    existing: WebhookRecord | undefined,
    now: string,
  ): WebhookView {
    return webhookView({
      id: existing?.id ?? '',
      project,
      name: spec.name,
      url: spec.url,
      events: spec.events,
      // Not shown; an applied webhook always has one (generated when none is given).
      secret: existing?.secret ?? 'generated on apply',
      disabled: spec.disabled,
      createdAt: existing?.createdAt ?? now,
      updatedAt: now,
    });
  }

  protected async write(spec: WebhookSpec, project: string, now: number): Promise<AppliedWebhook> {
    const { webhook, generated } = await this.deps.store.withTransaction(async (tx) => {
      const existing = await tx.webhooks.get(project, spec.name);
      const generated = spec.secret === undefined && existing === undefined;
      const secret = spec.secret ?? existing?.secret ?? newSecret('whsec');
      const stored = await tx.webhooks.upsert(
        {
          id: existing?.id ?? newId('wh'),
          project,
          name: spec.name,
          url: spec.url,
          events: spec.events,
          secret,
          disabled: spec.disabled,
        },
        now,
      );
      return { webhook: stored.webhook, generated };
    });
    const view: AppliedWebhook = webhookView(webhook);
    if (generated) view.secret = webhook.secret;
    return view;
  }

  protected view(record: WebhookRecord): WebhookView {
    return webhookView(record);
  }

  protected notFound(project: string, name: string) {
    return notFound(project, name);
  }

  /** Queues a `ping` delivery to the webhook (sent like any other) and wakes the dispatcher. */
  async test(caller: Principal, project: string | undefined, name: string): Promise<DeliveryView> {
    return this.audited(caller, 'test', project, name, async () => {
      const p = authorize(caller, 'webhooks.write', project, this.named(name));
      const ping = await this.deps.store.withTransaction(async (tx) => {
        const webhook = await tx.webhooks.get(p, name);
        if (webhook === undefined) throw notFound(p, name);
        if (webhook.disabled) {
          throw WebhookErrors.WEBHOOK_DISABLED(`webhook "${name}" is disabled and sends nothing`);
        }
        return this.deps.outbox.enqueuePing(tx, webhook);
      });
      return deliveryView({
        ...ping,
        state: 'PENDING',
        attempts: 0,
        nextAttemptAt: ping.createdAt,
      });
    });
  }

  async deliveries(
    caller: Principal,
    project: string | undefined,
    name: string,
    page: PageRequest,
  ): Promise<Page<DeliveryView>> {
    const webhook = await this.find(caller, 'read', project, name);
    const result = await this.deps.store.webhooks.listDeliveries(webhook.id, page);
    const hidden = await this.hiddenTraces(caller, webhook.project, result.items);
    const items = result.items.filter((d) => d.traceId === undefined || !hidden.has(d.traceId));
    return { ...result, items: items.map(deliveryView) };
  }

  /**
   * The traces of these deliveries a scoped caller may not read: their deliveries are left out
   * of its pages (which may then hold fewer items), as the traces are left out of its lists.
   */
  private async hiddenTraces(
    caller: Principal,
    project: string,
    deliveries: readonly { traceId?: string }[],
  ): Promise<Set<string>> {
    const hidden = new Set<string>();
    if (caller.scope === undefined) return hidden;
    const ids = new Set(deliveries.flatMap((d) => (d.traceId === undefined ? [] : [d.traceId])));
    for (const id of ids) {
      const found = await this.deps.store.traces.get(project, id);
      if (found === undefined || !coversTrace(caller, found.trace)) hidden.add(id);
    }
    return hidden;
  }

  /** Unfinished deliveries (PENDING or RETRYING) across all projects, for the queue gauges. */
  async queueStats(): Promise<{ depth: number; oldestAgeSeconds: number }> {
    const stats = await this.deps.store.webhooks.queueStats();
    const oldest =
      stats.oldestCreatedAt === undefined ? undefined : Date.parse(stats.oldestCreatedAt);
    return {
      depth: stats.depth,
      oldestAgeSeconds:
        oldest === undefined ? 0 : Math.max(0, (this.deps.clock.now() - oldest) / 1000),
    };
  }
}

function notFound(project: string, name: string) {
  return WebhookErrors.WEBHOOK_NOT_FOUND(`no webhook "${name}" in project "${project}"`);
}
