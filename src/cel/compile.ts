/**
 * The CEL layer of online policies: the facts a selector sees, and expressions compiled once
 * (parse, type check, plan) and evaluated many times. @bufbuild/cel parses and evaluates but its
 * checker covers only constants and identifiers, so the type check here is our own, driven by the
 * library's overload table; it is gradual (`dyn` passes) so attribute values are checked at run
 * time. Each evaluation has a cost budget (cel-cost.ts), and an apply refuses an expression
 * whose estimated cost exceeds it (cel-estimate.ts). Evaluation never throws and its error texts
 * never quote trace content. docs/policies.md
 */
import {
  type CelEnv,
  type CelError,
  type CelInput,
  CelScalar,
  type CelType,
  type CelValue,
  celEnv,
  celList,
  celMap,
  isCelError,
  isCelList,
  isCelMap,
  isCelType,
  isCelUint,
  listType,
  mapType,
  parse,
  plan,
} from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import { toJson } from '@bufbuild/protobuf';
import { isReflectMessage } from '@bufbuild/protobuf/reflect';
import RE2 from 're2';
import type {
  AttributeValue,
  ErrorDetail,
  EvalRecord,
  TraceRoot,
  TraceSummary,
} from '../core/index.js';
import { isTouchstoneError } from '../core/index.js';
import {
  BOUNDED_FUNCS,
  charge,
  deepCost,
  MAX_EVALUATION_COST,
  metered,
  meteredEnv,
  meterMacros,
  OVER_BUDGET,
} from './cost.js';
import { CelErrors } from './error-codes.js';
import { ASSUMED, estimateCost } from './estimate.js';

/** Longest expression accepted, in UTF-16 code units. */
export const MAX_EXPRESSION_LENGTH = 4096;
/** Deepest nesting of (), [] and {}; checked before parsing, whose time grows with it. */
export const MAX_BRACKET_DEPTH = 32;
/** Deepest syntax tree (long `+` chains, field paths); bounds recursion in check and evaluation. */
export const MAX_TREE_DEPTH = 100;
/** Most macros (`all`, `exists`, `exists_one`, `map`, `filter`) nested in one another. */
export const MAX_MACRO_NESTING = 2;

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

/** What `traceFacts` reads from a stored trace. */
export type TraceFactsSummary = Pick<
  TraceSummary,
  'service' | 'name' | 'durationMs' | 'error' | 'steps' | 'labels'
> & { readonly project: string; readonly source: string };

export function traceFacts(
  trace: TraceFactsSummary,
  record: EvalRecord,
  root?: TraceRoot,
): TraceFacts {
  const tools: string[] = [];
  const models = new Set<string>();
  for (const step of record.trajectory ?? []) {
    if (step.type === 'tool') tools.push(step.name);
    else if (step.type === 'llm' && step.model !== undefined && step.model !== '') {
      models.add(step.model);
    }
  }
  const facts: TraceFacts = {
    service: trace.service,
    name: trace.name,
    duration: trace.durationMs / 1000,
    error: trace.error,
    steps: trace.steps,
    tools,
    models: [...models],
    attributes: root?.attributes ?? {},
    resource: root?.resource ?? {},
    labels: trace.labels,
    project: trace.project,
    source: trace.source,
  };
  // Carried by the facts rather than kept in a WeakMap: one per trace, and WeakMap entries for
  // short-lived keys cost more in garbage collection than the evaluations they serve.
  Object.defineProperty(facts, BINDINGS, { value: new FactBindings(facts) });
  return Object.freeze(facts);
}

/**
 * `selector` for `spec.selector` and `spec.sampling.always[i]`; `when` for stages (adds `scores`);
 * `override` for a trace source's overrides (adds `input` and `output`, and may give any value).
 */
export type CelKind = 'selector' | 'when' | 'override';

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

// ---------------------------------------------------------------------------------------------
// Environment

const { BOOL, INT, DOUBLE, STRING, DYN } = CelScalar;

const SELECTOR_VARIABLES = {
  service: STRING,
  name: STRING,
  duration: DOUBLE,
  error: BOOL,
  steps: INT,
  tools: listType(STRING),
  models: listType(STRING),
  attributes: mapType(STRING, DYN),
  resource: mapType(STRING, DYN),
  labels: mapType(STRING, STRING),
  project: STRING,
  source: STRING,
} as const;

