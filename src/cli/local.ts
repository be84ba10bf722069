/**
 * What commands need only when they work on the local data dir (no `--server`): the composition
 * root, the store and the areas' services. Commands import this module when they go local
 * (`await import('./local.js')`), so a command talking to a server loads none of it: that is
 * about 1,700 modules and 2 s of CPU at every start.
 */
import { pino } from 'pino';
import type { Config } from '../config/index.js';
import { systemClock } from '../core/index.js';
import { openStore, type Store } from '../store/index.js';

export {
  authRequired,
  createApp,
  createLocalEvaluation,
  createLocalRuns,
  localGuardPolicies,
  localPolicies,
  localSources,
  localWebhooks,
} from '../app/index.js';
export { AuditTrail, KeyService, OPEN_PRINCIPAL } from '../auth/index.js';
export { systemClock } from '../core/index.js';
export { createDatasetService } from '../datasets/index.js';
export { TraceQueries } from '../ingest/index.js';
export { AnnotationService, ScoreQueries } from '../policies/index.js';
export { compileRedaction } from '../redaction/index.js';
export { runView } from '../runs/index.js';
export { SourceDirectory, SourceResultSink } from '../sources/index.js';
export { WebhookOutbox } from '../webhooks/index.js';

/** A logger for local work: its outcome is what the command prints. */
export const silentLogger = () => pino({ level: 'silent' });

/** The local data dir's store, opened as the server would open it from the same config. */
export function openLocalStore(config: Config): Promise<Store> {
  return openStore(config, { clock: systemClock, logger: silentLogger() });
}
