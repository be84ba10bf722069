import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  argumentsKey,
  booleanParam,
  canonicalJson,
  expectedToolCalls,
  formatNumber,
  listParam,
  normalizeText,
  numberParam,
  parseArguments,
  referenceTexts,
  withinScore,
} from './shared.js';

describe('params from CLI text', () => {
  const schema = z.strictObject({
    n: numberParam(z.number().positive()).optional(),
    b: booleanParam(false),
    l: listParam(z.enum(['a', 'b'])).optional(),
  });

  it('accepts numbers and their decimal spelling', () => {
    expect(schema.parse({ n: '2000' }).n).toBe(2000);
    expect(schema.parse({ n: ' 1.5e3 ' }).n).toBe(1500);
    expect(schema.parse({ n: 7 }).n).toBe(7);
  });

  it('refuses other text, naming the field', () => {
    for (const n of ['0x10', 'abc', '', '12ms']) {
      const r = schema.safeParse({ n });
      expect(r.success).toBe(false);
      expect(r.error?.issues[0]?.path).toEqual(['n']);
    }
    expect(schema.safeParse({ n: '-1' }).error?.issues[0]?.path).toEqual(['n']);
  });

  it('accepts true/false as text and defaults booleans', () => {
    expect(schema.parse({ b: 'true' }).b).toBe(true);
    expect(schema.parse({ b: 'false' }).b).toBe(false);
    expect(schema.parse({}).b).toBe(false);
    expect(schema.safeParse({ b: 'yes' }).error?.issues[0]?.path).toEqual(['b']);
  });

  it('accepts lists as comma-separated text', () => {
    expect(schema.parse({ l: 'a, b' }).l).toEqual(['a', 'b']);
    expect(schema.parse({ l: ['b'] }).l).toEqual(['b']);
    expect(schema.safeParse({ l: 'a,c' }).error?.issues[0]?.path).toEqual(['l', 1]);
    expect(schema.safeParse({ l: [] }).success).toBe(false);
  });
});

describe('normalizeText', () => {
  it('trims, collapses whitespace and folds case by default', () => {
    expect(normalizeText('  Hello \n\t World  ')).toBe('hello world');
    expect(normalizeText('Hello', { caseSensitive: true })).toBe('Hello');
  });

  it('drops punctuation and symbols like Python string.punctuation when asked', () => {
    expect(normalizeText('Hello, world! (¿Qué?) $5 + 3 = 8 ^_^', { ignorePunctuation: true })).toBe(
      'hello world qué 5 3 8',
    );
    expect(normalizeText('a , b', { ignorePunctuation: true })).toBe('a b');
    expect(normalizeText('emoji 😀 stays', { ignorePunctuation: true })).toBe('emoji 😀 stays');
  });

  it('composes Unicode so equal text compares equal', () => {
    expect(normalizeText('cafe\u0301')).toBe(normalizeText('café'));
  });
});

describe('referenceTexts', () => {
  it('treats a list as candidates and drops empty ones', () => {
    expect(referenceTexts(['a', null, '', 'b'])).toEqual(['a', 'b']);
    expect(referenceTexts('a')).toEqual(['a']);
    expect(referenceTexts(42)).toEqual(['42']);
  });

  it('keeps a chat transcript as one candidate', () => {
    expect(referenceTexts([{ role: 'assistant', content: 'hi' }])).toEqual(['hi']);
  });
});

describe('withinScore', () => {
  it('is absent without bounds', () => {
    expect(withinScore([{ label: 'x', value: 3 }])).toBeUndefined();
    expect(withinScore([])).toBeUndefined();
  });

  it('checks inclusive bounds and explains each broken one', () => {
    expect(withinScore([{ label: 'x', value: 3, max: 3 }])).toMatchObject({
      name: 'within',
      passed: true,
    });
    expect(withinScore([{ label: 'x', value: 3, min: 3 }])?.passed).toBe(true);
    const s = withinScore([
      { label: 'steps', value: 12, max: 10 },
      { label: 'tool calls', value: 1, min: 2 },
      { label: 'other', value: 1 },
    ]);
    expect(s?.passed).toBe(false);
    expect(s?.explanation).toBe(
      'steps 12 is above the maximum 10; tool calls 1 is below the minimum 2',
    );
  });

  it('prints units and no float noise', () => {
    expect(
      withinScore([{ label: 'cost', value: 0.1 + 0.2, max: 1, unit: 'USD' }])?.explanation,
    ).toBe('cost 0.3 USD is ≤ 1 USD');
    expect(formatNumber(1234.56789)).toBe('1234.57');
  });
});

