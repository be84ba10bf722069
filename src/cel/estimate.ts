/**
 * The cost an expression may reach, estimated before it runs (as cel-go's estimator does): the
 * prices of cost.ts applied to the largest sizes a trace is assumed to have instead of to
 * values. An apply refuses an expression whose estimate exceeds the budget: on a trace within
 * these sizes it would fail every time it reaches its worst case. docs/policies.md, "Evaluation
 * cost".
 */
import type { parse } from '@bufbuild/cel';
import {
  ATTRIBUTE,
  either,
  isList,
  KEY,
  list,
  map,
  NONE,
  SCALAR,
  type Size,
  text,
  VARIABLES,
} from './assumed-sizes.js';
import {
  CHARS_PER_UNIT,
  FORMATTER_COST,
  fixedPlaceholders,
  loopCost,
  MATCH_COST,
  regexCost,
  textCost,
} from './cost.js';
import { APPEND, RANGE } from './metered-env.js';
import { MAX_PROGRAM_SIZE, programSize } from './regex-size.js';

type Expr = ReturnType<typeof parse>['expr'];

const COMPARE = new Set(['_==_', '_!=_', '_<_', '_<=_', '_>_', '_>=_']);
/** Build their result a character at a time (see `walk` in cost.ts). */
const WALK = new Set(['lowerAscii', 'upperAscii']);
/** Read their target and arguments (see `scan` in cost.ts). */
const SCAN = new Set([
  'contains',
  'indexOf',
  'lastIndexOf',
  'trim',
  'string',
  'bytes',
  'int',
  'uint',
  'double',
  'bool',
  'timestamp',
  'duration',
]);
/** Characters a formatted scalar can take (`%.100f` of 1e308), per unit its walk costs. */
const FORMAT_CHARS_PER_UNIT = 420 + CHARS_PER_UNIT;

function charsOf(...sizes: (Size | undefined)[]): number {
  return sizes.reduce((n, s) => n + (s?.chars ?? 0), 0);
}

/** How many matches of `old` (a separator or what `replace` replaces) a string can have. */
function matchesIn(s: Size, old: Size, n: Size | undefined): number {
  const oldText = typeof old.literal === 'string' ? old.literal : undefined;
  const matches =
    oldText === undefined || oldText === '' ? s.chars + 1 : Math.floor(s.chars / oldText.length);
  return typeof n?.literal === 'bigint' && n.literal >= 0n
    ? Math.min(matches, Number(n.literal))
    : matches;
}

/** A `replace`'s price and largest result (see `replace` in cost.ts). */
function replaceEstimate(s: Size, old: Size, rep: Size, n: Size | undefined): [number, Size] {
  const matches = matchesIn(s, old, n);
  const oldText = typeof old.literal === 'string' ? old.literal : undefined;
  const out = s.chars + matches * Math.max(0, rep.chars - (oldText?.length ?? 0));
  const walked = oldText === undefined || oldText === '' ? loopCost(s.chars) : 0;
  return [
    1 + textCost(s.chars + old.chars) + walked + matches * MATCH_COST + textCost(out),
    text(out),
  ];
}

