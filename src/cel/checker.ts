/**
 * The type check of a parsed expression. @bufbuild/cel's checker covers only constants and
 * identifiers, so this one is our own, driven by the library's overload table; it is gradual
 * (`dyn` passes) so attribute values are checked at run time. It also enforces the tree depth and
 * macro nesting limits and suggests the nearest name for a typo.
 */
import type { parse } from '@bufbuild/cel';
import {
  assignable,
  comparable,
  join,
  MACROS,
  NUMERIC,
  OPERATORS,
  OVERLOADS,
  show,
  T,
  TYPE_NAMES,
  type Ty,
  VARIABLE_TYPES,
} from './declarations.js';
import { compileRegex } from './env.js';
import {
  type CheckKind,
  INT64_MAX,
  INT64_MIN,
  MAX_MACRO_NESTING,
  MAX_TREE_DEPTH,
  UINT64_MAX,
} from './types.js';

export type Parsed = ReturnType<typeof parse>;
export type Expr = Parsed['expr'];
type ExprKind = Expr['exprKind'];
type Node<C extends NonNullable<ExprKind['case']>> = Extract<ExprKind, { case: C }>['value'];

export interface Problem {
  offset: number;
  message: string;
}

export class Checker {
  readonly problems: Problem[] = [];
  private tooDeep = false;

  constructor(
    private readonly kind: CheckKind,
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
