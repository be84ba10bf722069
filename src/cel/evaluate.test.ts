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
import { evaluate, facts, messages, record, root, summary } from './facts.testkit.js';
import { compileExpression, type OverrideInputs, type TraceFacts, traceFacts } from './index.js';

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
