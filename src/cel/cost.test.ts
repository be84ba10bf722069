import { describe, expect, it } from 'vitest';
import { isTouchstoneError, type TouchstoneError } from '../core/index.js';
import { MAX_EVALUATION_COST } from './cost.js';
import {
  type CelKind,
  compileExpression,
  type EvaluationResult,
  type OverrideInputs,
  type TraceFacts,
} from './index.js';

/**
 * The cost budget of an evaluation and the estimate an apply refuses with. "Well under 100 ms of
 * CPU" is the bound every hostile expression is held to; on this machine they end in 1 to 25 ms.
 */
const CPU_BOUND_MS = 100;

function facts(over: Partial<TraceFacts> = {}): TraceFacts {
  return {
    service: 'agent',
    name: 'chat',
    duration: 1,
    error: false,
    steps: 0,
    tools: [],
    models: [],
    attributes: {},
    resource: {},
    labels: {},
    project: 'default',
    source: '',
    ...over,
  };
}

/** 4,000 tool calls, each name once: no macro over them can stop early. */
const TOOLS = Array.from({ length: 4000 }, (_, i) => `tool-${i}`);
const X1000 = 'x'.repeat(1000);
const Y1000 = 'y'.repeat(1000);

/**
 * Compiled as a stored policy would be (no apply-time estimate), evaluated, then evaluated again
 * and timed: the first evaluation in a process also compiles the interpreter's code (up to
 * 100 ms more on this machine), once, not per evaluation.
 */
function run(source: string, f: TraceFacts, kind: CelKind = 'selector') {
  const expr = compileExpression(source, kind, 'spec.selector', { stored: true });
  expr.evaluate(f);
  const started = process.cpuUsage();
  const result = expr.evaluate(f);
  const used = process.cpuUsage(started);
  return { result, cpuMs: (used.user + used.system) / 1000 };
}

const OVER_BUDGET: EvaluationResult = {
  ok: false,
  error: `evaluation cost more than the budget of ${MAX_EVALUATION_COST} units`,
  reason: 'cost',
};

function refusal(source: string, kind: CelKind = 'selector'): TouchstoneError {
  try {
    compileExpression(source, kind, 'spec.selector');
  } catch (err) {
    if (isTouchstoneError(err)) return err;
    throw err;
  }
  throw new Error(`expected ${source.slice(0, 60)} to be refused`);
}

