import { defineErrors } from '../../../core/index.js';

/**
 * Errors of the MLflow connector. Messages name the host, the operation and MLflow's
 * `error_code`, never a path, query, token, trace content or MLflow's own message text (which can
 * quote filters or names).
 */
export const MlflowErrors = defineErrors({
  MLFLOW_UNAVAILABLE: {
    kind: 'unavailable',
    retryable: true,
    doc: 'The MLflow server answered with a server error (5xx other than 501 and 505) or timed out; the source backs off and retries, after `Retry-After` when MLflow sent one.',
  },
  MLFLOW_RATE_LIMITED: {
    kind: 'resource_exhausted',
    retryable: true,
    doc: 'The MLflow server (or a proxy in front of it) answered 429; the source waits for `Retry-After` and retries.',
  },
  MLFLOW_ACCESS_DENIED: {
    kind: 'permission_denied',
    doc: "The MLflow server refused the source's credential (401 or 403); grant the token read access to the experiments (and edit access for write-back) or fix the credential.",
  },
  MLFLOW_BAD_RESPONSE: {
    kind: 'failed_precondition',
    doc: 'The endpoint answered something that is not MLflow JSON (an HTML page, invalid JSON, an unexpected shape); check that the endpoint is the MLflow server base URL and not a login page or proxy.',
  },
  MLFLOW_REQUEST_REFUSED: {
    kind: 'failed_precondition',
    doc: "The MLflow server refused a request (4xx, or 501 or 505: the server will never do it) with the `error_code` named in the message; check the server's version and the source's settings.",
  },
  MLFLOW_EXPERIMENT_NOT_FOUND: {
    kind: 'not_found',
    doc: 'A source location names no active MLflow experiment (unknown name or id, or deleted); fix `spec.locations`.',
  },
  MLFLOW_TRACE_API_MISSING: {
    kind: 'unimplemented',
    doc: 'The MLflow server has no v3 trace API (`/api/3.0/mlflow/traces/search` is missing); MLflow 3.x is required.',
  },
  MLFLOW_TOKEN_REFUSED: {
    kind: 'permission_denied',
    doc: "Databricks' token endpoint (`<endpoint>/oidc/v1/token`) refused the service principal's client id and OAuth secret (a 4xx); check `auth.databricks.clientId`, the secret the credential names, and that the service principal belongs to the workspace.",
  },
  MLFLOW_SEARCH_TIMEOUT: {
    kind: 'unavailable',
    retryable: true,
    doc: 'A Databricks catalog-schema trace search did not finish within five minutes of polling in one pull; the source retries it at its next pull, its watermark unchanged.',
  },
  MLFLOW_CREDENTIAL_INVALID: {
    kind: 'failed_precondition',
    doc: 'The credential a source names has the wrong form: SageMaker wants a JSON object with `access_key_id`, `secret_access_key` and optionally `session_token`.',
  },
});
