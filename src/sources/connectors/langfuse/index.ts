/**
 * The Langfuse trace-store connector (Langfuse v4, or v3.133+ with the v4 preview opt-in): see
 * connector.ts and docs/sources-langfuse.md. The source manager builds it with
 * `createLangfuseConnector` and drives it through the TraceStoreConnector contract. Built from
 * Langfuse's published API definitions at tag v4.16.0 (test/fakes/langfuse/README.md).
 */

export {
  createLangfuseConnector,
  DEFAULT_PAGE_SIZE,
  FETCH_PAGE_SIZE,
  type LangfuseConnectorOptions,
  MAX_PAGE_SIZE,
} from './connector.js';
export { LangfuseErrors } from './error-codes.js';
export { otelSpanId, otelTraceId, SCORE_NAMESPACE, scoreId } from './ids.js';
