import { defineErrors } from '../core/index.js';

/** Errors of offline runs: the run spec, the run operations (get, cancel, delete, results). */
export const RunErrors = defineErrors({
  RUN_SPEC_INVALID: {
    kind: 'invalid_argument',
    doc: 'The run spec is malformed: `details` names every bad field at once (YAML or JSON syntax with line and column, name, dataset, evaluators and params, judge, trials, a gate that does not parse or names a metric no evaluator produces, a `pass^k` gate with k above `trials`, an inline record).',
  },
  RUN_NOT_FOUND: {
    kind: 'not_found',
    doc: 'No run with that id in the project (or the caller may not see it).',
  },
  RUN_NOT_FINISHED: {
    kind: 'failed_precondition',
    doc: 'The run cannot be deleted while it is pending, running or leased by an executor: cancel it (`:cancel`) and delete it once it is final.',
  },
});
