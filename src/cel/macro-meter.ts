/**
 * Macros charged: the rewrite that wraps each macro's list in a call charging its size times the
 * size of its loop body, and makes map and filter append in place.
 */
import type { parse } from '@bufbuild/cel';
import { APPEND, RANGE } from './metered-env.js';

type Expr = ReturnType<typeof parse>['expr'];

function countNodes(e: Expr | undefined): number {
  if (e === undefined) return 0;
  const k = e.exprKind;
  switch (k.case) {
    case 'selectExpr':
      return 1 + countNodes(k.value.operand);
    case 'callExpr':
      return 1 + countNodes(k.value.target) + k.value.args.reduce((n, a) => n + countNodes(a), 0);
    // Making a list or map costs more than reading a node: an allocation, a key check per entry.
    case 'listExpr':
      return 2 + k.value.elements.reduce((n, a) => n + 1 + countNodes(a), 0);
    case 'structExpr':
      return (
        2 +
        k.value.entries.reduce(
          (n, en) =>
            n +
            3 +
            countNodes(en.value) +
            (en.keyKind.case === 'mapKey' ? countNodes(en.keyKind.value) : 0),
          0,
        )
      );
    case 'comprehensionExpr': {
      const c = k.value;
      return (
        1 +
        countNodes(c.iterRange) +
        countNodes(c.accuInit) +
        countNodes(c.loopCondition) +
        countNodes(c.loopStep) +
        countNodes(c.result)
      );
    }
    default:
      return 1;
  }
}

class MacroRewrite {
  private next: bigint;
  readonly positions: Record<string, number>;

  constructor(root: Expr, positions: Readonly<Record<string, number>>) {
    this.positions = { ...positions };
    let max = 0n;
    const visit = (e: Expr | undefined): void => {
      if (e === undefined) return;
      if (e.id > max) max = e.id;
      forEachChild(e, visit);
    };
    visit(root);
    this.next = max + 1n;
  }

  /** A new node at the source position of `at`. */
  private node(at: Expr, exprKind: Expr['exprKind']): Expr {
    const id = this.next++;
    this.positions[id.toString()] = this.positions[at.id.toString()] ?? 0;
    return { $typeName: 'cel.expr.Expr', id, exprKind };
  }

  private call(at: Expr, fn: string, args: Expr[]): Expr {
    return this.node(at, {
      case: 'callExpr',
      value: { $typeName: 'cel.expr.Expr.Call', function: fn, args },
    });
  }

  private int(at: Expr, value: number): Expr {
    return this.node(at, {
      case: 'constExpr',
      value: {
        $typeName: 'cel.expr.Constant',
        constantKind: { case: 'int64Value', value: BigInt(value) },
      },
    });
  }

  /** Rewrites in place, innermost macros first. */
  visit(e: Expr): void {
    forEachChild(e, (child) => this.visit(child));
    if (e.exprKind.case !== 'comprehensionExpr') return;
    const c = e.exprKind.value;
    if (c.iterRange === undefined || c.loopStep === undefined) return;
    const weight = Math.max(1, countNodes(c.loopCondition) + countNodes(c.loopStep));
    this.appends(c.loopStep, c.accuVar);
    c.iterRange = this.call(c.iterRange, RANGE, [c.iterRange, this.int(c.iterRange, weight)]);
  }

  /** `accu + [x]` in a macro's step (under `? :` for filter) becomes an in-place append. */
  private appends(e: Expr, accuVar: string): void {
    if (e.exprKind.case !== 'callExpr') return;
    const call = e.exprKind.value;
    const [l, r] = call.args;
    if (
      call.function === '_+_' &&
      l?.exprKind.case === 'identExpr' &&
      l.exprKind.value.name === accuVar &&
      r?.exprKind.case === 'listExpr'
    ) {
      call.function = APPEND;
      return;
    }
    if (call.function === '_?_:_') for (const a of call.args) this.appends(a, accuVar);
  }
}

function forEachChild(e: Expr, fn: (child: Expr) => void): void {
  const k = e.exprKind;
  switch (k.case) {
    case 'selectExpr':
      if (k.value.operand !== undefined) fn(k.value.operand);
      return;
    case 'callExpr':
      if (k.value.target !== undefined) fn(k.value.target);
      for (const a of k.value.args) fn(a);
      return;
    case 'listExpr':
      for (const a of k.value.elements) fn(a);
      return;
    case 'structExpr':
      for (const en of k.value.entries) {
        if (en.keyKind.case === 'mapKey') fn(en.keyKind.value);
        if (en.value !== undefined) fn(en.value);
      }
      return;
    case 'comprehensionExpr':
      for (const part of [
        k.value.iterRange,
        k.value.accuInit,
        k.value.loopCondition,
        k.value.loopStep,
        k.value.result,
      ]) {
        if (part !== undefined) fn(part);
      }
      return;
    default:
      return;
  }
}

/**
 * Rewrites a checked expression in place so its macros are charged (and map and filter append in
 * place); returns the source positions of the nodes, added ones included.
 */
export function meterMacros(
  root: Expr,
  positions: Readonly<Record<string, number>>,
): Record<string, number> {
  const rewrite = new MacroRewrite(root, positions);
  rewrite.visit(root);
  return rewrite.positions;
}