/** A call's price (as cost.ts charges it) and the size of its result. */
function callEstimate(fn: string, t: Size | undefined, args: readonly Size[]): [number, Size] {
  const [a = SCALAR, b = SCALAR] = args;
  if (COMPARE.has(fn)) return [1 + Math.min(a.deep, b.deep), SCALAR];
  if (WALK.has(fn)) return [1 + loopCost(t?.chars ?? 0), text(t?.chars ?? 0)];
  if (fn === 'size') {
    const sized = t ?? a;
    return [
      1 + (sized.kind === 'text' || sized.kind === 'dyn' ? textCost(sized.chars) : 0),
      SCALAR,
    ];
  }
  if (SCAN.has(fn)) {
    const price = 1 + textCost(charsOf(t, ...args));
    if (fn === 'string') return [price, text(Math.max(a.chars, 64))];
    if (fn === 'bytes') return [price, text(a.chars * 3)];
    if (fn === 'trim') return [price, text(t?.chars ?? 0)];
    return [price, SCALAR];
  }
  switch (fn) {
    case '_+_': {
      const price = 1 + Math.max(isList(a) ? a.items + b.items : 0, textCost(a.chars + b.chars));
      if (a.kind === 'text' && b.kind === 'text') return [price, text(a.chars + b.chars)];
      const elem = either(a.elem ?? NONE, b.elem ?? NONE);
      if (a.kind === 'list' && b.kind === 'list') return [price, list(a.items + b.items, elem)];
      return [price, either(text(a.chars + b.chars), list(a.items + b.items, elem))];
    }
    case '@in': {
      const compared = isList(b) ? Math.min(b.deep, b.items * (1 + a.deep)) : 0;
      return [1 + Math.max(compared, textCost(a.chars)), SCALAR];
    }
    case 'startsWith':
    case 'endsWith':
      return [1 + textCost(charsOf(...args)), SCALAR];
    case 'substring':
      return [1 + textCost(t?.chars ?? 0), text(t?.chars ?? 0)];
    case 'charAt':
      return [1, text(2)];
    case 'matches': {
      const program = typeof a.literal === 'string' ? programSize(a.literal) : MAX_PROGRAM_SIZE;
      return [1 + textCost(a.chars) + regexCost(t?.chars ?? 0, program), SCALAR];
    }
    case 'replace':
      return replaceEstimate(t ?? SCALAR, a, b, args[2]);
    case 'split': {
      const s = t ?? SCALAR;
      const pieces = matchesIn(s, a, args[1]) + 1;
      const price = 1 + textCost(s.chars + a.chars) + Math.max(s.chars, pieces * MATCH_COST);
      return [price, list(pieces, text(s.chars))];
    }
    case 'join': {
      const l = t ?? SCALAR;
      const out = l.items * ((l.elem?.chars ?? 0) + a.chars);
      return [1 + l.items + textCost(out), text(out)];
    }
    case 'format': {
      const f = t ?? SCALAR;
      const fixed = typeof f.literal === 'string' ? fixedPlaceholders(f.literal) : f.chars;
      const out = f.chars + FORMAT_CHARS_PER_UNIT * a.deep;
      const price = 1 + textCost(f.chars) + fixed * FORMATTER_COST + a.deep;
      return [price + textCost(out), text(out)];
    }
    case 'dyn':
      return [1, a];
    case 'getSeconds':
    case 'getMinutes':
    case 'getHours':
    case 'getMilliseconds':
    case 'getFullYear':
    case 'getMonth':
    case 'getDate':
    case 'getDayOfMonth':
    case 'getDayOfWeek':
    case 'getDayOfYear':
      return [args.length === 0 ? 1 : 1 + textCost(a.chars) + FORMATTER_COST, SCALAR];
    case RANGE:
      return [1 + a.items * Number(typeof b.literal === 'bigint' ? b.literal : 1n), a];
    case APPEND:
      return [1 + b.items, list(a.items + b.items, either(a.elem ?? NONE, b.elem ?? NONE))];
    default:
      return [1, SCALAR];
  }
}

interface Estimate {
  cost: number;
  size: Size;
}

class Estimator {
  /** The node whose charges weigh most, counting how often it runs. */
  worst = { id: 0n, cost: -1 };

  private note(id: bigint, cost: number): void {
    if (cost > this.worst.cost) this.worst = { id, cost };
  }

