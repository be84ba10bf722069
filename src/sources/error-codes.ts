import { defineErrors } from '../core/index.js';

/** Errors of TraceSource resources and their operations (pull failures are status, not errors). */
export const SourceErrors = defineErrors({
  SOURCE_INVALID: {
    kind: 'invalid_argument',
    doc: 'The source resource is malformed: `details` names each field (connector, endpoint, locations, durations out of range, override targets, a CEL override that does not compile, scheduled-mode fields).',
  },
  SOURCE_VARIANT_REFUSED: {
    kind: 'invalid_argument',
    doc: 'The variant `azureml` (Azure Machine Learning) is refused; Touchstone reads open-source MLflow, Databricks and SageMaker.',
  },
  SOURCE_LOCATIONS_MIXED: {
    kind: 'invalid_argument',
    doc: 'A databricks source names both experiment ids and catalog schemas; make two sources.',
  },
  SOURCE_UNSUPPORTED: {
    kind: 'invalid_argument',
    doc: 'A location form the variant cannot read (experiment names or table prefixes on databricks); use numeric experiment ids or `catalog.schema`.',
  },
  SOURCE_ENDPOINT_REFUSED: {
    kind: 'invalid_argument',
    doc: 'The endpoint breaks the endpoint rules: not https to a public name (and not in `sources.allow_hosts`), resolving to a private or metadata address, or plain http for a databricks service principal.',
  },
  SOURCE_NOT_SUPPORTED_YET: {
    kind: 'unimplemented',
    doc: 'The connector or variant is valid but not built in this version (see docs/sources.md for what is); the resource was checked and not stored.',
  },
  SOURCE_NOT_FOUND: {
    kind: 'not_found',
    doc: 'No source with that name in the project.',
  },
  SOURCE_POLICY_NOT_FOUND: {
    kind: 'not_found',
    doc: '`spec.policies` names a policy that does not exist in the project; apply the policy first.',
  },
});
