/*
 * Speed, measured rather than tested (Node 20, one core; `expr.evaluate(facts)` in a loop for 1 s):
 *   `"search" in tools`                                                      ≈ 2.5M evals/s
 *   `service.startsWith("agent") && labels.env == "prod" && duration > 2`    ≈ 0.5M evals/s
 *   the same with fresh facts from `traceFacts` each time (conversion paid)  ≈ 0.2M evals/s
 *   `scores["exact-match"] == 1.0 && scores.latency < 2.0`, fresh scores     ≈ 0.37M evals/s
 * The cost budget (cost.ts) costs 0 to 15% of that: evaluations per CPU-second, Node 22, the
 * builds before and after it alternating in one process, best of 7 rounds, on a loaded machine:
 *   `"search" in tools`                                           1.95M → 1.79M
 *   `service.startsWith("agent") && labels.env == "prod" && duration > 2.0`  0.78M → 0.68M
 *   `tools.exists(t, t == "calculator") && name.contains("flights")`  0.37M → 0.35M
 *   `tools.filter(t, t == "search").size() >= 2`                  0.22M → 0.21M
 */
import { describe, expect, it } from 'vitest';
import type { EvalRecord } from '../core/index.js';
import { isTouchstoneError, type TouchstoneError } from '../core/index.js';
import {
  type CelKind,
  compileExpression,
  type OverrideInputs,
  type TraceFacts,
  traceFacts,
} from './index.js';
import { MAX_EXPRESSION_LENGTH } from './types.js';

const SECRET = '(sk-live-SECRET-1234';

const record: EvalRecord = {
  id: 'rec-1',
  input: 'find flights',
  output: 'done',
  trajectory: [
    { type: 'agent', name: 'planner', error: '' },
    { type: 'llm', name: 'chat gpt-4o', model: 'gpt-4o', error: '' },
    { type: 'tool', name: 'search', input: '{"q":"x"}', error: '' },
    { type: 'llm', name: 'chat gpt-4o', model: 'gpt-4o', error: '' },
    { type: 'tool', name: 'calculator', error: '' },
    { type: 'tool', name: 'search', error: 'timeout' },
    { type: 'llm', name: 'chat mini', model: 'gpt-4o-mini', error: '' },
  ],
};

const summary = {
  service: 'agent-booking',
  name: 'chat flights',
  durationMs: 3000,
  error: true,
  steps: 7,
  labels: { env: 'prod', team: 'travel' },
  project: 'default',
  source: '',
};

const root = {
  attributes: {
    'gen_ai.request.model': 'gpt-4o',
    'gen_ai.usage.input_tokens': 1200,
    'http.status_code': 200,
    temperature: 0.5,
    big: 9007199254740993n as unknown as number,
    tags: ['beta', 'eu'],
    meta: { tier: 'gold', retries: 2, nested: { deep: true } },
    secret: SECRET,
    trap: `found no matching overload for '${SECRET}' applied to '(int)'`,
  },
  resource: { 'service.name': 'agent-booking', 'deployment.environment': 'prod' },
};

const facts = traceFacts(summary, record, root);

function compileError(source: string, kind: CelKind = 'selector'): TouchstoneError {
  try {
    compileExpression(source, kind, 'spec.selector');
  } catch (err) {
    if (isTouchstoneError(err)) return err;
    throw err;
  }
  throw new Error(`expected ${JSON.stringify(source)} not to compile`);
}

function messages(source: string, kind: CelKind = 'selector'): string[] {
  const err = compileError(source, kind);
  expect(err.code).toBe('POLICY_CEL_INVALID');
  for (const d of err.details) expect(d.path).toBe('spec.selector');
  return err.details.map((d) => d.message);
}

/** Compiled as a stored expression: these tests are about evaluation, not the apply-time estimate. */
function evaluate(source: string, f: TraceFacts = facts, scores?: Record<string, number>) {
  const kind: CelKind = scores === undefined ? 'selector' : 'when';
  return compileExpression(source, kind, 'spec.selector', { stored: true }).evaluate(f, scores);
}

