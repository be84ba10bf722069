import type { Logger } from 'pino';
import type { Clock } from '../core/index.js';
import type { Store } from '../store/index.js';
import type { Metrics } from '../telemetry/index.js';

/** What every server-side builder gets: the store, the clock, the logger and telemetry. */
export interface BuildBase {
  store: Store;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
}
