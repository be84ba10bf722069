import { CelErrors } from '../cel/index.js';
import { defineErrors } from '../core/index.js';

/** Errors of GuardPolicy resources and of the prompt-guard webhook's input. */
export const GuardErrors = {
  ...defineErrors({
    GUARD_POLICY_INVALID: {
      kind: 'invalid_argument',
      doc: 'The guard policy resource is malformed: `details` names each field (apiVersion, kind, metadata.name, a check of an unknown type, a PII or secret detector that does not exist, a deny-list pattern that is not RE2, a timeout that is not a duration or exceeds the decision deadline, a judge that is not configured, an empty check list).',
    },
    GUARD_POLICY_NOT_FOUND: {
      kind: 'not_found',
      doc: 'No guard policy with that name in the project.',
    },
    GUARD_REQUEST_INVALID: {
      kind: 'invalid_argument',
      doc: "A prompt-guard webhook call is not the gateway's shape (`body.messages[]` of role/content strings on `/request`, `body.choices[].message` on `/response`, at least one message or choice). The webhook still answers 200 with a reject the gateway obeys; `details` names the field.",
    },
  }),
  POLICY_CEL_INVALID: CelErrors.POLICY_CEL_INVALID,
};
