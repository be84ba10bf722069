import { defineErrors } from '../../core/index.js';

/**
 * Errors of judge calls and judge verdicts. Messages name the judge (its configured name) and
 * the HTTP status at most: never the endpoint path, the credential, the prompt or the answer.
 */
export const JudgeErrors = defineErrors({
  JUDGE_CREDENTIAL_MISSING: {
    kind: 'failed_precondition',
    doc: "The environment variable named by a judge's `credential.env` is unset or empty; set it and retry.",
  },
  JUDGE_REQUEST_REFUSED: {
    kind: 'failed_precondition',
    doc: 'The judge endpoint refused the request (a 4xx other than 408/429, or a redirect); check the endpoint, model and credential.',
  },
  JUDGE_RATE_LIMITED: {
    kind: 'resource_exhausted',
    retryable: true,
    doc: 'The judge endpoint kept answering 429 after every retry, or asked to wait longer than allowed; retry after `Retry-After`.',
  },
  JUDGE_UNAVAILABLE: {
    kind: 'unavailable',
    retryable: true,
    doc: 'The judge endpoint could not be reached or kept failing (5xx) after every retry; retry later.',
  },
  JUDGE_TIMEOUT: {
    kind: 'deadline_exceeded',
    retryable: true,
    doc: "The judge endpoint did not answer within the judge's `timeout` on any attempt; retry later or raise the timeout.",
  },
  JUDGE_BAD_RESPONSE: {
    kind: 'internal',
    doc: 'The judge endpoint answered with something that is not an OpenAI-compatible chat completion (or not the JSON object asked for); check the endpoint and model.',
  },
  JUDGE_BAD_VERDICT: {
    kind: 'internal',
    doc: "The judge model's answer did not follow the evaluator's format (for example a score outside 1-5); the result is recorded as ERROR, never as a score.",
  },
});
