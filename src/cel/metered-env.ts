/**
 * The metered environment: the same functions, each call charged its price before it runs, and
 * the internal functions the macro rewrite (macro-meter.ts) calls.
 */
import { type CelEnv, type CelValue, celList, isCelList } from '@bufbuild/cel';
import { charge, chars, items, one, PRICES, textCost } from './cost.js';

type FuncResolver = CelEnv['funcs'];
type FuncGroup = NonNullable<ReturnType<FuncResolver['find']>>;

/** Charges a macro's list size times its loop body's size, then gives the list back. */
export const RANGE = '@touchstone.range';
/** A map or filter macro's `accumulator + [element]`: appends in place (see `append`). */
export const APPEND = '@touchstone.append';

/** Lists an APPEND made, with their arrays: only the macro that builds one ever sees it. */
const accumulators = new WeakMap<object, CelValue[]>();

/**
 * `accu + [x]` made a new list per element (quadratic, and a view nested as deep as the list was
 * long). The accumulator of a macro is unreachable from the expression until the macro ends (its
 * name, `@result`, cannot be written), so it can grow in place, as cel-go's does.
 */
function append(accu: CelValue, tail: CelValue): CelValue | undefined {
  if (!isCelList(accu) || !isCelList(tail)) return undefined;
  charge(1 + tail.size);
  let array = accumulators.get(accu);
  let list = accu;
  if (array === undefined) {
    array = accu.size === 0 ? [] : [...accu];
    list = celList(array);
    accumulators.set(list, array);
  }
  for (const e of tail) array.push(e);
  return list;
}

function internalGroup(name: string, call: FuncGroup['call']): FuncGroup {
  return { name, call, *[Symbol.iterator]() {} };
}

const INTERNAL: Readonly<Record<string, FuncGroup>> = {
  [RANGE]: internalGroup(RANGE, (_id, _target, [range, weight]) => {
    charge(1 + items(range) * Number(weight));
    return range;
  }),
  [APPEND]: internalGroup(APPEND, (_id, _target, [accu, tail]) =>
    accu === undefined || tail === undefined ? undefined : append(accu, tail),
  ),
};

function meteredGroup(name: string, group: FuncGroup | undefined): FuncGroup | undefined {
  const internal = INTERNAL[name];
  if (internal !== undefined || group === undefined) return internal;
  const price = PRICES[name] ?? one;
  if (name === 'format') {
    return {
      name,
      [Symbol.iterator]: () => group[Symbol.iterator](),
      call(id, target, args) {
        charge(price(target, args));
        const out = group.call(id, target, args);
        charge(textCost(chars(out as CelValue)));
        return out;
      },
    };
  }
  return {
    name,
    [Symbol.iterator]: () => group[Symbol.iterator](),
    call(id, target, args) {
      charge(price(target, args));
      return group.call(id, target, args);
    },
  };
}

/**
 * The environment to plan with: the same, but every function group charged. `plan` reads only
 * the namespace, the registry and the functions of an environment.
 */
export function meteredEnv(env: CelEnv): CelEnv {
  const groups = new Map<string, FuncGroup | undefined>();
  const funcs = {
    [Symbol.iterator]: () => env.funcs[Symbol.iterator](),
    find(name: string): FuncGroup | undefined {
      if (!groups.has(name)) groups.set(name, meteredGroup(name, env.funcs.find(name)));
      return groups.get(name);
    },
  };
  return {
    namespace: env.namespace,
    registry: env.registry,
    variables: env.variables,
    funcs,
  } as unknown as CelEnv;
}
