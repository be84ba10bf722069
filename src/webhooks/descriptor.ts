import type { ResourceDescriptor } from '../resources/index.js';
import { WebhookFlatSchema, WebhookResourceSchema } from './resource.js';

/** The Webhook resource: `/v1alpha1/webhooks`, `touchstone webhook`. */
export const WEBHOOK_RESOURCE: ResourceDescriptor = {
  kind: 'Webhook',
  title: 'Webhook',
  singular: 'webhook',
  plural: 'webhooks',
  access: { read: 'webhooks.read', write: 'webhooks.write' },
  bodies: { Webhook: WebhookFlatSchema, WebhookResource: WebhookResourceSchema },
  // Answers are the flat webhook (name, url, events, …), never its secret.
  envelope: false,
  idempotentDelete: true,
  // A generated signing secret is returned once: never stored with the outcome, never replayed.
  withhold: ['secret'],
};