describe('the cost budget of one evaluation', () => {
  it('ends a quadratic macro over 4,000 tool calls with a cost error', () => {
    const { result, cpuMs } = run(
      'tools.exists(t, tools.filter(u, u == t).size() > 3)',
      facts({ tools: TOOLS }),
    );
    expect(result).toEqual(OVER_BUDGET);
    expect(cpuMs).toBeLessThan(CPU_BOUND_MS);
  });

  it('ends exponential string growth before building the string', () => {
    const { result, cpuMs } = run(
      `name.replace("", "${X1000}").replace("x", "${Y1000}") != ""`,
      facts({ name: 'n'.repeat(120_000) }),
    );
    expect(result).toEqual(OVER_BUDGET);
    // The first replace would give 120 million characters: its size is priced before it is made.
    expect(cpuMs).toBeLessThan(CPU_BOUND_MS);
  });

  it('prices `replace` on a 120,000-character name by its matches, and replaces in linear time', () => {
    // Every character a match: 120,000 replacements cost more than the budget.
    const dashes = run('name.replace("-", "_") != ""', facts({ name: '-'.repeat(120_000) }));
    expect(dashes.result).toEqual(OVER_BUDGET);
    expect(dashes.cpuMs).toBeLessThan(CPU_BOUND_MS);
    // An ordinary long name: the library rebuilt the string per match (quadratic, seconds).
    const name = 'agent-step '.repeat(11_000);
    const ordinary = run(
      'name.replace("-", "_") == name.replace("agent-step", "agent_step")',
      facts({ name }),
    );
    expect(ordinary.result).toEqual({ ok: true, value: true });
    expect(ordinary.cpuMs).toBeLessThan(CPU_BOUND_MS);
  });

  it('cannot be hidden by an `||` or `&&` that knows its answer without the failing side', () => {
    const f = facts({ tools: TOOLS, error: true });
    expect(run('tools.all(t, tools.all(u, true)) || true', f).result).toEqual(OVER_BUDGET);
    expect(run('tools.exists(t, tools.exists(u, false)) && false', f).result).toEqual(OVER_BUDGET);
    // Short-circuit still applies before the costly side runs.
    expect(run('error || tools.all(t, tools.all(u, true))', f).result).toEqual({
      ok: true,
      value: true,
    });
  });

  it.each([
    ['nested macros whose inner one stops at once', 'tools.exists(t, tools.all(u, false))'],
    ['a list copied per element', 'tools.map(t, tools).map(l, l + ["x"]).size() > 0'],
    [
      'a map literal per element',
      'tools.all(t, {t: 1, "a": 2, "b": 3} != {}) && tools.all(t, tools.all(u, true))',
    ],
    ['a regex whose automaton gives up', 'name.matches("(a.{0,10}){5}z")'],
    ['lists concatenated per element', 'tools.map(t, tools + tools).size() > 0'],
    ['a formatted list of lists', '"%s".format([tools.map(t, tools)]).size() > 0'],
    ['a string split into characters, joined again', 'name.split("").join("-").size() > 0'],
    ['a string lowered, many times', 'tools.exists(t, name.lowerAscii() == t)'],
  ])('stops %s', (_what, source) => {
    const noisy = Array.from({ length: 120_000 }, (_, i) => ((i * 7919) % 3 === 0 ? 'a' : 'b'));
    const { result, cpuMs } = run(source, facts({ tools: TOOLS, name: noisy.join('') }));
    expect(result).toEqual(OVER_BUDGET);
    expect(cpuMs).toBeLessThan(CPU_BOUND_MS);
  });

  it('charges an override for the value it converts, shared parts each time they appear', () => {
    const attributes = { blob: 'z'.repeat(60_000) };
    const expr = compileExpression('tools.map(t, attributes)', 'override', 'spec.overrides.x', {
      stored: true,
    });
    const text: OverrideInputs = { input: '', output: '' };
    expect(expr.evaluateValue(facts({ tools: TOOLS.slice(0, 100), attributes }), text)).toEqual(
      OVER_BUDGET,
    );
    const small = expr.evaluateValue(facts({ tools: ['a', 'b'], attributes: { k: 'v' } }), text);
    expect(small).toEqual({ ok: true, value: [{ k: 'v' }, { k: 'v' }] });
  });
});

