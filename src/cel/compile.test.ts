import { describe, expect, it } from 'vitest';
import { isTouchstoneError, type TouchstoneError } from '../core/index.js';
import { compileError, evaluate, facts, messages } from './facts.testkit.js';
import { compileExpression } from './index.js';
import { MAX_EXPRESSION_LENGTH } from './types.js';

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
