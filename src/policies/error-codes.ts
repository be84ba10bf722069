import { defineErrors } from '../core/index.js';

/** Errors of OnlineEvalPolicy resources, their CEL expressions and the scores read API. */
export const PolicyErrors = defineErrors({
  POLICY_INVALID: {
    kind: 'invalid_argument',
    doc: 'The policy resource is malformed: `details` names each field (apiVersion, kind, metadata.name, the project label, sampling rate outside 0-1, a stage without evaluators, an alert metric no stage produces, a bad duration).',
  },
  POLICY_CEL_INVALID: {
    kind: 'invalid_argument',
    doc: "A CEL expression of the policy (`spec.selector`, `spec.sampling.always[i]`, `spec.stages[i].when`) or of a trace source's overrides does not compile, is not boolean, or may cost more than the budget of one evaluation on a trace of the assumed sizes; `details` names the field and the line and column in the expression.",
  },
  POLICY_NOT_FOUND: {
    kind: 'not_found',
    doc: 'No policy with that name in the project.',
  },
  ANNOTATION_INVALID: {
    kind: 'invalid_argument',
    doc: 'A human annotation is malformed: `details` names each field (`name` not 1–64 letters, digits, `_ . -`; not exactly one of `value` in 0–1, `passed` true/false or `label`; `label` over 256 or `comment` over 4096 characters, empty, or with control characters; an unknown field).',
  },
  SCORES_QUERY_INVALID: {
    kind: 'invalid_argument',
    doc: 'A query parameter of the scores list is malformed (`since` not RFC 3339, `labels` not `key=value`, `page_size` out of range, a bad `page_token`); `details` names it.',
  },
});
