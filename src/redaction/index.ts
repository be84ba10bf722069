/**
 * @module redaction
 * Trace redaction (spec "Redaction rules"): key globs, RE2 value patterns, PII detectors and
 * secret detectors, compiled once from `traces.redaction` and applied to pushed and pulled traces
 * before storage and evaluation, and to connector error text (`Redactor.redactText`: the text
 * rules). Pure functions: no I/O, no clock, no logging.
 * Imports only `core` (and the `re2` package); must not import any other area. docs/redaction.md
 * describes the exact rules.
 */
export { RedactionErrors } from './error-codes.js';
export { DEFAULT_KEY_NAMES, DEFAULT_KEY_SUFFIXES } from './keys.js';
export { PII_DETECTORS, type PiiDetector } from './pii.js';
export {
  compileRedaction,
  MAX_DEPTH,
  type RedactionConfig,
  type Redactor,
  SLICE_CHARS,
} from './redactor.js';
export { SECRET_DETECTORS, type SecretDetector } from './secrets.js';
export { REDACTED } from './text.js';