const WHEN_VARIABLES = { ...SELECTOR_VARIABLES, scores: mapType(STRING, DOUBLE) } as const;

const OVERRIDE_VARIABLES = { ...SELECTOR_VARIABLES, input: STRING, output: STRING } as const;

const REGEX_CACHE_SIZE = 256;
const regexCache = new Map<string, RE2>();

/** CEL's `matches` on RE2 (linear time: a pattern cannot stall the engine), compiled once. */
function compileRegex(pattern: string): RE2 {
  let re = regexCache.get(pattern);
  if (re === undefined) {
    try {
      re = new RE2(pattern, 'u');
    } catch {
      // The engine's message quotes the pattern, which may come from trace content.
      throw new Error('invalid regular expression');
    }
    if (regexCache.size >= REGEX_CACHE_SIZE) regexCache.clear();
    regexCache.set(pattern, re);
  }
  return re;
}

const re2 = { compile: (pattern: string) => compileRegex(pattern) };

const envs: Record<CelKind, CelEnv> = {
  selector: celEnv({ variables: SELECTOR_VARIABLES, funcs: [...strings, ...BOUNDED_FUNCS], re2 }),
  when: celEnv({ variables: WHEN_VARIABLES, funcs: [...strings, ...BOUNDED_FUNCS], re2 }),
  override: celEnv({ variables: OVERRIDE_VARIABLES, funcs: [...strings, ...BOUNDED_FUNCS], re2 }),
};

/** What expressions are planned with: the same environments, every function call charged. */
const meteredEnvs: Record<CelKind, CelEnv> = {
  selector: meteredEnv(envs.selector),
  when: meteredEnv(envs.when),
  override: meteredEnv(envs.override),
};

// ---------------------------------------------------------------------------------------------
// Types for the check

type Ty =
  | {
      readonly k:
        | 'bool'
        | 'int'
        | 'uint'
        | 'double'
        | 'string'
        | 'bytes'
        | 'null'
        | 'dyn'
        | 'type'
        | 'timestamp'
        | 'duration';
    }
  | { readonly k: 'list'; readonly e: Ty }
  | { readonly k: 'map'; readonly key: Ty; readonly v: Ty };

const T = {
  bool: { k: 'bool' },
  int: { k: 'int' },
  uint: { k: 'uint' },
  double: { k: 'double' },
  string: { k: 'string' },
  bytes: { k: 'bytes' },
  null: { k: 'null' },
  dyn: { k: 'dyn' },
  type: { k: 'type' },
} as const satisfies Record<string, Ty>;

function fromCel(t: CelType): Ty {
  switch (t.kind) {
    case 'list':
      return { k: 'list', e: fromCel(t.element) };
    case 'map':
      return { k: 'map', key: fromCel(t.key), v: fromCel(t.value) };
    case 'object':
      if (t.name === 'google.protobuf.Timestamp') return { k: 'timestamp' };
      if (t.name === 'google.protobuf.Duration') return { k: 'duration' };
      return T.dyn;
    default:
      switch (t.name) {
        case 'null_type':
          return T.null;
        case 'bool':
        case 'int':
        case 'uint':
        case 'double':
        case 'string':
        case 'bytes':
        case 'dyn':
        case 'type':
          return T[t.name];
        default:
          return T.dyn;
      }
  }
}

function show(t: Ty): string {
  if (t.k === 'list') return `list(${show(t.e)})`;
  if (t.k === 'map') return `map(${show(t.key)}, ${show(t.v)})`;
  return t.k === 'null' ? 'null_type' : t.k;
}

function same(a: Ty, b: Ty): boolean {
  if (a.k !== b.k) return false;
  if (a.k === 'list' && b.k === 'list') return same(a.e, b.e);
  if (a.k === 'map' && b.k === 'map') return same(a.key, b.key) && same(a.v, b.v);
  return true;
}

function join(a: Ty, b: Ty): Ty {
  return same(a, b) ? a : T.dyn;
}

/** Gradual: `dyn` on either side is accepted and checked at run time. */
function assignable(param: Ty, arg: Ty): boolean {
  if (param.k === 'dyn' || arg.k === 'dyn') return true;
  if (param.k === 'list' && arg.k === 'list') return assignable(param.e, arg.e);
  if (param.k === 'map' && arg.k === 'map') {
    return assignable(param.key, arg.key) && assignable(param.v, arg.v);
  }
  return param.k === arg.k;
}

