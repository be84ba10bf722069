/**
 * @module cel
 * The CEL engine of policies, trace sources and access rules (`auth.rules`): the facts an
 * expression sees of a trace (`traceFacts`), and expressions compiled once (parse, type check,
 * cost estimate, plan) and evaluated many times under a cost budget, never throwing and never
 * quoting trace content.
 * Imports core only.
 */
export { type CompileOptions, compileAccessRule, compileExpression } from './compile.js';
export { CelErrors } from './error-codes.js';
export { type TraceFactsSummary, traceFacts } from './facts.js';
export type {
  AccessFacts,
  CelKind,
  CompiledAccessRule,
  CompiledExpression,
  EvaluationResult,
  FailureReason,
  OverrideInputs,
  TraceFacts,
  ValueResult,
} from './types.js';