describe('ordinary expressions under the budget', () => {
  it('give the same results as before', () => {
    const f = facts({
      name: 'chat flights',
      tools: ['search', 'book', 'search', 'pay'],
      models: ['gpt-4o'],
      labels: { env: 'prod' },
      attributes: { tags: ['beta', 'eu'] },
    });
    for (const [source, value] of [
      ['tools.filter(t, t == "search").size() == 2', true],
      ['tools.map(t, t.upperAscii()) == ["SEARCH", "BOOK", "SEARCH", "PAY"]', true],
      ['tools.map(t, t.size() > 4, t) == ["search", "search"]', true],
      ['tools.exists_one(t, t == "pay") && !tools.exists_one(t, t == "search")', true],
      ['tools.map(t, tools.filter(u, u == t).size()) == [2, 1, 2, 1]', true],
      ['[1, 2] + [3] == [1, 2, 3] && ([1] + []).size() == 1', true],
      ['attributes.tags.map(t, t + "!").join(",") == "beta!,eu!"', true],
      ['"%s has %d tools".format([name, size(tools)]) == "chat flights has 4 tools"', true],
      ['name.split(" ") == ["chat", "flights"] && "search" in tools', true],
      ['"a-b-c".replace("-", "+", 1) == "a+b-c" && "a-b".replace("-", "$&") == "a$&b"', true],
      ['"hello hello".replace("he", "we", -1) == "wello wello"', true],
      [
        '"hello".replace("", "_") == "_h_e_l_l_o_" && "hello".replace("", "_", 2) == "_h_ello"',
        true,
      ],
      ['"AbC-é".lowerAscii() == "abc-é" && "AbC-é".upperAscii() == "ABC-é"', true],
      ['"a😀b".size() == 3 && size("😀") == 1', true],
    ] as const) {
      expect(run(source, f).result, source).toEqual({ ok: true, value });
    }
  });

  it('keep what a map or filter gathered separate between evaluations', () => {
    const expr = compileExpression('tools.map(t, t + "!")', 'override', 'spec.overrides.x');
    const text: OverrideInputs = { input: '', output: '' };
    const first = expr.evaluateValue(facts({ tools: ['a', 'b'] }), text);
    const second = expr.evaluateValue(facts({ tools: ['c'] }), text);
    expect(first).toEqual({ ok: true, value: ['a!', 'b!'] });
    expect(second).toEqual({ ok: true, value: ['c!'] });
  });

  it('pass over 4,000 tool calls well within the budget', () => {
    const { result, cpuMs } = run(
      'tools.exists(t, t == "checkout") || tools.filter(t, t.startsWith("tool-1")).size() > 100',
      facts({ tools: TOOLS }),
    );
    expect(result).toEqual({ ok: true, value: true });
    expect(cpuMs).toBeLessThan(CPU_BOUND_MS);
  });
});

describe('the estimate an apply refuses with', () => {
  it.each([
    [
      'a macro nested over the same list of the trace',
      'tools.exists(t, tools.filter(u, u == t).size() > 3)',
      'line 1, column 35',
    ],
    [
      'macros nested over two lists of the trace',
      'tools.exists(t, models.exists(m, m == t))',
      'line 1, column 36',
    ],
    [
      'exponential string growth',
      `name.replace("", "${X1000}").replace("x", "${Y1000}") != ""`,
      'line 1, column 1021',
    ],
    ['a pattern taken from the trace', 'name.matches(attributes.pattern)', 'line 1, column 5'],
  ])('refuses %s, naming where it spends most', (_what, source, at) => {
    const err = refusal(source);
    expect(err.code).toBe('POLICY_CEL_INVALID');
    expect(err.details).toHaveLength(1);
    expect(err.details[0]?.path).toBe('spec.selector');
    expect(err.details[0]?.message).toMatch(
      new RegExp(
        `^${at}: the expression may cost [0-9,]+ units per evaluation, more than the budget of 200,000`,
      ),
    );
  });

  it.each([
    ['selector', 'labels.env == "prod" && service.startsWith("checkout") && size(tools) > 0'],
    ['selector', 'tools.exists(t, t.contains("search")) && "refund" in tools'],
    ['selector', 'tools.filter(t, t == "search").size() > 3'],
    ['selector', '["search", "book"].exists(x, x in tools)'],
    ['selector', 'attributes["input.value"].lowerAscii().matches("(?i)refund")'],
    ['selector', 'attributes.exists(k, k.startsWith("gen_ai.")) && name.replace("-", "_") != ""'],
    ['selector', 'tools.map(t, t.lowerAscii()).exists(t, t == "search")'],
    ['when', 'scores.exists(k, scores[k] < 0.5)'],
    ['override', 'output.split("\\n")[0]'],
    ['override', 'input.replace("\\n", " ").trim()'],
    ['override', '{"team": labels.team, "tools": tools.join(",")}'],
  ] as const)('accepts the ordinary %s `%s`', (kind, source) => {
    expect(compileExpression(source, kind, 'spec.selector').source).toBe(source);
  });
});
