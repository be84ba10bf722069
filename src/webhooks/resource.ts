import { z } from 'zod';
import { RESOURCE_API_VERSION, RESOURCE_PROJECT_LABEL, ResourceNameSchema } from '../core/index.js';
import type { DeliveryRecord, WebhookRecord } from '../store/index.js';
import {
  eventType,
  WEBHOOK_EVENTS,
  type WebhookEventName,
  type WebhookEventType,
} from './events.js';

/**
 * The Webhook resource as the API and the CLI take it. Two spellings of one thing:
 * - flat: `{name, url, events?, secret?, disabled?, project?}` (the spec's fields);
 * - declarative: `{apiVersion: touchstone.dev/v1alpha1, kind: Webhook, metadata: {name, labels:
 *   {touchstone.dev/project}}, spec: {url, events, secret, disabled}}`, as in resource files.
 * Events may be written as enum values (`WEBHOOK_EVENT_RUN_FINISHED`) or event types
 * (`run.finished`); the API answers with enum values.
 */

export const API_VERSION = RESOURCE_API_VERSION;
export const PROJECT_LABEL = RESOURCE_PROJECT_LABEL;
export const MIN_SECRET_LENGTH = 16;

const name = ResourceNameSchema;

const url = z
  .string()
  .max(2048)
  .superRefine((text, ctx) => {
    let parsed: URL;
    try {
      parsed = new URL(text);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'not an absolute URL' });
      return;
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      ctx.addIssue({ code: 'custom', message: 'the URL must be http or https' });
    } else if (parsed.username !== '' || parsed.password !== '') {
      ctx.addIssue({ code: 'custom', message: 'the URL must not carry user:password@' });
    }
  });

const EVENT_NAMES = Object.values(WEBHOOK_EVENTS).join(', ');

const events = z
  .array(z.string())
  .max(32)
  .default([])
  .superRefine((list, ctx) => {
    list.forEach((e, i) => {
      if (eventType(e) === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: [i],
          message: `unknown event ${JSON.stringify(e)}; expected one of ${EVENT_NAMES}`,
        });
      }
    });
  })
  .transform((list) => [...new Set(list.map((e) => eventType(e) as WebhookEventType))]);

const secret = z
  .string()
  .min(MIN_SECRET_LENGTH, `a webhook secret has at least ${MIN_SECRET_LENGTH} characters`)
  .max(512);

const specFields = {
  url,
  events,
  secret: secret.optional(),
  disabled: z.boolean().default(false),
};

/** The flat spelling of a webhook (`name`, `url`, …). */
export const WebhookFlatSchema = z.strictObject({
  name,
  project: name.optional(),
  ...specFields,
  // Output-only fields, so that what `get` prints can be applied again unchanged.
  secretSet: z.boolean().optional(),
  createdAt: z.string().optional(),
  updatedAt: z.string().optional(),
});

/** The declarative `Webhook` resource. */
export const WebhookResourceSchema = z.strictObject({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal('Webhook'),
  metadata: z.strictObject({
    name,
    labels: z.record(z.string(), z.string()).optional(),
  }),
  spec: z.strictObject(specFields),
});

/** A webhook as applied, in one shape whatever spelling it came in. */
export interface WebhookSpec {
  name: string;
  project?: string;
  url: string;
  events: WebhookEventType[];
  secret?: string;
  disabled: boolean;
}

export type ParseResult =
  | { ok: true; spec: WebhookSpec }
  | { ok: false; issues: readonly z.core.$ZodIssue[] };

export function parseWebhook(input: unknown): ParseResult {
  const declarative =
    typeof input === 'object' && input !== null && ('apiVersion' in input || 'kind' in input);
  if (declarative) {
    const r = WebhookResourceSchema.safeParse(input);
    if (!r.success) return { ok: false, issues: r.error.issues };
    const project = r.data.metadata.labels?.[PROJECT_LABEL];
    return {
      ok: true,
      spec: {
        name: r.data.metadata.name,
        ...(project === undefined ? {} : { project }),
        ...r.data.spec,
      },
    };
  }
  const r = WebhookFlatSchema.safeParse(input);
  if (!r.success) return { ok: false, issues: r.error.issues };
  const { secretSet: _s, createdAt: _c, updatedAt: _u, ...spec } = r.data;
  return { ok: true, spec };
}

/** A webhook as the API shows it: never the secret. */
export interface WebhookView {
  name: string;
  project: string;
  url: string;
  events: WebhookEventName[];
  disabled: boolean;
  secretSet: boolean;
  createdAt: string;
  updatedAt: string;
}

export function webhookView(w: WebhookRecord): WebhookView {
  return {
    name: w.name,
    project: w.project,
    url: w.url,
    events: w.events.map((e) => WEBHOOK_EVENTS[e as WebhookEventType] ?? e) as WebhookEventName[],
    disabled: w.disabled,
    secretSet: w.secret !== '',
    createdAt: w.createdAt,
    updatedAt: w.updatedAt,
  };
}

/** A delivery record as the deliveries list shows it. */
export interface DeliveryView {
  id: string;
  webhook: string;
  /** The event type, as in `Touchstone-Event`. */
  event: string;
  state: DeliveryRecord['state'];
  attempts: number;
  lastStatus?: number;
  lastError?: string;
  runId?: string;
  traceId?: string;
  policy?: string;
  createdAt: string;
  nextAttemptAt?: string;
  finishedAt?: string;
}

export function deliveryView(d: DeliveryRecord): DeliveryView {
  const view: DeliveryView = {
    id: d.id,
    webhook: d.webhookName,
    event: d.event,
    state: d.state,
    attempts: d.attempts,
    createdAt: d.createdAt,
  };
  // Listed explicitly so that nothing else a record may carry (the payload) reaches a caller.
  if (d.lastStatus !== undefined) view.lastStatus = d.lastStatus;
  if (d.lastError !== undefined) view.lastError = d.lastError;
  if (d.runId !== undefined) view.runId = d.runId;
  if (d.traceId !== undefined) view.traceId = d.traceId;
  if (d.policy !== undefined) view.policy = d.policy;
  if (d.nextAttemptAt !== undefined) view.nextAttemptAt = d.nextAttemptAt;
  if (d.finishedAt !== undefined) view.finishedAt = d.finishedAt;
  return view;
}
