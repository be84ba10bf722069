import type { Migration } from '../migrate.js';

/** Offline runs: the runs, their lease-free execution state, outputs and results. */
export const runs: Migration = {
  version: 6,
  name: 'runs',
  async up() {},
};
