import { describe, expect, it } from 'vitest';
import { describeYamlProblem, parseYaml, YAML_MAX_ALIASES, type YamlResult } from './yaml.js';

/** Hostile texts are refused quickly; the budget leaves room for a loaded machine. */
const FAST_MS = 2000;

function timed(text: string, options = {}): { result: YamlResult; ms: number } {
  const start = performance.now();
  const result = parseYaml(text, options);
  return { result, ms: performance.now() - start };
}

function problem(result: YamlResult) {
  if (result.ok) throw new Error('expected a problem');
  return result.problem;
}

/** "Billion laughs": each level names the previous one nine times (9^levels nodes). */
function laughs(levels: number, perLevel = 9): string {
  const lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
  for (let i = 1; i <= levels; i++) {
    lines.push(
      `l${i}: &l${i} [${Array(perLevel)
        .fill(`*l${i - 1}`)
        .join(', ')}]`,
    );
  }
  return lines.join('\n');
}

describe('parseYaml', () => {
  it('reads every non-empty document of a text', () => {
    const result = parseYaml('a: 1\n---\n---\n- x\n- {b: [1, 2]}\n');
    expect(result).toEqual({ ok: true, documents: [{ a: 1 }, ['x', { b: [1, 2] }]] });
    expect(parseYaml('')).toEqual({ ok: true, documents: [] });
    // A few anchors and aliases, as configs use them, are fine.
    expect(parseYaml('base: &b {x: 1}\none: *b\ntwo: *b\n')).toEqual({
      ok: true,
      documents: [{ base: { x: 1 }, one: { x: 1 }, two: { x: 1 } }],
    });
  });

  it('refuses a billion-laughs alias bomb at once', () => {
    const { result, ms } = timed(laughs(12));
    expect(problem(result).message).toBe(`more than ${YAML_MAX_ALIASES} aliases`);
    expect(ms).toBeLessThan(FAST_MS);
  });

  it('refuses a small bomb whose few aliases expand exponentially', () => {
    // 10 levels of 9 aliases: 90 aliases (under the cap), 9^10 nodes once expanded.
    const { result, ms } = timed(laughs(10));
    expect(problem(result)).toEqual({
      document: 0,
      message: `an alias expands to more than ${YAML_MAX_ALIASES} nodes`,
    });
    expect(ms).toBeLessThan(FAST_MS);
  });

  it('refuses a merge-key bomb (YAML 1.1 `<<`)', () => {
    const lines = ['%YAML 1.1', '---', 'm0: &m0 {a: 1, b: 2, c: 3}'];
    for (let i = 1; i <= 40; i++) lines.push(`m${i}: &m${i}\n  <<: [*m${i - 1}, *m${i - 1}]`);
    const { result, ms } = timed(lines.join('\n'));
    expect(problem(result).message).toMatch(/aliases|alias expands/);
    expect(ms).toBeLessThan(FAST_MS);
  });

  it('refuses many anchors and aliases before the parser spends quadratic time on them', () => {
    // Unguarded, the package took seconds for this (and 33 s for 20 000).
    const n = 5_000;
    const text = `${Array.from({ length: n }, (_, i) => `k${i}: &a${i} v`).join('\n')}\nz: [${Array.from({ length: n }, (_, i) => `*a${i}`).join(', ')}]`;
    const { result, ms } = timed(text);
    expect(problem(result).message).toBe(`more than ${YAML_MAX_ALIASES} aliases`);
    expect(ms).toBeLessThan(FAST_MS);
  });

  it('refuses deep flow nesting early', () => {
    const { result, ms } = timed(`${'['.repeat(200_000)}${']'.repeat(200_000)}`);
    expect(problem(result).message).toBe('collections nested more than 64 deep');
    expect(ms).toBeLessThan(FAST_MS);
    expect(parseYaml(`${'['.repeat(60)}1${']'.repeat(60)}`).ok).toBe(true);
  });

  it('does not count a scalar that starts with * as an alias', () => {
    const text = `note: |\n${Array.from({ length: 200 }, () => '  *bold*').join('\n')}\nq: "*x"\n`;
    const result = parseYaml(text);
    expect(result.ok).toBe(true);
  });

  it('reports a duplicate key with its place, in linear time', () => {
    expect(problem(parseYaml('a: 1\nb:\n  c: 1\n  c: 2\n'))).toEqual({
      document: 0,
      line: 4,
      column: 3,
      message: 'duplicate key',
    });
    expect(parseYaml('1: a\n"1": b\n').ok).toBe(true);
  });

  it('refuses an alias inside the node it names (its value would hold itself)', () => {
    for (const text of [
      '&a [*a]',
      'a: &a {b: *a}',
      'x: 1\nl:\n  - &x {y: [*x]}',
      'a: &a\n  b: *a',
    ]) {
      const p = problem(parseYaml(text));
      expect(p.message, text).toBe('an alias inside the node it names');
      expect(p.line, text).toBeGreaterThan(0);
    }
    expect(problem(parseYaml('x: 1\nl:\n  - &x {y: [*x]}'))).toMatchObject({ line: 3, column: 13 });
    // The alias names the innermost anchor before it, which is not the node holding it here.
    expect(parseYaml('&a [&a x, *a]')).toEqual({ ok: true, documents: [['x', 'x']] });
    expect(parseYaml('a: &a [1]\nb: &b [*a]')).toEqual({
      ok: true,
      documents: [{ a: [1], b: [[1]] }],
    });
  });

  it('reports syntax errors by place and kind, never quoting the text', () => {
    const p = problem(parseYaml('ok: 1\n---\nsecret: "tsk_do-not-echo\n'));
    expect(p).toMatchObject({ document: 1, line: expect.any(Number) });
    expect(describeYamlProblem(p)).toMatch(/^document 2, line \d+, column \d+: [a-z ]+$/);
    expect(JSON.stringify(p)).not.toContain('tsk_');
  });

  it('refuses a text over maxBytes before reading it', () => {
    expect(problem(parseYaml('a: 1\n'.repeat(100), { maxBytes: 100 }))).toEqual({
      message: 'longer than 100 bytes',
    });
  });
});