const NUMERIC = new Set<Ty['k']>(['int', 'uint', 'double']);

/** CEL equality is heterogeneous across numbers (`duration == 3` holds for 3.0). */
function comparable(a: Ty, b: Ty): boolean {
  if (a.k === 'dyn' || b.k === 'dyn' || a.k === 'null' || b.k === 'null') return true;
  if (NUMERIC.has(a.k) && NUMERIC.has(b.k)) return true;
  return a.k === b.k;
}

interface Overload {
  target: Ty | undefined;
  args: Ty[];
  result: Ty;
}

/** The library's functions and methods by name (operators included), as the checker reads them. */
const OVERLOADS = (() => {
  const out = new Map<string, Overload[]>();
  for (const f of envs.when.funcs) {
    const list = out.get(f.name) ?? [];
    list.push({
      target: f.target === undefined ? undefined : fromCel(f.target),
      args: f.arguments.map(fromCel),
      result: fromCel(f.result),
    });
    out.set(f.name, list);
  }
  return out;
})();

const VARIABLE_TYPES: Record<CelKind, ReadonlyMap<string, Ty>> = {
  selector: new Map(Object.entries(SELECTOR_VARIABLES).map(([k, t]) => [k, fromCel(t)])),
  when: new Map(Object.entries(WHEN_VARIABLES).map(([k, t]) => [k, fromCel(t)])),
  override: new Map(Object.entries(OVERRIDE_VARIABLES).map(([k, t]) => [k, fromCel(t)])),
};

/** Identifiers that name types (`type(x) == string`). */
const TYPE_NAMES = new Set([
  'bool',
  'int',
  'uint',
  'double',
  'string',
  'bytes',
  'list',
  'map',
  'null_type',
  'type',
  'dyn',
]);

const MACROS = new Set(['has', 'all', 'exists', 'exists_one', 'map', 'filter']);

const OPERATORS: Record<string, string> = {
  '_&&_': '&&',
  '_||_': '||',
  '!_': '!',
  '-_': '-',
  '_==_': '==',
  '_!=_': '!=',
  '_<_': '<',
  '_<=_': '<=',
  '_>_': '>',
  '_>=_': '>=',
  '_+_': '+',
  '_-_': '-',
  '_*_': '*',
  '_/_': '/',
  '_%_': '%',
  '_[_]': '[]',
  '_?_:_': '? :',
  '@in': 'in',
};

// ---------------------------------------------------------------------------------------------
// Check

type Parsed = ReturnType<typeof parse>;
type Expr = Parsed['expr'];
type ExprKind = Expr['exprKind'];
type Node<C extends NonNullable<ExprKind['case']>> = Extract<ExprKind, { case: C }>['value'];

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;

interface Problem {
  offset: number;
  message: string;
}

class Checker {
  readonly problems: Problem[] = [];
  private tooDeep = false;

  constructor(
    private readonly kind: CelKind,
    private readonly positions: Readonly<Record<string, number>>,
  ) {}

  private fail(e: Expr, message: string): Ty {
    this.problems.push({ offset: this.positions[e.id.toString()] ?? 0, message });
    return T.dyn;
  }

  check(e: Expr, scope: ReadonlyMap<string, Ty>, depth: number, macros: number): Ty {
    if (depth > MAX_TREE_DEPTH) {
      if (this.tooDeep) return T.dyn;
      this.tooDeep = true;
      return this.fail(e, `expression nests more than ${MAX_TREE_DEPTH} levels`);
    }
    const d = depth + 1;
    const kind = e.exprKind;
    switch (kind.case) {
      case 'constExpr':
        return this.constant(e, kind.value);
      case 'identExpr':
        return this.ident(e, kind.value.name, scope);
      case 'selectExpr':
        return this.select(e, kind.value, scope, d, macros);
      case 'callExpr':
        return this.call(e, kind.value, scope, d, macros);
      case 'listExpr': {
        if (kind.value.optionalIndices.length > 0)
          return this.fail(e, 'optional syntax is not supported');
        let elem: Ty | undefined;
        for (const el of kind.value.elements) {
          const t = this.check(el, scope, d, macros);
          elem = elem === undefined ? t : join(elem, t);
        }
        return { k: 'list', e: elem ?? T.dyn };
      }
      case 'structExpr':
        return this.struct(e, kind.value, scope, d, macros);
      case 'comprehensionExpr':
        return this.comprehension(e, kind.value, scope, d, macros);
      default:
        return this.fail(e, 'unsupported expression');
    }
  }

