/** Storage port: webhooks and their deliveries (the outbox). The conventions are in ../ports.ts. */
import type { DeliveryState } from '../../webhooks/states.js';
import type { Page, PageRequest } from './paging.js';

/** The area's own word, re-exported for the store's files (areas import it from the area). */
export type { DeliveryState };

/**
 * A webhook as stored. The secret is stored as is, not hashed, because every attempt is signed
 * with it: the database is the trust boundary for it, as it is for the payloads it signs.
 */
export interface WebhookRecord {
  /**
   * `wh_…`, kept when the webhook is replaced by name. A webhook deleted and created again gets a
   * new id, so deliveries queued for the old one never reach the new one.
   */
  id: string;
  project: string;
  name: string;
  url: string;
  /** Event types (`run.finished`, …); empty = every event except `trace.scored`. */
  events: string[];
  secret: string;
  disabled: boolean;
  createdAt: string;
  updatedAt: string;
}

export interface NewDelivery {
  /** `whd_…`; ids must sort in creation order (the dispatcher sends oldest first). */
  id: string;
  project: string;
  webhookId: string;
  webhookName: string;
  /** `run.finished`, `trace.scored`, `ping`, … */
  event: string;
  /** The JSON body sent on every attempt. */
  payload: string;
  runId?: string;
  traceId?: string;
  policy?: string;
  /**
   * Sends to this URL, unsigned, instead of the webhook's (a policy's own `alerts[].webhook`);
   * `webhookId` then names the policy alert (`policy:<name>`) and no webhook row is read.
   */
  targetUrl?: string;
  /** Also when the first attempt is due. */
  createdAt: string;
}

export interface DeliveryRecord {
  id: string;
  project: string;
  webhookId: string;
  webhookName: string;
  event: string;
  state: DeliveryState;
  /** Attempts started, the one in flight included. */
  attempts: number;
  /** Unfinished deliveries only. */
  nextAttemptAt?: string;
  /** HTTP status of the last answered attempt. */
  lastStatus?: number;
  /** Why the last attempt failed; safe text (no secrets, no payload). */
  lastError?: string;
  runId?: string;
  traceId?: string;
  policy?: string;
  /** A policy alert's own URL (see `NewDelivery.targetUrl`). */
  targetUrl?: string;
  createdAt: string;
  finishedAt?: string;
}

/** A delivery claimed for one attempt. */
export interface ClaimedDelivery extends DeliveryRecord {
  payload: string;
  /** The attempt this claim owns (1-based); the fencing token for `finishAttempt`. */
  attempt: number;
}

export type AttemptOutcome =
  | { state: 'DELIVERED'; status: number }
  | { state: 'FAILED'; status?: number; error: string }
  | { state: 'RETRYING'; status?: number; error: string; nextAttemptAt: number };

/** Caps what one claim takes per webhook, so one slow receiver cannot take every slot. */
export interface PerWebhookLimit {
  /** Deliveries of one webhook in flight at once. */
  max: number;
  /** In flight now, by webhook id. */
  inFlight: ReadonlyMap<string, number>;
}

export interface WebhookStore {
  /**
   * Creates the webhook, or replaces the one with the same (project, name), keeping its id and
   * createdAt. `id` is used only when it is created. Returns the stored webhook.
   */
  upsert(
    webhook: Omit<WebhookRecord, 'createdAt' | 'updatedAt'>,
    now: number,
  ): Promise<{ webhook: WebhookRecord; created: boolean }>;
  get(project: string, name: string): Promise<WebhookRecord | undefined>;
  getByIds(ids: readonly string[]): Promise<WebhookRecord[]>;
  /** Webhooks of one project by name. Throws INVALID_ARGUMENT for a malformed page token. */
  list(project: string, page: PageRequest): Promise<Page<WebhookRecord>>;
  /** Every webhook of a project that is not disabled (what an event is matched against). */
  listEnabled(project: string): Promise<WebhookRecord[]>;
  /** Returns false when there was none. Its deliveries stay (and fail when due). */
  delete(project: string, name: string): Promise<boolean>;

  enqueue(deliveries: readonly NewDelivery[]): Promise<void>;
  /**
   * Claims up to `limit` due deliveries (unfinished, `nextAttemptAt <= now`, fewer than
   * `maxAttempts` attempts), oldest first: each gets one more attempt and is hidden until
   * `hideUntil`, after which it is due again (a sender that died mid-attempt). One conditional
   * statement, so two callers never claim the same attempt.
   */
  claimDue(
    now: number,
    limit: number,
    maxAttempts: number,
    hideUntil: number,
    perWebhook?: PerWebhookLimit,
  ): Promise<ClaimedDelivery[]>;
  /**
   * Marks due deliveries that already used `maxAttempts` attempts (the last one was lost with its
   * sender) FAILED. Returns how many.
   */
  failExhausted(now: number, maxAttempts: number, error: string): Promise<number>;
  /**
   * Records the outcome of `attempt`. Returns false, changing nothing, when the delivery is
   * finished or was claimed again since (a stale sender).
   */
  finishAttempt(
    id: string,
    attempt: number,
    outcome: AttemptOutcome,
    now: number,
  ): Promise<boolean>;
  /**
   * Records several successful attempts in one statement (the common case, batched). Returns the
   * ids recorded; the others were finished or claimed again since.
   */
  finishDelivered(
    delivered: readonly { id: string; attempt: number; status: number }[],
    now: number,
  ): Promise<string[]>;
  /** One webhook's deliveries, newest first. */
  listDeliveries(webhookId: string, page: PageRequest): Promise<Page<DeliveryRecord>>;
  /** Deletes up to `limit` deliveries finished before `before`; returns how many. */
  pruneFinished(before: number, limit: number): Promise<number>;
  /** Unfinished deliveries: how many, and when the oldest was enqueued. */
  queueStats(): Promise<{ depth: number; oldestCreatedAt?: string }>;
}
