import { defineErrors } from '../core/index.js';

export const RedactionErrors = defineErrors({
  REDACTION_RULE_INVALID: {
    kind: 'invalid_argument',
    doc: 'A `traces.redaction` rule (key glob, RE2 pattern or PII detector name) is invalid, so the server does not start; the message and `details` name each rule by its config path, never by its contents.',
  },
});
