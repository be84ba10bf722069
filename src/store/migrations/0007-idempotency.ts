import type { Migration } from '../migrate.js';

/** Idempotency-Key records: stored outcomes per principal, operation and key. */
export const idempotency: Migration = {
  version: 7,
  name: 'idempotency',
  async up() {},
};
