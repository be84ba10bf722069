/**
 * Fuzz target `cel`: compiling and evaluating the CEL of policies (`selector`, `when`) and trace
 * source overrides. Expressions come from a small grammar over the variables (string functions,
 * macros, arithmetic, comparisons, ternaries, lists and maps, conversions) and from mutations of
 * such expressions (character flips, cuts, splices, inserted tokens), plus long and deeply nested
 * ones around the limits.
 *
 * A pass: compiling returns an expression or throws POLICY_CEL_INVALID naming the field (never
 * another exception); evaluating never throws and gives a bool (a JSON value for an override) or
 * an error whose text holds none of the markers placed in every string of the trace facts.
 */

import {
  type CelKind,
  compileExpression,
  type TraceFacts,
  traceFacts,
} from '../../../src/cel/index.js';
import { type EvalRecord, isTouchstoneError } from '../../../src/core/index.js';
import type { FuzzTarget, Trial } from './driver.js';
import { cutText, flipChars, spliceText } from './mutate.js';
import { choose, int, MARKER, marker, pick, type Rand, rng, type Way } from './random.js';

interface CelInput {
  kind: CelKind;
  source: string;
  how: string;
}

const PATH = 'spec.selector';

// ---- grammar ---------------------------------------------------------------------------------

/** Macro variables in scope (strings) and the expression kind (which variables it sees). */
interface Scope {
  vars: readonly string[];
  kind: CelKind;
}

type Gen = (r: Rand, depth: number, s: Scope) => string;

const STRINGS = [
  '""',
  '"prod"',
  '"checkout"',
  '"gen_ai."',
  '"a,b"',
  '","',
  "'single'",
  'r"raw\\d+"',
  '"""triple"""',
  '"\\u00e9\\n\\t\\x41"',
  '"é日🚀"',
  '"%s-%d"',
];
const REGEXES = ['"^a.*$"', '"(a|b)+"', '"[a-z]{2,5}"', '"(?i)PROD"', '"("', '"\\\\p{L}+"', '""'];
const KEYS = ['"gen_ai.request.model"', '"env"', '"missing"', '"n"', '"tags"', '"meta"'];

/** One of `leaves` when the depth budget is spent, else one of `nodes` as well. */
function grow(
  r: Rand,
  depth: number,
  leaves: readonly (() => string)[],
  nodes: readonly (() => string)[],
) {
  if (depth <= 0 || r() < 0.25) return pick(r, leaves)();
  return pick(r, r() < 0.2 ? leaves : nodes)();
}

/** A macro over `range` with a fresh variable, its body built by `body` in the new scope. */
function macro(r: Rand, d: number, s: Scope, range: string, names: readonly string[], body: Gen) {
  const v = pick(r, ['v', 'w', 'k', 'tools']);
  return `${range}.${pick(r, names)}(${v}, ${body(r, d - 1, { ...s, vars: [...s.vars, v] })})`;
}

const str: Gen = (r, d, s) =>
  grow(
    r,
    d,
    [
      () => pick(r, ['service', 'name', 'project', 'source', 'labels.env', 'labels["team"]']),
      () => pick(r, STRINGS),
      () => (s.vars.length > 0 ? pick(r, s.vars) : 'name'),
      () => (s.kind === 'override' || r() < 0.05 ? pick(r, ['input', 'output']) : 'service'),
    ],
    [
      () => `${str(r, d - 1, s)} + ${str(r, d - 1, s)}`,
      () => `${str(r, d - 1, s)}.${pick(r, ['lowerAscii()', 'upperAscii()', 'trim()'])}`,
      () => `${str(r, d - 1, s)}.replace(${str(r, d - 1, s)}, ${str(r, d - 1, s)})`,
      () => `${str(r, d - 1, s)}.substring(${int_(r, d - 1, s)})`,
      () => `${str(r, d - 1, s)}.substring(${int_(r, d - 1, s)}, ${int_(r, d - 1, s)})`,
      () => `${str(r, d - 1, s)}.charAt(${int_(r, d - 1, s)})`,
      () => `${list(r, d - 1, s)}[${int_(r, d - 1, s)}]`,
      () => `string(${pick(r, [num, int_, dyn])(r, d - 1, s)})`,
      () => `${list(r, d - 1, s)}.join(${str(r, d - 1, s)})`,
      () => `${bool(r, d - 1, s)} ? ${str(r, d - 1, s)} : ${str(r, d - 1, s)}`,
      () => `"%s-%d".format([${str(r, d - 1, s)}, ${int_(r, d - 1, s)}])`,
    ],
  );

