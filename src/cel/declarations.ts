/**
 * What the type check knows: its types (gradual, `dyn` checked at run time), the library's
 * overloads read from the environment, the variables of each kind, type names, macros and the
 * operators' spellings.
 */
import type { CelType } from '@bufbuild/cel';
import {
  ACCESS_VARIABLES,
  envs,
  OVERRIDE_VARIABLES,
  SELECTOR_VARIABLES,
  WHEN_VARIABLES,
} from './env.js';
import type { CheckKind } from './types.js';

export type Ty =
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

export const T = {
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

export function fromCel(t: CelType): Ty {
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

export function show(t: Ty): string {
  if (t.k === 'list') return `list(${show(t.e)})`;
  if (t.k === 'map') return `map(${show(t.key)}, ${show(t.v)})`;
  return t.k === 'null' ? 'null_type' : t.k;
}

export function same(a: Ty, b: Ty): boolean {
  if (a.k !== b.k) return false;
  if (a.k === 'list' && b.k === 'list') return same(a.e, b.e);
  if (a.k === 'map' && b.k === 'map') return same(a.key, b.key) && same(a.v, b.v);
  return true;
}

export function join(a: Ty, b: Ty): Ty {
  return same(a, b) ? a : T.dyn;
}

/** Gradual: `dyn` on either side is accepted and checked at run time. */
export function assignable(param: Ty, arg: Ty): boolean {
  if (param.k === 'dyn' || arg.k === 'dyn') return true;
  if (param.k === 'list' && arg.k === 'list') return assignable(param.e, arg.e);
  if (param.k === 'map' && arg.k === 'map') {
    return assignable(param.key, arg.key) && assignable(param.v, arg.v);
  }
  return param.k === arg.k;
}

export const NUMERIC = new Set<Ty['k']>(['int', 'uint', 'double']);

/** CEL equality is heterogeneous across numbers (`duration == 3` holds for 3.0). */
export function comparable(a: Ty, b: Ty): boolean {
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
export const OVERLOADS = (() => {
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

export const VARIABLE_TYPES: Record<CheckKind, ReadonlyMap<string, Ty>> = {
  selector: new Map(Object.entries(SELECTOR_VARIABLES).map(([k, t]) => [k, fromCel(t)])),
  when: new Map(Object.entries(WHEN_VARIABLES).map(([k, t]) => [k, fromCel(t)])),
  override: new Map(Object.entries(OVERRIDE_VARIABLES).map(([k, t]) => [k, fromCel(t)])),
  access: new Map(Object.entries(ACCESS_VARIABLES).map(([k, t]) => [k, fromCel(t)])),
};

/** Identifiers that name types (`type(x) == string`). */
export const TYPE_NAMES = new Set([
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

export const MACROS = new Set(['has', 'all', 'exists', 'exists_one', 'map', 'filter']);

export const OPERATORS: Record<string, string> = {
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