describe('traceFacts', () => {
  it('reads the summary, the trajectory and the root span', () => {
    expect(facts).toEqual({
      service: 'agent-booking',
      name: 'chat flights',
      duration: 3,
      error: true,
      steps: 7,
      tools: ['search', 'calculator', 'search'],
      models: ['gpt-4o', 'gpt-4o-mini'],
      attributes: root.attributes,
      resource: root.resource,
      labels: { env: 'prod', team: 'travel' },
      project: 'default',
      source: '',
    });
  });

  it('leaves attributes and resource empty without a root', () => {
    const bare = traceFacts(summary, { id: 'r' });
    expect(bare.attributes).toEqual({});
    expect(bare.resource).toEqual({});
    expect(bare.tools).toEqual([]);
    expect(evaluate('size(attributes) == 0 && size(tools) == 0', bare)).toEqual({
      ok: true,
      value: true,
    });
  });
});

describe('compileExpression: compile errors name line and column', () => {
  it.each([
    ['service == ', 'line 1, column 9: syntax error'],
    ['labels["env"] == "prod" &&', 'line 1, column 25: syntax error (unexpected &)'],
    ['"abc', 'line 1, column 1: syntax error (unexpected ")'],
    ['(error', 'line 1, column 7: syntax error (unexpected end of input)'],
    [
      'servce == "agent"',
      "line 1, column 1: undeclared reference to 'servce' (did you mean 'service'?)",
    ],
    ['error && labelz.env == "x"', "line 1, column 10: undeclared reference to 'labelz'"],
    ['service', 'line 1, column 1: expression must be a bool (true or false), not string'],
    ['  steps + 1', 'line 1, column 3: expression must be a bool (true or false), not int'],
    ['scores["exact-match"] > 0.5', "line 1, column 1: undeclared reference to 'scores'"],
    ['steps == "3"', "line 1, column 7: no matching overload for '==' applied to '(int, string)'"],
    [
      'duration + 1 > 3',
      "line 1, column 10: no matching overload for '+' applied to '(double, int)'",
    ],
    ['name.matches("(")', 'line 1, column 14: invalid regular expression'],
    ['tools.exists(t)', 'line 1, column 6: exists() takes a variable and a condition'],
    ['has(labels)', 'line 1, column 1: has() takes a field selection'],
    ['size(tools, 1) > 0', "line 1, column 1: no matching overload for 'size'"],
    ['frobnicate(name)', "line 1, column 1: undeclared reference to function 'frobnicate'"],
    ['9223372036854775808 > steps', 'line 1, column 1: integer literal out of range'],
    ['service.size', "line 1, column 8: type 'string' has no field 'size'"],
  ])('%s', (source, expected) => {
    const [first] = messages(source);
    expect(first).toContain(expected);
  });

  it('counts lines and columns across newlines', () => {
    expect(messages('error\n  && servce == "a"')).toEqual([
      "line 2, column 6: undeclared reference to 'servce' (did you mean 'service'?)",
    ]);
    expect(messages('error &&\n  service ==')[0]).toMatch(/^line 2, column 11: syntax error/);
  });

  it('reports every undeclared name, in source order', () => {
    expect(messages('foo && bar')).toEqual([
      "line 1, column 1: undeclared reference to 'foo'",
      "line 1, column 8: undeclared reference to 'bar'",
    ]);
  });

  it('puts the first problem in the error message', () => {
    const err = compileError('servce == "x"');
    expect(err.message).toBe(
      "spec.selector: line 1, column 1: undeclared reference to 'servce' (did you mean 'service'?)",
    );
  });

  it('gives `when` the scores and selectors nothing more', () => {
    expect(() => compileExpression('scores.latency < 2.0', 'when', 'w')).not.toThrow();
    expect(messages('scores.latency < 2.0')[0]).toContain('only a stage');
  });

  it('enforces the limits', () => {
    const long = `service == "${'a'.repeat(MAX_EXPRESSION_LENGTH)}"`;
    expect(messages(long)).toEqual([
      `line 1, column 1: expression is longer than ${MAX_EXPRESSION_LENGTH} characters`,
    ]);
    expect(messages(`${'('.repeat(40)}error${')'.repeat(40)}`)[0]).toBe(
      'line 1, column 33: brackets nest more than 32 deep',
    );
    // Brackets inside strings do not count.
    expect(evaluate(`name != "${'('.repeat(40)}"`)).toEqual({ ok: true, value: true });
    expect(messages(`${Array.from({ length: 150 }, () => 'steps').join(' + ')} > 0`)[0]).toMatch(
      /nests more than 100 levels/,
    );
    expect(messages('tools.all(a, tools.all(b, tools.all(c, a == b && b == c)))')[0]).toMatch(
      /macros nest more than 2 deep/,
    );
  });
});