  private constant(e: Expr, c: Node<'constExpr'>): Ty {
    const v = c.constantKind;
    switch (v.case) {
      case 'boolValue':
        return T.bool;
      case 'int64Value':
        if (v.value < INT64_MIN || v.value > INT64_MAX)
          return this.fail(e, 'integer literal out of range');
        return T.int;
      case 'uint64Value':
        if (v.value < 0n || v.value > UINT64_MAX)
          return this.fail(e, 'unsigned literal out of range');
        return T.uint;
      case 'doubleValue':
        if (!Number.isFinite(v.value)) return this.fail(e, 'number literal out of range');
        return T.double;
      case 'stringValue':
        return T.string;
      case 'bytesValue':
        return T.bytes;
      case 'nullValue':
        return T.null;
      default:
        return this.fail(e, 'unsupported literal');
    }
  }

  private ident(e: Expr, raw: string, scope: ReadonlyMap<string, Ty>): Ty {
    const name = raw.startsWith('.') ? raw.slice(1) : raw;
    const t = scope.get(name) ?? VARIABLE_TYPES[this.kind].get(name);
    if (t !== undefined) return t;
    if (TYPE_NAMES.has(name)) return T.type;
    if (name === 'scores' && this.kind !== 'when') {
      return this.fail(e, "undeclared reference to 'scores' (only a stage's `when` sees scores)");
    }
    if ((name === 'input' || name === 'output') && this.kind !== 'override') {
      return this.fail(
        e,
        `undeclared reference to '${name}' (only a trace source's overrides see input and output)`,
      );
    }
    const known = [...scope.keys(), ...VARIABLE_TYPES[this.kind].keys()].filter(
      (k) => !k.startsWith('@'),
    );
    const hint = closest(name, known);
    return this.fail(
      e,
      `undeclared reference to '${name}'${hint === undefined ? '' : ` (did you mean '${hint}'?)`}`,
    );
  }

  private select(
    e: Expr,
    s: Node<'selectExpr'>,
    scope: ReadonlyMap<string, Ty>,
    d: number,
    macros: number,
  ): Ty {
    if (s.operand === undefined) return this.fail(e, 'malformed field selection');
    const t = this.check(s.operand, scope, d, macros);
    if (t.k === 'dyn') return s.testOnly ? T.bool : T.dyn;
    if (t.k === 'map' && (t.key.k === 'string' || t.key.k === 'dyn')) {
      return s.testOnly ? T.bool : t.v;
    }
    return this.fail(e, `type '${show(t)}' has no field '${s.field}'`);
  }

  private struct(
    e: Expr,
    s: Node<'structExpr'>,
    scope: ReadonlyMap<string, Ty>,
    d: number,
    macros: number,
  ): Ty {
    if (s.messageName !== '') return this.fail(e, `message '${s.messageName}' is not supported`);
    let key: Ty | undefined;
    let value: Ty | undefined;
    for (const entry of s.entries) {
      if (entry.optionalEntry) return this.fail(e, 'optional syntax is not supported');
      if (entry.keyKind.case !== 'mapKey' || entry.value === undefined) {
        return this.fail(e, 'malformed map literal');
      }
      const kt = this.check(entry.keyKind.value, scope, d, macros);
      if (!['string', 'int', 'uint', 'bool', 'dyn'].includes(kt.k)) {
        this.fail(entry.keyKind.value, `type '${show(kt)}' cannot be a map key`);
      }
      const vt = this.check(entry.value, scope, d, macros);
      key = key === undefined ? kt : join(key, kt);
      value = value === undefined ? vt : join(value, vt);
    }
    return { k: 'map', key: key ?? T.dyn, v: value ?? T.dyn };
  }

