import { defineErrors } from '../core/index.js';

export const EvaluatorErrors = defineErrors({
  EVALUATOR_UNKNOWN: {
    kind: 'invalid_argument',
    doc: 'An evaluator `ref` names no registered evaluator type; `GET /v1alpha1/evaluators` lists them.',
  },
  EVALUATOR_PARAMS_INVALID: {
    kind: 'invalid_argument',
    doc: "An evaluator's params do not fit its schema; `details` names each field.",
  },
  EVALUATOR_NAME_DUPLICATE: {
    kind: 'invalid_argument',
    doc: 'Two evaluators in one list share an instance name; give one of them a `name`.',
  },
  JUDGE_UNKNOWN: {
    kind: 'invalid_argument',
    doc: 'The request names a judge that is not under `judges` in the server config.',
  },
  RECORD_INVALID: {
    kind: 'invalid_argument',
    doc: 'A record does not fit the Record schema; `details` names the record index and field.',
  },
});
