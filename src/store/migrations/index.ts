import type { Migration } from '../migrate.js';
import { initial } from './0001-initial.js';
import { traces } from './0002-traces.js';
import { webhooks } from './0003-webhooks.js';
import { online } from './0004-online.js';
import { sources } from './0005-sources.js';
import { runs } from './0006-runs.js';
import { idempotency } from './0007-idempotency.js';
import { sourceStoreIds } from './0008-source-store-ids.js';
import { writeBackDeadLetters } from './0009-write-back-dead-letters.js';
import { readViews } from './0010-read-views.js';
import { spanResources } from './0011-span-resources.js';
import { audit } from './0012-audit.js';
import { guardPolicies } from './0013-guard-policies.js';
import { readIndexes } from './0014-read-indexes.js';
import { scoreRollup } from './0015-score-rollup.js';
import { resultsOutcomeIndex } from './0016-results-outcome-index.js';
import { spanChunkFormat } from './0017-span-chunk-format.js';
import { labelOrder } from './0018-label-order.js';
import { resultsInTimeOrder } from './0019-results-in-time-order.js';
import { rollupInsertsByStore } from './0020-rollup-inserts-by-store.js';
import { labelKeys } from './0021-label-keys.js';
import { traceInlineSpans } from './0022-trace-inline-spans.js';
import { workItemKeyInTimeOrder } from './0023-work-item-key-in-time-order.js';

/**
 * Every migration, in order. Append only: an applied migration is never edited (write a new one),
 * versions are consecutive, and SQL that differs by dialect branches on `dialect` inside `up`.
 */
export const MIGRATIONS: readonly Migration[] = [
  initial,
  traces,
  webhooks,
  online,
  sources,
  runs,
  idempotency,
  sourceStoreIds,
  writeBackDeadLetters,
  readViews,
  spanResources,
  audit,
  guardPolicies,
  readIndexes,
  scoreRollup,
  resultsOutcomeIndex,
  spanChunkFormat,
  labelOrder,
  resultsInTimeOrder,
  rollupInsertsByStore,
  labelKeys,
  traceInlineSpans,
  workItemKeyInTimeOrder,
];
