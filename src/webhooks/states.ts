/**
 * The words of a webhook delivery's life, owned by webhooks: the store records them and learns
 * them from here.
 * A leaf: it imports nothing, so the store can import it without a cycle
 * (dependency-cruiser checks both).
 */

/** PENDING (no attempt finished yet), RETRYING, DELIVERED, FAILED (gave up). */
export const DELIVERY_STATES = ['PENDING', 'RETRYING', 'DELIVERED', 'FAILED'] as const;

export type DeliveryState = (typeof DELIVERY_STATES)[number];