describe('evaluate', () => {
  it.each([
    ['attributes["gen_ai.request.model"] == "gpt-4o"', true],
    ['"gen_ai.request.model" in attributes', true],
    ['"x" in attributes', false],
    ['size(tools) > 2', true],
    ['"search" in tools', true],
    ['"browser" in tools', false],
    ['tools.filter(t, t == "search").size() == 2', true],
    ['tools.exists(t, t.startsWith("calc"))', true],
    ['"gpt-4o-mini" in models && size(models) == 2', true],
    ['labels.env == "prod"', true],
    ['labels["team"] == "travel"', true],
    ['has(labels.env) && !has(labels.region)', true],
    ['duration > 2.5', true],
    ['duration > 2', true],
    ['duration == 3', true],
    ['duration < 3', false],
    ['steps == 7 && steps > 6.5 && steps == 7.0', true],
    ['error', true],
    ['!error', false],
    ['service.startsWith("agent")', true],
    ['name.matches("^chat")', true],
    ['name.matches("^CHAT")', false],
    ['name.lowerAscii().contains("flight")', true],
    ['project == "default" && source == ""', true],
    ['resource["deployment.environment"] == labels.env', true],
    ['attributes["http.status_code"] == 200', true],
    ['attributes["http.status_code"] >= 200 && attributes["http.status_code"] < 300', true],
    ['attributes["gen_ai.usage.input_tokens"] > 1000.0', true],
    ['attributes.temperature == 0.5', true],
    ['attributes.big > 9007199254740992', true],
    ['"eu" in attributes.tags && size(attributes.tags) == 2', true],
    ['attributes.meta.tier == "gold" && attributes.meta.retries == 2', true],
    ['attributes.meta.nested.deep', true],
    ['has(attributes.meta.tier)', true],
    ['type(attributes.temperature) == double', true],
    ['int(attributes["http.status_code"]) + 1 == 201', true],
    ['error || labels["missing"] == "x"', true],
  ])('%s → %s', (source, value) => {
    expect(evaluate(source)).toEqual({ ok: true, value });
  });

  it.each([
    ['labels["nope"] == "x"', 'line 1, column 1: no such key'],
    ['labels.nope == "x"', 'no such key'],
    ['attributes.missing > 1', 'no such key'],
    ['tools[9] == "x"', 'index out of bounds'],
    [
      'attributes["http.status_code"] + 1 > 0',
      "no matching overload for '+' applied to '(double, int)'",
    ],
    ['attributes.tags', 'expression did not evaluate to a bool'],
    ['attributes.meta.tier > 3', "no matching overload for '>'"],
  ])('%s → error', (source, error) => {
    const r = evaluate(source);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toContain(error);
  });

  it('never quotes attribute values in errors', () => {
    for (const source of [
      'int(attributes.secret) == 1',
      'bool(attributes.secret)',
      'labels[attributes.secret] == "x"',
      'name.matches(attributes.secret)',
      'attributes.secret.matches(attributes.secret)',
      'timestamp(attributes.secret) > timestamp(0)',
      'duration(attributes.secret) > duration("1s")',
      'attributes[attributes.secret] == 1',
      '{attributes.secret: 1, attributes.secret: 2}.size() == 1',
      'attributes.secret + 1 == 2',
      'int(attributes.trap) == 1',
      'bool(attributes.trap)',
      'attributes.secret.substring(99) == ""',
    ]) {
      const r = evaluate(source);
      expect(r.ok, source).toBe(false);
      if (!r.ok) {
        expect(r.error, source).not.toContain('SECRET');
        expect(r.error, source).not.toContain('sk-live');
      }
    }
  });

  it('gives `when` the scores, pass/fail as 1/0', () => {
    const scores = { 'exact-match': 1, latency: 1.5, toxicity: 0 };
    expect(evaluate('scores["exact-match"] == 1.0 && scores.latency < 2.0', facts, scores)).toEqual(
      {
        ok: true,
        value: true,
      },
    );
    expect(evaluate('scores["exact-match"] == 1 && scores.toxicity == 0', facts, scores)).toEqual({
      ok: true,
      value: true,
    });
    expect(
      evaluate('"faithfulness" in scores || !has(scores.faithfulness)', facts, scores),
    ).toEqual({ ok: true, value: true });
    const missing = evaluate('scores.faithfulness > 0.5', facts, scores);
    expect(missing.ok).toBe(false);
    // Facts and scores together; a later stage's scores replace the earlier ones.
    const gate = compileExpression(
      'scores.latency < 2.0 && "search" in tools && attributes.meta.tier == "gold"',
      'when',
      'spec.stages[1].when',
    );
    expect(gate.evaluate(facts, scores)).toEqual({ ok: true, value: true });
    expect(gate.evaluate(facts, { ...scores, latency: 3 })).toEqual({ ok: true, value: false });
    expect(gate.evaluate(facts, scores)).toEqual({ ok: true, value: true });
    // A `when` evaluated without scores sees an empty map.
    const when = compileExpression('size(scores) == 0 && error', 'when', 'spec.stages[1].when');
    expect(when.evaluate(facts)).toEqual({ ok: true, value: true });
  });

  it('evaluates the same expression over many traces', () => {
    const sel = compileExpression('labels.env == "prod" && duration > 1.0', 'selector', 's');
    const other = traceFacts({ ...summary, durationMs: 500 }, record, root);
    const staging = traceFacts({ ...summary, labels: { env: 'staging' } }, record, root);
    expect(sel.evaluate(facts)).toEqual({ ok: true, value: true });
    expect(sel.evaluate(other)).toEqual({ ok: true, value: false });
    expect(sel.evaluate(staging)).toEqual({ ok: true, value: false });
    expect(sel.evaluate(facts)).toEqual({ ok: true, value: true });
  });

  it('returns an error for facts it cannot read instead of throwing', () => {
    const broken = { ...facts, tools: undefined } as unknown as TraceFacts;
    const r = evaluate('size(tools) > 0', broken);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toMatch(/evaluation error$/);
  });
});