  private comprehension(
    e: Expr,
    c: Node<'comprehensionExpr'>,
    scope: ReadonlyMap<string, Ty>,
    d: number,
    macros: number,
  ): Ty {
    const { iterRange, accuInit, loopCondition, loopStep, result } = c;
    if (!iterRange || !accuInit || !loopCondition || !loopStep || !result) {
      return this.fail(e, 'malformed macro');
    }
    if (macros + 1 > MAX_MACRO_NESTING) {
      return this.fail(e, `macros nest more than ${MAX_MACRO_NESTING} deep`);
    }
    const range = this.check(iterRange, scope, d, macros);
    let first: Ty = T.dyn;
    let second: Ty = T.dyn;
    if (range.k === 'list') {
      first = c.iterVar2 === '' ? range.e : T.int;
      second = range.e;
    } else if (range.k === 'map') {
      first = range.key;
      second = range.v;
    } else if (range.k !== 'dyn') {
      return this.fail(iterRange, `type '${show(range)}' cannot be iterated`);
    }
    const accu = this.check(accuInit, scope, d, macros + 1);
    const inner = new Map(scope).set(c.iterVar, first).set(c.accuVar, accu);
    if (c.iterVar2 !== '') inner.set(c.iterVar2, second);
    this.check(loopCondition, inner, d, macros + 1);
    this.check(loopStep, inner, d, macros + 1);
    return this.check(result, new Map(scope).set(c.accuVar, accu), d, macros + 1);
  }

  private call(
    e: Expr,
    c: Node<'callExpr'>,
    scope: ReadonlyMap<string, Ty>,
    d: number,
    macros: number,
  ): Ty {
    const fn = c.function;
    const overloads = OVERLOADS.get(fn);
    if (overloads === undefined && MACROS.has(fn)) {
      // A macro with the wrong shape: its arguments would only add noise (an unbound variable).
      return this.fail(
        e,
        fn === 'has'
          ? 'has() takes a field selection, such as has(labels.env)'
          : `${fn}() takes a variable and a condition, such as tools.exists(t, t == "search")`,
      );
    }
    const target = c.target === undefined ? undefined : this.check(c.target, scope, d, macros);
    const args = c.args.map((a) => this.check(a, scope, d, macros));
    const op = OPERATORS[fn];
    const mixed =
      args.some((t) => t.k === 'double') && args.some((t) => NUMERIC.has(t.k) && t.k !== 'double');
    const mismatch = () =>
      this.fail(
        e,
        `no matching overload for '${op ?? fn}' applied to ` +
          `'${target === undefined ? '' : `${show(target)}.`}(${args.map(show).join(', ')})'` +
          (mixed ? ' (arithmetic needs one number type: write 1.0, or use double() or int())' : ''),
      );
    switch (fn) {
      case '_&&_':
      case '_||_':
        return args.every((t) => t.k === 'bool' || t.k === 'dyn') ? T.bool : mismatch();
      case '@not_strictly_false':
        return T.bool;
      case '_==_':
      case '_!=_':
        return args.length === 2 && comparable(args[0]!, args[1]!) ? T.bool : mismatch();
      case '_?_:_': {
        const [cond, a, b] = args;
        if (cond === undefined || a === undefined || b === undefined) return mismatch();
        if (cond.k !== 'bool' && cond.k !== 'dyn') return mismatch();
        return join(a, b);
      }
      case '_[_]': {
        const [container, index] = args;
        if (container === undefined || index === undefined) return mismatch();
        if (container.k === 'dyn') return T.dyn;
        if (container.k === 'list' && ['int', 'uint', 'dyn'].includes(index.k)) return container.e;
        if (container.k === 'map' && assignable(container.key, index)) return container.v;
        return mismatch();
      }
    }
    if (overloads === undefined) {
      return this.fail(e, `undeclared reference to function '${fn}'`);
    }
    const fits = overloads.filter(
      (o) =>
        (o.target === undefined) === (target === undefined) &&
        (o.target === undefined || target === undefined || assignable(o.target, target)) &&
        o.args.length === args.length &&
        o.args.every((p, i) => assignable(p, args[i]!)),
    );
    if (fits.length === 0) return mismatch();
    if (fn === 'matches') this.pattern(c.args[0]);
    return fits.map((o) => o.result).reduce(join);
  }

  /** A literal pattern is compiled now, so a typo is reported with its position. */
  private pattern(arg: Expr | undefined): void {
    if (arg?.exprKind.case !== 'constExpr') return;
    const v = arg.exprKind.value.constantKind;
    if (v.case !== 'stringValue') return;
    try {
      compileRegex(v.value);
    } catch {
      this.fail(arg, 'invalid regular expression (RE2 syntax)');
    }
  }
}

