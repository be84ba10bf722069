/**
 * The Arize Phoenix trace-store connector (REST `/v1`, Phoenix 20.20+): see connector.ts. The
 * source manager builds it with `createPhoenixConnector` and drives it through the
 * TraceStoreConnector contract.
 */

export {
  ANNOTATION_BATCH,
  annotationIdentifier,
  evaluatorOf,
  scoreSpanId,
} from './annotations.js';
export {
  createPhoenixConnector,
  DEFAULT_PAGE_SIZE,
  FETCH_BATCH_SIZE,
  MAX_PAGE_SIZE,
  otelTraceId,
  type PhoenixConnectorOptions,
  ROOT_QUERY_SIZE,
} from './connector.js';
export { PhoenixErrors } from './error-codes.js';
