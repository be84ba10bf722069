/**
 * Expressions compiled once (limits, parse, type check, cost estimate, plan) and evaluated many
 * times. Each evaluation has a cost budget (cost.ts), and an apply refuses an expression whose
 * estimated cost exceeds it (estimate.ts). Evaluation never throws and its error texts never
 * quote trace content. docs/policies.md
 */
import { type CelError, isCelError, parse, plan } from '@bufbuild/cel';
import type { ErrorDetail } from '../core/index.js';
import { isTouchstoneError } from '../core/index.js';
import { ASSUMED } from './assumed-sizes.js';
import { Checker, type Expr, type Parsed } from './checker.js';
import { charge, deepCost, MAX_EVALUATION_COST, metered, OVER_BUDGET } from './cost.js';
import { show } from './declarations.js';
import { meteredEnvs } from './env.js';
import { CelErrors } from './error-codes.js';
import { estimateCost } from './estimate.js';
import { accessBindings, type Bindings, bindingsFor } from './facts.js';
import { meterMacros } from './macro-meter.js';
import { deepBracket, lineColumn, syntaxProblem } from './syntax.js';
import {
  type CelKind,
  type CheckKind,
  type CompiledAccessRule,
  type CompiledExpression,
  type EvaluationResult,
  MAX_BRACKET_DEPTH,
  MAX_EXPRESSION_LENGTH,
} from './types.js';
import { failed, safeMessage, toJsonValue } from './values.js';

const NO_SCORES: Readonly<Record<string, number>> = Object.freeze({});

function invalid(path: string, messages: string[]): never {
  const details: ErrorDetail[] = messages.map((message) => ({ path, message }));
  throw CelErrors.POLICY_CEL_INVALID(`${path}: ${messages[0]}`, { details });
}

export interface CompileOptions {
  /**
   * The expression comes from a stored resource, already checked when it was applied: its cost
   * estimate is not made again, so a stored policy keeps running (under the budget of every
   * evaluation) after a build whose estimate would refuse it.
   */
  stored?: boolean;
}

/**
 * Parses, type-checks and plans a CEL expression; throws POLICY_CEL_INVALID (details name `path`
 * and the line and column) when it does not compile, is not boolean (an `override` may give any
 * type), exceeds the limits, or (unless `stored`) may cost more than MAX_EVALUATION_COST on a
 * trace of the assumed sizes.
 */
export function compileExpression(
  source: string,
  kind: CelKind,
  path: string,
  options: CompileOptions = {},
): CompiledExpression {
  return guarded(path, () => compile(source, kind, path, options));
}

/**
 * Compiles an access rule (`auth.rules[i].when`) over `principal`, `action`, `resource` and `mcp`
 * with the limits, type check and cost estimate of every expression; throws POLICY_CEL_INVALID
 * naming `path` as compileExpression does.
 */
export function compileAccessRule(source: string, path: string): CompiledAccessRule {
  return guarded(path, () => {
    const planned = prepare(source, 'access', path, {});
    return { evaluate: (facts) => truth(planned, () => accessBindings(facts)) };
  });
}

function guarded<T>(path: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (isTouchstoneError(err)) throw err;
    return invalid(path, ['line 1, column 1: expression could not be compiled']);
  }
}

interface Planned {
  run: ReturnType<typeof plan>;
  /** Where an evaluation error happened (`line 1, column 5: `), or '' when unknown. */
  where: (err: CelError) => string;
}