/** The nearest name by edit distance, when close enough to be a typo. */
function closest(name: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.min(3, Math.floor(name.length / 2) + 1);
  for (const c of candidates) {
    const dist = editDistance(name, c);
    if (dist < bestDistance) {
      best = c;
      bestDistance = dist;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 3 || a.length > 64 || b.length > 64) return 99;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      cur.push(Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + cost));
    }
    prev = cur;
  }
  return prev[b.length]!;
}

// ---------------------------------------------------------------------------------------------
// Compile

/** `line L, column C` of an offset; the parser places operators on the blank before them. */
function lineColumn(source: string, offset: number): string {
  let line = 1;
  let lineStart = 0;
  let end = Math.min(Math.max(offset, 0), source.length);
  while (end < source.length && /\s/.test(source[end]!)) end++;
  if (end === source.length) end = Math.min(Math.max(offset, 0), source.length);
  for (let i = 0; i < end; i++) {
    if (source.charCodeAt(i) === 10) {
      line++;
      lineStart = i + 1;
    }
  }
  return `line ${line}, column ${end - lineStart + 1}`;
}

/**
 * The offset where bracket nesting first exceeds the limit, or -1. Skips string literals and
 * comments roughly as CEL lexes them; an unterminated string ends the scan (the parser reports it).
 */
function deepBracket(source: string): number {
  let depth = 0;
  let i = 0;
  const n = source.length;
  while (i < n) {
    const ch = source[i]!;
    if (ch === '/' && source[i + 1] === '/') {
      const eol = source.indexOf('\n', i);
      if (eol < 0) return -1;
      i = eol + 1;
    } else if (ch === '"' || ch === "'") {
      const raw = i > 0 && (source[i - 1] === 'r' || source[i - 1] === 'R');
      const quote = source.startsWith(ch.repeat(3), i) ? ch.repeat(3) : ch;
      let j = i + quote.length;
      while (j < n && !source.startsWith(quote, j)) {
        if (!raw && source[j] === '\\') j++;
        if (quote.length === 1 && source[j] === '\n') return -1;
        j++;
      }
      if (j >= n) return -1;
      i = j + quote.length;
    } else {
      if (ch === '(' || ch === '[' || ch === '{') {
        if (++depth > MAX_BRACKET_DEPTH) return i;
      } else if (ch === ')' || ch === ']' || ch === '}') {
        depth--;
      }
      i++;
    }
  }
  return -1;
}

interface ParseFailure {
  message?: unknown;
  location?: { start?: { offset?: number } };
}

function syntaxProblem(source: string, err: unknown): string {
  if (err instanceof RangeError) return 'line 1, column 1: expression nests too deeply';
  const e = (typeof err === 'object' && err !== null ? err : {}) as ParseFailure;
  const offset = e.location?.start?.offset ?? 0;
  const what = unexpectedToken(typeof e.message === 'string' ? e.message : '');
  return `${lineColumn(source, offset)}: syntax error${what}`;
}

/**
 * ` (unexpected X)` from the parser's "… found X but expecting …", X cut to 40 characters; found
 * with indexOf, since a lazy regex over the message rescans it from every `found`.
 */
function unexpectedToken(message: string): string {
  const start = message.indexOf('found ');
  if (start < 0) return '';
  const end = message.indexOf(' but expecting', start + 6);
  if (end <= start + 6) return '';
  return ` (unexpected ${message.slice(start + 6, end).slice(0, 40)})`;
}

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
  try {
    return compile(source, kind, path, options);
  } catch (err) {
    if (isTouchstoneError(err)) throw err;
    return invalid(path, ['line 1, column 1: expression could not be compiled']);
  }
}

