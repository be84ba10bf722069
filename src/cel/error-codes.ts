import { defineErrors } from '../core/index.js';

/**
 * Errors of CEL expressions. The code keeps its policy name: policies were its first users and
 * clients match on it; trace source overrides raise it too.
 */
export const CelErrors = defineErrors({
  POLICY_CEL_INVALID: {
    kind: 'invalid_argument',
    doc: "A CEL expression of the policy (`spec.selector`, `spec.sampling.always[i]`, `spec.stages[i].when`) or of a trace source's overrides does not compile, is not boolean, or may cost more than the budget of one evaluation on a trace of the assumed sizes; `details` names the field and the line and column in the expression.",
  },
});
