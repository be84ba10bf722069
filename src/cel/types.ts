/**
 * The vocabulary of the CEL area: the limits of an expression, the facts it sees, the kinds of
 * expression and what compiling and evaluating give. docs/policies.md
 */
import type { AttributeValue } from '../core/index.js';

/** Longest expression accepted, in UTF-16 code units. */
export const MAX_EXPRESSION_LENGTH = 4096;
/** Deepest nesting of (), [] and {}; checked before parsing, whose time grows with it. */
export const MAX_BRACKET_DEPTH = 32;
/** Deepest syntax tree (long `+` chains, field paths); bounds recursion in check and evaluation. */
export const MAX_TREE_DEPTH = 100;
/** Most macros (`all`, `exists`, `exists_one`, `map`, `filter`) nested in one another. */
export const MAX_MACRO_NESTING = 2;

/** CEL's integer ranges. */
export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;
export const UINT64_MAX = 2n ** 64n - 1n;

/** The variables a selector sees (a `when` also sees `scores`). Treated as immutable. */
export interface TraceFacts {
  /** Resource `service.name` of the root span. */
  readonly service: string;
  /** Name of the root span. */
  readonly name: string;
  /** Seconds from the first start to the last end. */
  readonly duration: number;
  /** True when any span failed. */
  readonly error: boolean;
  /** Number of trajectory steps. */
  readonly steps: number;
  /** Names of the tool steps, in order, repeats kept. */
  readonly tools: readonly string[];
  /** Distinct model names of the llm steps, in order of first use. */
  readonly models: readonly string[];
  /** The root span's attributes. */
  readonly attributes: Readonly<Record<string, AttributeValue>>;
  /** The root span's resource attributes. */
  readonly resource: Readonly<Record<string, AttributeValue>>;
  readonly labels: Readonly<Record<string, string>>;
  readonly project: string;
  /** The trace source's name; empty for pushed traces. */
  readonly source: string;
}

/**
 * `selector` for `spec.selector` and `spec.sampling.always[i]`; `when` for stages (adds `scores`);
 * `override` for a trace source's overrides (adds `input` and `output`, and may give any value).
 */
export type CelKind = 'selector' | 'when' | 'override';

/** What the type check and the environments know: the trace kinds, and `access` for `auth.rules`. */
export type CheckKind = CelKind | 'access';

/**
 * The variables an access rule (`auth.rules[i].when`) sees: plain JSON-like values, converted as
 * attribute values are. Every key a rule may read is present (empty when it does not apply), so a
 * rule reads `resource.webhook.name` on any call without a missing-key error.
 */
export interface AccessFacts {
  readonly principal: Readonly<Record<string, unknown>>;
  readonly action: string;
  readonly resource: Readonly<Record<string, unknown>>;
  readonly mcp: Readonly<Record<string, unknown>>;
}

/** A compiled access rule: true or false, or `ok: false` when evaluation failed. Never throws. */
export interface CompiledAccessRule {
  evaluate(facts: AccessFacts): EvaluationResult;
}

/**
 * Why an evaluation failed: `cost` when it ran out of its budget (MAX_EVALUATION_COST), `error`
 * otherwise (a missing key, a type mismatch, a result of the wrong type).
 */
export type FailureReason = 'cost' | 'error';

export type EvaluationResult =
  | { ok: true; value: boolean }
  | { ok: false; error: string; reason: FailureReason };

/** What an `override` reads besides the facts: the record's input and output as text. */
export interface OverrideInputs {
  input: string;
  output: string;
}

/** An `override`'s value as plain JSON; see `evaluateValue`. */
export type ValueResult =
  | { ok: true; value: unknown }
  | { ok: false; error: string; reason: FailureReason };

export interface CompiledExpression {
  readonly source: string;
  readonly kind: CelKind;
  /**
   * True or false, or `ok: false` when evaluation failed (a missing key, a type mismatch, a
   * non-bool result; `reason: 'cost'` when it ran out of its budget). `scores` maps metric
   * names to numbers (pass/fail as 1/0); only a `when` reads it. Never throws; `error` never
   * quotes trace content. On an `override`, always `ok: false` (use `evaluateValue`).
   */
  evaluate(facts: TraceFacts, scores?: Readonly<Record<string, number>>): EvaluationResult;
  /**
   * On a compiled 'override' expression: the value as plain JSON (string, number, bool, null,
   * list, map with string keys), or why not. Never throws; `error` never quotes trace content.
   * CEL `int`/`uint` become numbers, or decimal strings outside ±(2^53 − 1); a `double` that is
   * NaN or infinite becomes "NaN", "Infinity" or "-Infinity"; map keys that are not strings are
   * stringified (`1`, `true`); bytes become base64, timestamps RFC 3339 text (`2024-05-01T12:00:00Z`),
   * durations seconds text (`1.500s`), types their names (`int`). On a `selector` or `when`,
   * always `ok: false` (use `evaluate`).
   */
  evaluateValue(facts: TraceFacts, text: OverrideInputs): ValueResult;
}