  estimate(e: Expr, scope: ReadonlyMap<string, Size>, runs: number): Estimate {
    const k = e.exprKind;
    switch (k.case) {
      case 'constExpr': {
        const v = k.value.constantKind;
        if (v.case === 'stringValue') return { cost: 0, size: text(v.value.length, v.value) };
        if (v.case === 'bytesValue') return { cost: 0, size: text(v.value.length) };
        if (v.case === 'int64Value') return { cost: 0, size: { ...SCALAR, literal: v.value } };
        return { cost: 0, size: SCALAR };
      }
      case 'identExpr': {
        const name = k.value.name.replace(/^\./, '');
        return { cost: 0, size: scope.get(name) ?? VARIABLES.get(name) ?? SCALAR };
      }
      case 'selectExpr': {
        const operand = k.value.operand;
        if (operand === undefined) return { cost: 0, size: SCALAR };
        const r = this.estimate(operand, scope, runs);
        return { cost: r.cost, size: k.value.testOnly ? SCALAR : (r.size.elem ?? ATTRIBUTE) };
      }
      case 'listExpr': {
        const parts = k.value.elements.map((el) => this.estimate(el, scope, runs));
        const elem = parts.reduce((s, p) => either(s, p.size), NONE);
        return { cost: sum(parts), size: list(parts.length, elem) };
      }
      case 'structExpr': {
        const keys: Estimate[] = [];
        const values: Estimate[] = [];
        for (const entry of k.value.entries) {
          if (entry.keyKind.case === 'mapKey')
            keys.push(this.estimate(entry.keyKind.value, scope, runs));
          if (entry.value !== undefined) values.push(this.estimate(entry.value, scope, runs));
        }
        const key = keys.reduce((s, p) => either(s, p.size), NONE);
        const elem = values.reduce((s, p) => either(s, p.size), NONE);
        return { cost: sum(keys) + sum(values), size: map(keys.length, key, elem) };
      }
      case 'callExpr':
        return this.call(e, k.value, scope, runs);
      case 'comprehensionExpr':
        return this.comprehension(k.value, scope, runs);
      default:
        return { cost: 0, size: SCALAR };
    }
  }

  private call(
    e: Expr,
    c: Extract<Expr['exprKind'], { case: 'callExpr' }>['value'],
    scope: ReadonlyMap<string, Size>,
    runs: number,
  ): Estimate {
    const target = c.target === undefined ? undefined : this.estimate(c.target, scope, runs);
    const args = c.args.map((a) => this.estimate(a, scope, runs));
    const cost = (target?.cost ?? 0) + sum(args);
    const [a, b, third] = args.map((r) => r.size);
    switch (c.function) {
      case '_&&_':
      case '_||_':
      case '!_':
      case '@not_strictly_false':
        return { cost: cost + 1, size: SCALAR };
      case '_?_:_':
        return { cost, size: either(b ?? SCALAR, third ?? SCALAR) };
      case '_[_]':
        return { cost, size: a?.elem ?? ATTRIBUTE };
    }
    const [price, size] = callEstimate(
      c.function,
      target?.size,
      args.map((r) => r.size),
    );
    this.note(e.id, price * runs);
    return { cost: cost + price, size };
  }

  private comprehension(
    c: Extract<Expr['exprKind'], { case: 'comprehensionExpr' }>['value'],
    scope: ReadonlyMap<string, Size>,
    runs: number,
  ): Estimate {
    const { iterRange, accuInit, loopCondition, loopStep, result } = c;
    if (!iterRange || !accuInit || !loopCondition || !loopStep || !result) {
      return { cost: 0, size: SCALAR };
    }
    const range = this.estimate(iterRange, scope, runs);
    const init = this.estimate(accuInit, scope, runs);
    const n = range.size.items;
    const elem = range.size.elem ?? ATTRIBUTE;
    const key = range.size.key ?? KEY;
    const iter =
      range.size.kind === 'map' ? key : range.size.kind === 'dyn' ? either(key, elem) : elem;
    const gathers = accuInit.exprKind.case === 'listExpr';
    const accu = gathers ? list(n, NONE) : init.size;
    const inner = new Map(scope).set(c.iterVar, iter).set(c.accuVar, accu);
    const cond = this.estimate(loopCondition, inner, runs * n);
    const step = this.estimate(loopStep, inner, runs * n);
    const final = gathers ? list(n, step.size.elem ?? NONE) : either(init.size, step.size);
    const out = this.estimate(result, new Map(scope).set(c.accuVar, final), runs);
    return {
      cost: range.cost + init.cost + n * (cond.cost + step.cost) + out.cost,
      size: out.size,
    };
  }
}

function sum(parts: readonly Estimate[]): number {
  return parts.reduce((n, p) => n + p.cost, 0);
}

/**
 * The most an evaluation of this (metered, see `meterMacros`) expression may cost on a trace of
 * the assumed sizes, and the node that weighs most in it.
 */
export function estimateCost(root: Expr): { cost: number; worst: bigint } {
  const estimator = new Estimator();
  const { cost } = estimator.estimate(root, new Map(), 1);
  return { cost, worst: estimator.worst.id };
}
