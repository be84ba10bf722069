/**
 * @module webhooks
 * Signed, retried HTTP callbacks from one durable outbox: the Webhook resource and its service,
 * the events and their payloads, `emitEvent` (the one way other areas announce an event, inside
 * their own transaction), and the lease-held dispatcher with its retry ladder. Owns webhook
 * secrets (stored as is, since they sign). Imports core, auth, config types, net and store ports;
 * never api/, and no metrics library (it reports through WebhookObserver).
 */
import type { Config } from '../config/index.js';
import type { Clock } from '../core/index.js';
import {
  createHttpClient,
  createOutboundGuard,
  type HttpClient,
  type ProxySettings,
} from '../net/index.js';
import type { Store } from '../store/index.js';
import { type DispatcherLogger, WebhookDispatcher, type WebhookObserver } from './dispatcher.js';
import { WebhookOutbox } from './outbox.js';
import { WebhookService } from './service.js';

export { WEBHOOK_RESOURCE } from './descriptor.js';
export {
  type AttemptResult,
  type DispatcherDeps,
  type DispatcherLogger,
  LEASE_NAME,
  LEASE_TTL_MS,
  RETRY_DELAYS_MS,
  retryDelayMs,
  WebhookDispatcher,
  type WebhookObserver,
} from './dispatcher.js';
export { WebhookErrors } from './error-codes.js';
export {
  type AlertPayload,
  eventType,
  PING,
  type RunPayload,
  runFinishedEvents,
  type TracePayload,
  WEBHOOK_EVENTS,
  type WebhookEvent,
  type WebhookEventName,
  type WebhookEventType,
} from './events.js';
export { type WebhookEmitter, WebhookOutbox } from './outbox.js';
export {
  API_VERSION,
  type DeliveryView,
  MIN_SECRET_LENGTH,
  PROJECT_LABEL,
  WebhookFlatSchema,
  WebhookResourceSchema,
  type WebhookView,
} from './resource.js';
export { type AppliedWebhook, WebhookService } from './service.js';
export { signatureHeader } from './signature.js';
export { DELIVERY_STATES, type DeliveryState } from './states.js';

/** Everything the composition root wires for webhooks. */
export interface Webhooks {
  readonly service: WebhookService;
  /** What runs, policies and alerts call to announce events. */
  readonly emitter: WebhookOutbox;
  readonly dispatcher: WebhookDispatcher;
  /** Stops the dispatcher and closes its HTTP client. Safe twice. */
  close(): Promise<void>;
}

export interface WebhooksDeps {
  config: Config['webhooks'];
  store: Store;
  clock: Clock;
  logger: DispatcherLogger;
  observer?: WebhookObserver;
  /** The outbound proxy, when one is configured (targets are still checked locally). */
  proxy?: ProxySettings;
}

/**
 * Builds the webhook service, emitter and dispatcher. Webhook URLs go through their own HTTP
 * client with the outbound guard (`webhooks.allow_hosts`); plain http is allowed to public
 * addresses, as receivers behind a TLS-terminating proxy often need it.
 */
export function createWebhooks(deps: WebhooksDeps): Webhooks {
  const guard = createOutboundGuard({
    allowHosts: deps.config.allow_hosts,
    requireHttps: false,
    setting: 'webhooks.allow_hosts',
  });
  const http: HttpClient = createHttpClient({
    userAgent: 'touchstone-webhooks',
    timeoutMs: deps.config.timeout,
    checkTarget: guard.checkTarget,
    wrapConnector: guard.wrapConnector,
    clock: deps.clock,
    ...(deps.proxy === undefined ? {} : { proxy: deps.proxy }),
  });
  const dispatcher = new WebhookDispatcher({
    store: deps.store,
    http,
    clock: deps.clock,
    logger: deps.logger,
    maxAttempts: deps.config.max_attempts,
    timeoutMs: deps.config.timeout,
    retentionMs: deps.config.retention,
    ...(deps.observer === undefined ? {} : { observer: deps.observer }),
  });
  const emitter = new WebhookOutbox({ clock: deps.clock, onEnqueued: () => dispatcher.wake() });
  const service = new WebhookService({
    store: deps.store,
    clock: deps.clock,
    outbox: emitter,
    guard,
    logger: deps.logger,
  });
  let closing: Promise<void> | undefined;
  return {
    service,
    emitter,
    dispatcher,
    close() {
      closing ??= dispatcher.shutdown().finally(() => http.close());
      return closing;
    },
  };
}