describe('tool arguments', () => {
  it('parses JSON and canonicalizes key order and whitespace', () => {
    const a = argumentsKey(parseArguments('{"b": 1, "a": {"y": 2, "x": [1, 2]}}'));
    const b = argumentsKey(parseArguments({ a: { x: [1, 2], y: 2 }, b: 1 }));
    expect(a).toBe(b);
    expect(canonicalJson({ b: 1, a: 2 })).toBe('{"a":2,"b":1}');
  });

  it('keeps malformed arguments as collapsed text, distinct from JSON', () => {
    expect(parseArguments('{"a": 1')).toEqual({ json: false, text: '{"a": 1' });
    expect(argumentsKey(parseArguments('not  json\n x'))).toBe(
      argumentsKey(parseArguments('not json x')),
    );
    expect(argumentsKey(parseArguments('"1"'))).not.toBe(argumentsKey(parseArguments('1')));
  });

  it('treats missing or empty arguments as {}', () => {
    const empty = argumentsKey(parseArguments('{}'));
    expect(argumentsKey(parseArguments(''))).toBe(empty);
    expect(argumentsKey(parseArguments(undefined))).toBe(empty);
    expect(argumentsKey(parseArguments('  '))).toBe(empty);
  });

  it('does not let a __proto__ key vanish from canonical JSON', () => {
    expect(canonicalJson(JSON.parse('{"__proto__": {"x": 1}}'))).toBe('{"__proto__":{"x":1}}');
  });
});

describe('expectedToolCalls', () => {
  it('reads a list of names', () => {
    expect(expectedToolCalls(['search', 'fetch'])).toEqual([
      [{ name: 'search' }, { name: 'fetch' }],
    ]);
  });

  it('reads toolCalls, tool_calls and trajectory objects, pinning arguments', () => {
    expect(expectedToolCalls({ toolCalls: [{ name: 'a', arguments: { q: 1 } }] })).toEqual([
      [{ name: 'a', arguments: { json: true, value: { q: 1 } } }],
    ]);
    expect(
      expectedToolCalls({ tool_calls: [{ name: 'a', arguments: '{"q":1}' }, { name: 'b' }] }),
    ).toEqual([[{ name: 'a', arguments: { json: true, value: { q: 1 } } }, { name: 'b' }]]);
    expect(expectedToolCalls({ trajectory: ['x'] })).toEqual([[{ name: 'x' }]]);
  });

  it("reads OpenAI's nested function shape and skips non-tool steps", () => {
    expect(
      expectedToolCalls({
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get', arguments: '{}' } }],
      }),
    ).toEqual([[{ name: 'get', arguments: { json: true, value: {} } }]]);
    expect(
      expectedToolCalls({
        trajectory: [
          { type: 'llm', name: 'chat' },
          { type: 'tool', name: 't' },
        ],
      }),
    ).toEqual([[{ name: 't' }]]);
  });

  it('reads JSON text and lists of candidates', () => {
    expect(expectedToolCalls('{"toolCalls": [{"name": "a"}]}')).toEqual([[{ name: 'a' }]]);
    expect(expectedToolCalls([['a'], { toolCalls: [{ name: 'b' }] }, 'junk'])).toEqual([
      [{ name: 'a' }],
      [{ name: 'b' }],
    ]);
  });

  it('finds nothing in references that name no tools', () => {
    expect(expectedToolCalls('the answer is 4')).toEqual([]);
    expect(expectedToolCalls({ answer: 4 })).toEqual([]);
    expect(expectedToolCalls({ toolCalls: [] })).toEqual([]);
    expect(expectedToolCalls([{ name: '' }])).toEqual([]);
    expect(expectedToolCalls('{not json')).toEqual([]);
    expect(expectedToolCalls([1, 2])).toEqual([]);
  });
});