function compile(
  source: string,
  kind: CelKind,
  path: string,
  options: CompileOptions,
): CompiledExpression {
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
  return {
    source,
    kind,
    evaluate(facts, scores) {
      if (kind === 'override') {
        return failed('an override gives a value, not a bool: use evaluateValue');
      }
      try {
        const bindings = bindingsFor(facts, kind === 'when' ? (scores ?? NO_SCORES) : undefined);
        const value = metered(run, bindings);
        if (value === OVER_BUDGET) return COST_FAILURE;
        if (isCelError(value)) return failed(where(value) + safeMessage(value));
        if (typeof value === 'boolean') return { ok: true, value };
        return failed('expression did not evaluate to a bool');
      } catch {
        return failed('evaluation failed');
      }
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

function failed(error: string): { ok: false; error: string; reason: FailureReason } {
  return { ok: false, error, reason: 'error' };
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

/** Deepest list or map nesting `evaluateValue` converts. */
const MAX_RESULT_DEPTH = 64;

/** A CEL value as plain JSON (see `evaluateValue`); fails only on depth or an unknown value. */
function toJsonValue(v: CelValue, depth: number): ValueResult {
  if (depth > MAX_RESULT_DEPTH) return failed(`value nests more than ${MAX_RESULT_DEPTH} levels`);
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return { ok: true, value: v };
    case 'number':
      return { ok: true, value: Number.isFinite(v) ? v : String(v) };
    case 'bigint':
      return { ok: true, value: bigintJson(v) };
    case 'object':
      break;
    default:
      return failed('value cannot be converted');
  }
  if (v === null) return { ok: true, value: null };
  if (v instanceof Uint8Array) return { ok: true, value: Buffer.from(v).toString('base64') };
  if (isCelUint(v)) return { ok: true, value: bigintJson(v.value) };
  if (isCelList(v)) {
    const out: unknown[] = [];
    for (const el of v) {
      const r = toJsonValue(el, depth + 1);
      if (!r.ok) return r;
      out.push(r.value);
    }
    return { ok: true, value: out };
  }
  if (isCelMap(v)) {
    const out: Record<string, unknown> = {};
    for (const [k, el] of v) {
      const r = toJsonValue(el, depth + 1);
      if (!r.ok) return r;
      // A key `__proto__` must stay a key, not replace the prototype.
      Object.defineProperty(out, isCelUint(k) ? k.value.toString() : String(k), {
        value: r.value,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return { ok: true, value: out };
  }
  if (isCelType(v)) return { ok: true, value: String(v) };
  if (isReflectMessage(v)) {
    // Timestamps and durations; their JSON forms are RFC 3339 text and `1.5s`.
    const json = toJson(v.desc, v.message);
    if (typeof json === 'string') return { ok: true, value: json };
  }
  return failed('value cannot be converted');
}

function bigintJson(v: bigint): number | string {
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : v.toString();
}

/** Evaluation errors reduced to texts that cannot quote trace content (keys, values, patterns). */
function safeMessage(err: CelError): string {
  const m = err.message;
  if (/no matching overload/.test(m)) {
    // Anchored, so a value quoted inside some other message cannot pose as a signature.
    const sig =
      /^found no matching overload for '?([\w@?:!&|<>=+*/%.-]+)'? applied to '([\w\s,.()]*)'$/.exec(
        m,
      );
    if (sig === null) return 'no matching overload';
    return `no matching overload for '${OPERATORS[sig[1]!] ?? sig[1]}' applied to '${sig[2]}'`;
  }
  if (/field not found|no such key|no such field/.test(m)) return 'no such key';
  if (/out of bounds/.test(m)) return 'index out of bounds';
  if (/divide by zero/.test(m)) return 'division by zero';
  if (/modulus by zero/.test(m)) return 'modulus by zero';
  if (/overflow|out of range/.test(m)) return 'value out of range';
  if (/regular expression|regexp/.test(m)) return 'invalid regular expression';
  if (/type mismatch/.test(m)) return 'type mismatch';
  if (/key conflict/.test(m)) return 'duplicate map key';
  if (/unresolved attribute|undeclared/.test(m)) return 'unknown variable';
  return 'evaluation error';
}

// ---------------------------------------------------------------------------------------------
// Bindings

type Bindings = Record<string, CelInput>;

const NO_SCORES: Readonly<Record<string, number>> = Object.freeze({});
const MAX_VALUE_DEPTH = 32;

/**
 * The variables as CEL values, each converted on first read: a selector reading only `labels`
 * never pays for the attributes. One per facts object, shared by every expression.
 */
class FactBindings {
  #attributes: CelInput | undefined;
  #resource: CelInput | undefined;
  #labels: CelInput | undefined;
  #tools: CelInput | undefined;
  #models: CelInput | undefined;

  #scoresSource: object | undefined;
  #scores: CelInput | undefined;

  #input: string | undefined;
  #output: string | undefined;

  constructor(private readonly f: TraceFacts) {}

  /**
   * Sets what `scores` reads for the next evaluation (evaluation is synchronous). Stages of one
   * trace pass the same object in turn, so it is converted once.
   */
  useScores(scores: Readonly<Record<string, number>>): void {
    if (this.#scoresSource === scores && this.#scores !== undefined) return;
    const map = new Map<string, number>();
    for (const [k, v] of Object.entries(scores)) if (typeof v === 'number') map.set(k, v);
    this.#scores = celMap(map);
    this.#scoresSource = scores;
  }

  /** Sets what `input` and `output` read for the next evaluation, as `useScores` does. */
  useText(text: OverrideInputs): void {
    this.#input = text.input;
    this.#output = text.output;
  }

  /** Undefined for selectors, which the check keeps from reading it. */
  get scores(): CelInput | undefined {
    return this.#scores;
  }
  /** Undefined for selectors and `when`, which the check keeps from reading them. */
  get input(): string | undefined {
    return this.#input;
  }
  get output(): string | undefined {
    return this.#output;
  }
  get service(): string {
    return String(this.f.service);
  }
  get name(): string {
    return String(this.f.name);
  }
  get duration(): number {
    return Number(this.f.duration);
  }
  get error(): boolean {
    return this.f.error === true;
  }
  get steps(): bigint {
    return Number.isFinite(this.f.steps) ? BigInt(Math.trunc(this.f.steps)) : 0n;
  }
  get project(): string {
    return String(this.f.project);
  }
  get source(): string {
    return String(this.f.source);
  }
  get tools(): CelInput {
    this.#tools ??= celList(this.f.tools.filter((t) => typeof t === 'string'));
    return this.#tools;
  }
  get models(): CelInput {
    this.#models ??= celList(this.f.models.filter((t) => typeof t === 'string'));
    return this.#models;
  }
  get attributes(): CelInput {
    this.#attributes ??= toCelMap(this.f.attributes, 0);
    return this.#attributes;
  }
  get resource(): CelInput {
    this.#resource ??= toCelMap(this.f.resource, 0);
    return this.#resource;
  }
  get labels(): CelInput {
    this.#labels ??= toCelMap(this.f.labels, 0);
    return this.#labels;
  }
}

const BINDINGS = Symbol('cel.bindings');

/** Facts built without `traceFacts` (tests, callers spreading facts) get theirs here. */
const foreignBindings = new WeakMap<object, FactBindings>();

function bindingsFor(
  facts: TraceFacts,
  scores: Readonly<Record<string, number>> | undefined,
  text?: OverrideInputs,
): Bindings {
  let base = (facts as { [BINDINGS]?: FactBindings })[BINDINGS];
  if (base === undefined) {
    base = foreignBindings.get(facts);
    if (base === undefined) {
      base = new FactBindings(facts);
      foreignBindings.set(facts, base);
    }
  }
  if (scores !== undefined) base.useScores(scores);
  if (text !== undefined) base.useText(text);
  return base as unknown as Bindings;
}

function toCelMap(obj: object, depth: number) {
  const map = new Map<string, CelInput>();
  for (const [k, v] of Object.entries(obj)) {
    const c = toCelValue(v, depth + 1);
    if (c !== undefined) map.set(k, c);
  }
  return celMap(map);
}

/**
 * Attribute values as CEL sees them: numbers are doubles (OTLP ints and doubles both arrive as
 * numbers), bigints ints, kvlists maps, arrays lists; anything else is left out.
 */
function toCelValue(v: unknown, depth: number): CelInput | undefined {
  switch (typeof v) {
    case 'string':
    case 'boolean':
    case 'number':
      return v;
    case 'bigint':
      return v >= INT64_MIN && v <= INT64_MAX ? v : Number(v);
    case 'object': {
      if (v === null) return null;
      if (v instanceof Uint8Array) return v;
      if (depth > MAX_VALUE_DEPTH) return undefined;
      if (Array.isArray(v)) {
        const out: CelInput[] = [];
        for (const el of v) {
          const c = toCelValue(el, depth + 1);
          if (c !== undefined) out.push(c);
        }
        return celList(out);
      }
      return toCelMap(v, depth);
    }
    default:
      return undefined;
  }
}
