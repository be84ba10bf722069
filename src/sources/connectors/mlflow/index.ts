/**
 * The MLflow trace-store connector (open-source MLflow 3.x): see connector.ts. The source manager
 * builds it with `createMlflowConnector` and drives it through the TraceStoreConnector contract.
 */

export { assessmentSourceId } from './assessments.js';
export {
  BATCH_GET_SIZE,
  createMlflowConnector,
  DEFAULT_PAGE_SIZE,
  MAX_PAGE_SIZE,
  type MlflowConnectorOptions,
} from './connector.js';
export { MlflowErrors } from './error-codes.js';
