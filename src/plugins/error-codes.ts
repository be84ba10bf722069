import { defineErrors } from '../core/index.js';

export const PluginErrors = defineErrors({
  PLUGIN_HASH_MISMATCH: {
    kind: 'failed_precondition',
    doc: 'A plug-in file (index, manifest or module) does not have the sha256 that pins it; the message names the file and both hashes. Nothing from it runs.',
  },
  PLUGIN_FILE_UNREADABLE: {
    kind: 'failed_precondition',
    doc: 'A file of the plug-in chain (index, its pin file, a manifest or a module) cannot be read; the message names it.',
  },
  PLUGIN_INDEX_INVALID: {
    kind: 'invalid_argument',
    doc: 'The plug-in index does not fit its schema (`kind: EvaluatorPluginIndex`, `entries[]`); `details` names each field.',
  },
  PLUGIN_MANIFEST_INVALID: {
    kind: 'invalid_argument',
    doc: 'A plug-in manifest does not fit its schema (`kind: EvaluatorPlugin`, `spec.abi: wasi-json/v1`, module, evaluators, limits); `details` names each field.',
  },
  PLUGIN_MODULE_REFUSED: {
    kind: 'invalid_argument',
    doc: 'A plug-in module breaks the wasi-json v1 module rules (core module, size cap, only allowed WASI imports, `_start` and `memory` exports, one defined memory under the cap, no start section); the message names the rule.',
  },
  PLUGIN_EVALUATOR_CONFLICT: {
    kind: 'invalid_argument',
    doc: 'Two plug-ins, or a plug-in and a built-in evaluator, declare the same evaluator name; rename one.',
  },
  PLUGIN_FAILED: {
    kind: 'internal',
    doc: "A plug-in evaluation ended in error (exit code, trap, deadline, output cap, malformed or undeclared output); it is the result's reason, never a zero score.",
  },
});