const num: Gen = (r, d, s) =>
  grow(
    r,
    d,
    [
      () => 'duration',
      () => pick(r, ['0.5', '1e308', '-0.0', '30.0', '1.0']),
      () => (s.kind === 'when' || r() < 0.05 ? `scores[${pick(r, ['"m"', '"x"'])}]` : 'duration'),
    ],
    [
      () => `${num(r, d - 1, s)} ${pick(r, ['+', '-', '*', '/'])} ${num(r, d - 1, s)}`,
      () => `double(${pick(r, [int_, dyn, str])(r, d - 1, s)})`,
      () => `-${num(r, d - 1, s)}`,
    ],
  );

const int_: Gen = (r, d, s) =>
  grow(
    r,
    d,
    [
      () => 'steps',
      () => pick(r, ['0', '1', '-1', '3', '9223372036854775807', '9223372036854775808', '2u']),
    ],
    [
      () => `size(${pick(r, [str, list, map])(r, d - 1, s)})`,
      () => `${int_(r, d - 1, s)} ${pick(r, ['+', '-', '*', '/', '%'])} ${int_(r, d - 1, s)}`,
      () => `int(${pick(r, [num, str, dyn])(r, d - 1, s)})`,
      () => `${str(r, d - 1, s)}.${pick(r, ['indexOf', 'lastIndexOf'])}(${str(r, d - 1, s)})`,
    ],
  );

const list: Gen = (r, d, s) =>
  grow(
    r,
    d,
    [() => pick(r, ['tools', 'models', '[]', 'attributes.tags'])],
    [
      () => `[${Array.from({ length: 1 + int(r, 4) }, () => str(r, d - 1, s)).join(', ')}]`,
      () => macro(r, d, s, list(r, d - 1, s), ['map'], str),
      () => macro(r, d, s, list(r, d - 1, s), ['filter'], bool),
      () => `${str(r, d - 1, s)}.split(${str(r, d - 1, s)})`,
      () => `${list(r, d - 1, s)} + ${list(r, d - 1, s)}`,
    ],
  );

const map: Gen = (r, d, s) =>
  grow(
    r,
    d,
    [() => pick(r, ['labels', 'attributes', 'resource', '{}'])],
    [() => `{${str(r, d - 1, s)}: ${pick(r, [str, num, int_])(r, d - 1, s)}}`],
  );

const dyn: Gen = (r, d, s) =>
  grow(
    r,
    d,
    [
      () => `attributes[${pick(r, KEYS)}]`,
      () => pick(r, ['attributes.n', 'attributes.meta.tier', 'resource["service.name"]']),
    ],
    [() => `dyn(${pick(r, [str, num, list])(r, d - 1, s)})`, () => `${list(r, d - 1, s)}[0]`],
  );

const bool: Gen = (r, d, s) =>
  grow(
    r,
    d,
    [
      () => pick(r, ['true', 'false', 'error', 'has(labels.env)', 'has(attributes.meta.tier)']),
      () => `${pick(r, KEYS)} in ${pick(r, ['labels', 'attributes', 'resource'])}`,
    ],
    [
      () => `${bool(r, d - 1, s)} ${pick(r, ['&&', '||'])} ${bool(r, d - 1, s)}`,
      () => `!${bool(r, d - 1, s)}`,
      () => `(${bool(r, d - 1, s)})`,
      () => `${str(r, d - 1, s)} ${pick(r, ['==', '!='])} ${str(r, d - 1, s)}`,
      () => `${num(r, d - 1, s)} ${pick(r, ['<', '<=', '>', '>=', '=='])} ${num(r, d - 1, s)}`,
      () => `${int_(r, d - 1, s)} ${pick(r, ['<', '==', '!='])} ${int_(r, d - 1, s)}`,
      () => `${str(r, d - 1, s)} in ${list(r, d - 1, s)}`,
      () =>
        `${str(r, d - 1, s)}.${pick(r, ['startsWith', 'endsWith', 'contains'])}(${str(r, d - 1, s)})`,
      () => `${str(r, d - 1, s)}.matches(${r() < 0.8 ? pick(r, REGEXES) : str(r, d - 1, s)})`,
      () => macro(r, d, s, list(r, d - 1, s), ['exists', 'all', 'exists_one'], bool),
      () => macro(r, d, s, map(r, d - 1, s), ['exists', 'all'], bool),
      () => `${bool(r, d - 1, s)} ? ${bool(r, d - 1, s)} : ${bool(r, d - 1, s)}`,
      () => `${dyn(r, d - 1, s)} == ${pick(r, [str, num, int_])(r, d - 1, s)}`,
      () => `type(${dyn(r, d - 1, s)}) == ${pick(r, ['string', 'double', 'list', 'map'])}`,
    ],
  );