describe('override expressions', () => {
  const text: OverrideInputs = {
    input: 'find flights to Lisbon',
    output: 'Booked TP1234.\nTotal: 320 EUR',
  };
  const overrideFacts = traceFacts(summary, record, {
    ...root,
    attributes: { ...root.attributes, 'mlflow.spanOutputs': '{"answer":"Booked"}' },
  });

  function value(source: string, t: OverrideInputs = text) {
    return compileExpression(source, 'override', 'spec.overrides.output').evaluateValue(
      overrideFacts,
      t,
    );
  }

  it('report compile errors with their line and column', () => {
    expect(messages('outptu.split("\\n")', 'override')).toEqual([
      "line 1, column 1: undeclared reference to 'outptu' (did you mean 'output'?)",
    ]);
    expect(messages('input +', 'override')[0]).toMatch(/^line 1, column 7: syntax error/);
    expect(messages('input\n  + 1', 'override')).toEqual([
      "line 2, column 3: no matching overload for '+' applied to '(string, int)'",
    ]);
    expect(messages('output.size', 'override')[0]).toBe(
      "line 1, column 7: type 'string' has no field 'size'",
    );
    expect(messages('scores.latency', 'override')[0]).toContain('only a stage');
    expect(messages('output.matches("(")', 'override')[0]).toBe(
      'line 1, column 16: invalid regular expression (RE2 syntax)',
    );
    expect(messages(`${'['.repeat(40)}1${']'.repeat(40)}`, 'override')[0]).toBe(
      'line 1, column 33: brackets nest more than 32 deep',
    );
  });

  it('accept any result type, and only overrides see input and output', () => {
    for (const source of ['output', 'steps + 1', '[1, 2]', '{"a": 1}', 'null', 'b"x"']) {
      expect(() => compileExpression(source, 'override', 'o'), source).not.toThrow();
    }
    expect(messages('output == "x"')[0]).toBe(
      "line 1, column 1: undeclared reference to 'output' (only a trace source's overrides see input and output)",
    );
    expect(messages('input != ""', 'when')[0]).toContain("undeclared reference to 'input'");
  });

  it.each<[string, unknown]>([
    ['output.split("\\n")[0]', 'Booked TP1234.'],
    ['input', 'find flights to Lisbon'],
    ['attributes["mlflow.spanOutputs"]', '{"answer":"Booked"}'],
    ['labels.team + "-x"', 'travel-x'],
    [
      '{"team": labels.team, "steps": steps, "slow": duration > 2.0}',
      {
        team: 'travel',
        steps: 7,
        slow: true,
      },
    ],
    [
      '[service, size(tools), 0.5, null, tools.filter(t, t == "search")]',
      ['agent-booking', 3, 0.5, null, ['search', 'search']],
    ],
    ['attributes.meta', { tier: 'gold', retries: 2, nested: { deep: true } }],
    ['output.contains("EUR")', true],
    ['[]', []],
  ])('%s', (source, expected) => {
    expect(value(source)).toEqual({ ok: true, value: expected });
  });

  it('reads the input and output passed with each evaluation', () => {
    const expr = compileExpression('input + " / " + output', 'override', 'o');
    expect(expr.evaluateValue(overrideFacts, { input: 'a', output: 'b' })).toEqual({
      ok: true,
      value: 'a / b',
    });
    expect(expr.evaluateValue(overrideFacts, { input: 'c', output: 'd' })).toEqual({
      ok: true,
      value: 'c / d',
    });
  });

  it('fail without throwing on a missing key or a bad value', () => {
    expect(value('labels.region')).toEqual({
      ok: false,
      error: 'line 1, column 7: no such key',
      reason: 'error',
    });
    expect(value('attributes["gen_ai.prompt"]')).toMatchObject({ ok: false });
    expect(value('output.split("\\n")[5]')).toMatchObject({ ok: false });
    const secret = value('int(attributes.secret)');
    expect(secret.ok).toBe(false);
    if (!secret.ok) expect(secret.error).not.toContain('SECRET');
    const bad = { input: 1, output: 'x' } as unknown as OverrideInputs;
    expect(value('output', bad)).toEqual({
      ok: false,
      error: 'input and output must be strings',
      reason: 'error',
    });
  });

  it('convert values that are not JSON as documented', () => {
    expect(value('9007199254740991')).toEqual({ ok: true, value: 9007199254740991 });
    expect(value('9007199254740993')).toEqual({ ok: true, value: '9007199254740993' });
    expect(value('-9223372036854775808')).toEqual({ ok: true, value: '-9223372036854775808' });
    expect(value('18446744073709551615u')).toEqual({ ok: true, value: '18446744073709551615' });
    expect(value('3u')).toEqual({ ok: true, value: 3 });
    expect(value('attributes.big')).toEqual({ ok: true, value: '9007199254740993' });
    expect(value('[1.0 / 0.0, -1.0 / 0.0, 0.0 / 0.0]')).toEqual({
      ok: true,
      value: ['Infinity', '-Infinity', 'NaN'],
    });
    expect(value('b"abc"')).toEqual({ ok: true, value: 'YWJj' });
    expect(value('timestamp("2024-05-01T12:00:00Z")')).toEqual({
      ok: true,
      value: '2024-05-01T12:00:00Z',
    });
    expect(value('duration("1500ms")')).toEqual({ ok: true, value: '1.500s' });
    expect(value('type(steps)')).toEqual({ ok: true, value: 'int' });
    const keyed = value('{1: "a", true: "b", 2u: "c", "__proto__": "d"}');
    expect(keyed).toEqual({ ok: true, value: { 1: 'a', true: 'b', 2: 'c', ['__proto__']: 'd' } });
    if (keyed.ok) {
      expect(Object.getPrototypeOf(keyed.value)).toBe(Object.prototype);
      expect(Object.keys(keyed.value as object)).toEqual(['1', '2', 'true', '__proto__']);
    }
  });

  it('refuse the other evaluation', () => {
    const override = compileExpression('output', 'override', 'o');
    expect(override.evaluate(facts)).toEqual({
      ok: false,
      error: 'an override gives a value, not a bool: use evaluateValue',
      reason: 'error',
    });
    const selector = compileExpression('error', 'selector', 's');
    expect(selector.evaluateValue(facts, text)).toEqual({
      ok: false,
      error: 'a selector gives a bool, not a value: use evaluate',
      reason: 'error',
    });
    const when = compileExpression('error', 'when', 'w');
    expect(when.evaluateValue(facts, text).ok).toBe(false);
  });
});