/** Limits, parse, type check, cost estimate (unless `stored`) and plan. */
function prepare(source: string, kind: CheckKind, path: string, options: CompileOptions): Planned {
  if (typeof source !== 'string') invalid(path, ['line 1, column 1: expression must be a string']);
  if (source.length > MAX_EXPRESSION_LENGTH) {
    invalid(path, [
      `line 1, column 1: expression is longer than ${MAX_EXPRESSION_LENGTH} characters`,
    ]);
  }
  const deep = deepBracket(source);
  if (deep >= 0) {
    invalid(path, [
      `${lineColumn(source, deep)}: brackets nest more than ${MAX_BRACKET_DEPTH} deep`,
    ]);
  }
  let parsed: Parsed;
  try {
    parsed = parse(source);
  } catch (err) {
    return invalid(path, [syntaxProblem(source, err)]);
  }
  const positions = parsed.sourceInfo?.positions ?? {};
  const checker = new Checker(kind, positions);
  const type = checker.check(parsed.expr, new Map(), 0, 0);
  if (
    checker.problems.length === 0 &&
    kind !== 'override' &&
    type.k !== 'bool' &&
    type.k !== 'dyn'
  ) {
    const start = source.length - source.trimStart().length;
    checker.problems.push({
      offset: start,
      message: `expression must be a bool (true or false), not ${show(type)}`,
    });
  }
  if (checker.problems.length > 0) {
    const sorted = [...checker.problems].sort((a, b) => a.offset - b.offset).slice(0, 10);
    invalid(
      path,
      sorted.map((p) => `${lineColumn(source, p.offset)}: ${p.message}`),
    );
  }
  const located = meterMacros(parsed.expr, positions);
  if (options.stored !== true) refuseCostly(source, path, parsed.expr, located);
  const run = plan(meteredEnvs[kind], parsed);
  const where = (err: CelError): string => {
    const offset = err.exprId === undefined ? undefined : located[err.exprId.toString()];
    return offset === undefined ? '' : `${lineColumn(source, offset)}: `;
  };
  return { run, where };
}

function compile(
  source: string,
  kind: CelKind,
  path: string,
  options: CompileOptions,
): CompiledExpression {
  const planned = prepare(source, kind, path, options);
  const { run, where } = planned;
  return {
    source,
    kind,
    evaluate(facts, scores) {
      if (kind === 'override') {
        return failed('an override gives a value, not a bool: use evaluateValue');
      }
      return truth(planned, () =>
        bindingsFor(facts, kind === 'when' ? (scores ?? NO_SCORES) : undefined),
      );
    },
    evaluateValue(facts, text) {
      if (kind !== 'override') return failed(`a ${kind} gives a bool, not a value: use evaluate`);
      try {
        if (typeof text?.input !== 'string' || typeof text.output !== 'string') {
          return failed('input and output must be strings');
        }
        const bindings = bindingsFor(facts, undefined, text);
        const r = metered((b: Bindings) => {
          const value = run(b);
          if (isCelError(value)) return failed(where(value) + safeMessage(value));
          // Shared parts are converted once per use: `tools.map(t, attributes)` is a copy each.
          charge(deepCost(value));
          return toJsonValue(value, 0);
        }, bindings);
        return r === OVER_BUDGET ? COST_FAILURE : r;
      } catch {
        return failed('evaluation failed');
      }
    },
  };
}

/** A bool expression's value under the budget; never throws. */
function truth({ run, where }: Planned, bindings: () => Bindings): EvaluationResult {
  try {
    const value = metered(run, bindings());
    if (value === OVER_BUDGET) return COST_FAILURE;
    if (isCelError(value)) return failed(where(value) + safeMessage(value));
    if (typeof value === 'boolean') return { ok: true, value };
    return failed('expression did not evaluate to a bool');
  } catch {
    return failed('evaluation failed');
  }
}

const COST_FAILURE = Object.freeze({
  ok: false,
  error: `evaluation cost more than the budget of ${MAX_EVALUATION_COST} units`,
  reason: 'cost',
} as const);

const integer = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

/** Refuses an expression whose estimated cost exceeds the budget, naming where it spends most. */
function refuseCostly(
  source: string,
  path: string,
  expr: Expr,
  positions: Readonly<Record<string, number>>,
): void {
  const { cost, worst } = estimateCost(expr);
  if (cost <= MAX_EVALUATION_COST) return;
  const shown = cost >= 1e15 ? 'more than 10^15' : integer.format(cost);
  invalid(path, [
    `${lineColumn(source, positions[worst.toString()] ?? 0)}: the expression may cost ${shown} ` +
      `units per evaluation, more than the budget of ${integer.format(MAX_EVALUATION_COST)}, ` +
      `on a trace of ${integer.format(ASSUMED.listItems)} tool calls, names of ` +
      `${integer.format(ASSUMED.nameChars)} characters and attribute values of ` +
      `${integer.format(ASSUMED.attributeChars)}; most of it here (macros over lists of ` +
      'the trace multiply their sizes when nested, and text functions pay by length)',
  ]);
}