/** An expression of the kind's type, now and then of another type (refused, or an override's). */
function expression(r: Rand, kind: CelKind, depth: number): string {
  const s: Scope = { vars: [], kind };
  if (kind === 'override' || r() < 0.05)
    return pick(r, [str, num, int_, list, map, dyn, bool])(r, depth, s);
  return bool(r, depth, s);
}

// ---- mutations ------------------------------------------------------------------------------

const ALPHABET = '()[]{}.,:?!&|=<>+-*/%"\'\\ abcdefgnrstuv0123456789_\nÿ🚀';
const TOKENS = [
  '&&',
  '||',
  '(',
  ')',
  '[',
  ']',
  '{',
  '}',
  '.',
  ',',
  '?',
  ':',
  '"',
  "'",
  '//',
  'in',
  'has(',
  '.exists(x, ',
  'null',
  'b"\\xff"',
  '1u',
  '0x1F',
];

/**
 * The ways of making an expression. `long` ones reach the length and nesting limits; a `macro
 * product` nests two macros over long lists, `replace growth` chains `replace` calls that each
 * triple the string.
 */
function ways(kind: CelKind, depth: number): Way<{ source: string; how: string }>[] {
  const valid = (r: Rand) => expression(r, kind, depth);
  return [
    { name: 'grammar', weight: 50, make: (r) => ({ source: valid(r), how: 'grammar' }) },
    {
      name: 'flip',
      weight: 15,
      make: (r) => ({ source: flipChars(r, valid(r), ALPHABET, 1 + int(r, 4)), how: 'flip' }),
    },
    {
      name: 'truncate',
      weight: 8,
      make: (r) => ({ source: cutText(r, valid(r)), how: 'truncate' }),
    },
    {
      name: 'splice',
      weight: 8,
      make: (r) => ({ source: spliceText(r, valid(r), valid(r)), how: 'splice' }),
    },
    {
      name: 'insert',
      weight: 9,
      make(r) {
        const e = valid(r);
        const at = int(r, e.length + 1);
        return { source: e.slice(0, at) + pick(r, TOKENS) + e.slice(at), how: 'insert' };
      },
    },
    { name: 'long', weight: 8, make: (r) => ({ source: long(r), how: 'long' }) },
    {
      name: 'macro product',
      weight: 1,
      make(r) {
        const l = `[${Array(pick(r, [10, 31, 300, 1000]))
          .fill('1')
          .join(',')}]`;
        return { source: `${l}.exists(a, ${l}.exists(b, a == b + 1))`, how: 'macro product' };
      },
    },
    {
      name: 'replace growth',
      weight: 1,
      make: (r) => ({
        source: `service${'.replace("", "ab")'.repeat(int(r, 16))} == ""`,
        how: 'replace growth',
      }),
    },
  ];
}

/** Long or deeply nested expressions around the limits (4096 characters, 32 brackets, 100 levels). */
function long(r: Rand): string {
  const n = pick(r, [31, 32, 33, 99, 100, 101, 500, 2000]);
  switch (int(r, 7)) {
    case 0:
      return `${'('.repeat(n)}true${')'.repeat(n)}`;
    case 1:
      return `${Array(n).fill('steps').join(' + ')} > 0`;
    case 2:
      return `${'!'.repeat(n)}true`;
    case 3:
      return Array(n).fill('error').join(' && ');
    case 4:
      return `size([${Array(n).fill('"x"').join(', ')}]) > 0`;
    case 5:
      return `service == "${'x'.repeat(pick(r, [4000, 4090, 4100]))}"`;
    default:
      return `attributes${'.a'.repeat(n)} == 1`;
  }
}

