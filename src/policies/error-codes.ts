import { CelErrors } from '../cel/index.js';
import { defineErrors } from '../core/index.js';

/**
 * Errors of OnlineEvalPolicy resources, their CEL expressions (declared by the cel area) and the
 * scores read API.
 */
export const PolicyErrors = {
  ...defineErrors({
    POLICY_INVALID: {
      kind: 'invalid_argument',
      doc: 'The policy resource is malformed: `details` names each field (apiVersion, kind, metadata.name, the project label, sampling rate outside 0-1, a stage without evaluators, an alert metric no stage produces, a bad duration).',
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
  }),
  POLICY_CEL_INVALID: CelErrors.POLICY_CEL_INVALID,
};