describe('compileExpression never throws anything but POLICY_CEL_INVALID', () => {
  const seeds = [
    'service.startsWith("agent") && labels.env == "prod"',
    'attributes["gen_ai.request.model"] == "gpt-4o" || duration > 2.5',
    'size(tools) > 2 && "search" in tools',
    'tools.exists(t, t.matches("^s.*h$")) ? error : !error',
    "{'a': [1, 2u, 3.0, b'x', null, true]}.a[1] == 2u",
    'has(attributes.meta.tier) && int(steps) % 2 == 0',
    'r"raw\\d" + """triple""" == name // comment',
    'models.map(m, m.upperAscii()).all(m, m != "")',
  ];
  const alphabet = [
    ...'()[]{}.,:?!<>=&|+-*/%"\'\\ \n\tabcdefxyz0123456789_u$@#é😀',
    '&&',
    '||',
    '==',
    ' in ',
    'has(',
    '.exists(',
    'scores',
    'attributes',
    '1e999',
    '0x',
    '"""',
    'r"',
    'b"',
  ];

  it('on 2000 random and mutated strings', () => {
    let state = 0x9e3779b9;
    const rand = (n: number) => {
      state = (state + 0x6d2b79f5) | 0;
      let t = Math.imul(state ^ (state >>> 15), 1 | state);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) % n;
    };
    const pick = <T>(xs: readonly T[]): T => xs[rand(xs.length)]!;
    const inputs: string[] = [];
    for (let i = 0; i < 2000; i++) {
      let s: string;
      if (i % 4 === 0) {
        s = Array.from({ length: rand(40) }, () => pick(alphabet)).join('');
      } else {
        s = pick(seeds);
        for (let m = rand(4) + 1; m > 0; m--) {
          const at = rand(s.length + 1);
          switch (rand(4)) {
            case 0:
              s = s.slice(0, at) + pick(alphabet) + s.slice(at);
              break;
            case 1:
              s = s.slice(0, at) + s.slice(at + 1 + rand(5));
              break;
            case 2:
              s = s.slice(0, at) + s.slice(rand(s.length), rand(s.length)) + s.slice(at);
              break;
            default:
              s = s.slice(at) + s.slice(0, at);
          }
        }
      }
      inputs.push(s);
    }
    inputs.push('', '   ', '\u0000', '('.repeat(5000), 'a.'.repeat(2000), '"'.repeat(3));
    let compiled = 0;
    for (const source of inputs) {
      for (const kind of ['selector', 'when', 'override'] as const) {
        try {
          const expr = compileExpression(source, kind, 'p');
          compiled++;
          const r =
            kind === 'override'
              ? expr.evaluateValue(facts, { input: 'in', output: 'out' })
              : expr.evaluate(facts, { x: 1 });
          expect(typeof r.ok).toBe('boolean');
        } catch (err) {
          expect(isTouchstoneError(err), JSON.stringify(source)).toBe(true);
          const e = err as TouchstoneError;
          expect(e.code).toBe('POLICY_CEL_INVALID');
          expect(e.details[0]?.message).toMatch(/^line \d+, column \d+: /);
        }
      }
    }
    expect(compiled).toBeGreaterThan(0);
  });

  it('on inputs that are not strings', () => {
    for (const bad of [undefined, null, 42, {}, ['error']]) {
      expect(() => compileExpression(bad as unknown as string, 'selector', 'p')).toThrow(
        expect.objectContaining({ code: 'POLICY_CEL_INVALID' }),
      );
    }
  });
});