// ---- facts -----------------------------------------------------------------------------------

const KINDS: readonly CelKind[] = ['selector', 'selector', 'when', 'override'];

/** Trace facts whose every string holds a marker; an error text holding one quotes the trace. */
function factsSet(): TraceFacts[] {
  const r = rng(0xce1);
  const m = () => marker(r);
  const record = (tools: number): EvalRecord => ({
    id: 'r',
    trajectory: [
      ...Array.from({ length: tools }, () => ({ type: 'tool' as const, name: m(), error: '' })),
      { type: 'llm', name: m(), model: m(), error: '' },
    ],
  });
  const summary = (steps: number) => ({
    service: m(),
    name: m(),
    durationMs: 1234,
    error: steps % 2 === 0,
    steps,
    labels: { env: m(), team: m() },
    project: m(),
    source: m(),
  });
  const attributes = {
    'gen_ai.request.model': m(),
    n: 3,
    big: '1180591620717411303424',
    tags: [m(), m()],
    meta: { tier: m(), deep: { x: [m(), { y: m() }] } },
    bytes: new Uint8Array([0, 255]),
    env: m(),
  };
  return [
    traceFacts(summary(0), record(0)),
    traceFacts(summary(3), record(3), { attributes, resource: { 'service.name': m() } }),
    traceFacts(summary(40), record(40), { attributes: { tags: [], n: 'x' }, resource: {} }),
  ];
}

const SCORES = { m: 0.5, x: 1, 'exact-match': 1, 'tool-errors': 0 };

/** The outcome of compiling and evaluating on every facts, or the rule it broke. */
function check(input: CelInput, facts: readonly TraceFacts[]): Trial {
  let compiled: ReturnType<typeof compileExpression>;
  try {
    compiled = compileExpression(input.source, input.kind, PATH);
  } catch (err) {
    if (!isTouchstoneError(err) || err.code !== 'POLICY_CEL_INVALID') {
      return broken(`compiling threw ${err instanceof Error ? err.stack : String(err)}`);
    }
    if (!err.message.startsWith(`${PATH}: `) || err.details.some((d) => d.path !== PATH)) {
      return broken('a compile error that does not name the field');
    }
    return { outcome: `${input.kind}: POLICY_CEL_INVALID` };
  }
  let failed = false;
  for (const f of facts) {
    const out =
      input.kind === 'override'
        ? compiled.evaluateValue(f, { input: `in ${f.name}`, output: `out ${f.service}` })
        : compiled.evaluate(f, SCORES);
    if (out.ok) {
      if (input.kind === 'override') JSON.stringify(out.value);
      else if (typeof out.value !== 'boolean') return broken('evaluation gave a value, not a bool');
    } else {
      if (typeof out.error !== 'string') return broken('an evaluation error that is not a text');
      if (MARKER.test(out.error)) return broken('an evaluation error quotes the trace');
      failed = true;
    }
  }
  return { outcome: `${input.kind}: compiled${failed ? ', evaluation error' : ''}` };
}

const broken = (failure: string): Trial => ({ outcome: 'broken', failure });

/** Grammar depth: deep enough for every construct to nest in another, small enough to be fast. */
const DEPTH = 5;

export async function createCelTarget(): Promise<FuzzTarget<CelInput>> {
  const facts = factsSet();
  const tables = new Map(KINDS.map((kind) => [kind, ways(kind, DEPTH)]));
  return {
    name: 'cel',
    generate(r) {
      const kind = pick(r, KINDS);
      const { value, way } = choose(r, tables.get(kind)!);
      return { input: { kind, ...value }, mutation: way };
    },
    run(input) {
      try {
        return check(input, facts);
      } catch (err) {
        return broken(`evaluation threw ${err instanceof Error ? err.stack : err}`);
      }
    },
    describe: (input) => `a ${input.kind}; ${input.how}; the reproducer is the expression`,
    bytes: (input) => Buffer.from(input.source, 'utf8'),
  };
}
