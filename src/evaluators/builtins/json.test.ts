import { describe, expect, it } from 'vitest';
import { isTouchstoneError } from '../../core/index.js';
import { scoresOf } from './evaluate.testkit.js';
import { jsonSchema, jsonValid } from './json.js';

const valid = async (output: unknown, params: object = {}) =>
  (await scoresOf(jsonValid, params, { output }))['json-valid'];

describe('json-valid', () => {
  it('accepts JSON text of any kind', async () => {
    for (const text of ['{"a": 1}', ' [1, 2] ', '"str"', '3', 'null', 'true']) {
      expect((await valid(text))?.passed, text).toBe(true);
    }
  });

  it('refuses malformed text without quoting it', async () => {
    const s = await valid('{"password": "hunter2",}');
    expect(s?.passed).toBe(false);
    expect(s?.explanation).toMatch(/^the output is not valid JSON/);
    expect(s?.explanation).not.toContain('hunter2');
    expect((await valid('plain words'))?.passed).toBe(false);
    expect((await valid('   '))?.explanation).toBe('the output is empty');
  });

  it('unwraps one fence that is the whole output, unless told not to', async () => {
    const fenced = '```json\n{"a": 1}\n```';
    expect((await valid(fenced))?.passed).toBe(true);
    expect((await valid('```\n[1]\n```'))?.passed).toBe(true);
    expect((await valid('```JSON\n{}\n```\n'))?.passed).toBe(true);
    expect((await valid(fenced, { allowFence: false }))?.passed).toBe(false);
    expect((await valid('```python\n{}\n```'))?.passed).toBe(false);
    expect((await valid('Here:\n```json\n{}\n```'))?.passed).toBe(false);
    expect((await valid('```json\n{}\n```\n```json\n{}\n```'))?.passed).toBe(false);
  });

  it('treats an output that is already JSON as valid', async () => {
    expect((await valid({ a: 1 }))?.passed).toBe(true);
    expect((await valid([1, 2]))?.passed).toBe(true);
    expect((await valid(0))?.passed).toBe(true);
  });

  it("parses a transcript's last assistant message", async () => {
    const transcript = [
      { role: 'user', content: 'give JSON' },
      { role: 'assistant', content: '{"ok": true}' },
    ];
    expect((await valid(transcript))?.passed).toBe(true);
    expect((await valid([{ role: 'assistant', content: 'nope' }]))?.passed).toBe(false);
    expect(
      (
        await valid([
          { type: 'text', text: '{"a":' },
          { type: 'text', text: '1}' },
        ])
      )?.passed,
    ).toBe(true);
  });
});

const PRICED = {
  type: 'object',
  required: ['items'],
  properties: {
    items: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'price'],
        properties: { name: { type: 'string' }, price: { type: 'number' } },
      },
    },
  },
};

const check = async (schema: object, output: unknown) =>
  (await scoresOf(jsonSchema, { schema }, { output }))['json-schema'];

function bindError(params: object): unknown {
  try {
    jsonSchema.bind(jsonSchema.manifest.params.parse(params));
  } catch (err) {
    return err;
  }
  return undefined;
}

describe('json-schema', () => {
  it('passes output that validates', async () => {
    const s = await check(PRICED, '{"items": [{"name": "tea", "price": 3}]}');
    expect(s).toMatchObject({ passed: true, explanation: 'the output matches the schema' });
  });

  it('names the instance path and rule of a failure, never the value', async () => {
    const s = await check(PRICED, '{"items": [{"name": "tea", "price": "secret-price"}]}');
    expect(s?.passed).toBe(false);
    expect(s?.explanation).toBe('/items/0/price: must be number');
    expect(s?.explanation).not.toContain('secret-price');
  });

  it('reports the deepest of several errors and how many there were', async () => {
    const s = await check(PRICED, { items: [{ name: 1 }] });
    expect(s?.passed).toBe(false);
    expect(s?.explanation).toMatch(/^\/items\/0(\/name)?: must /);
    expect(s?.explanation).toMatch(/\(\d+ errors in all\)$/);
    expect((await check(PRICED, []))?.explanation).toBe('(root): must be object');
  });

  it('fails output that is not JSON', async () => {
    expect(await check(PRICED, 'not json')).toMatchObject({
      passed: false,
      explanation: 'the output is not valid JSON',
    });
  });

  it('reads fenced output', async () => {
    expect((await check({ type: 'array' }, '```json\n[]\n```'))?.passed).toBe(true);
  });

  it('uses 2020-12 by default and honours draft-07 and 2019-09', async () => {
    const tuple2020 = { type: 'array', prefixItems: [{ type: 'number' }], items: false };
    expect((await check(tuple2020, [1]))?.passed).toBe(true);
    expect((await check(tuple2020, [1, 2]))?.passed).toBe(false);
    const tuple07 = {
      $schema: 'http://json-schema.org/draft-07/schema#',
      type: 'array',
      items: [{ type: 'number' }],
      additionalItems: false,
    };
    expect((await check(tuple07, [1]))?.passed).toBe(true);
    expect((await check(tuple07, [1, 2]))?.passed).toBe(false);
    const s2019 = { $schema: 'https://json-schema.org/draft/2019-09/schema', type: 'string' };
    expect((await check(s2019, '"x"'))?.passed).toBe(true);
  });

  it('ignores unknown keywords and formats, as the spec says', async () => {
    const schema = { type: 'string', format: 'email', example: 'a@b.c', 'x-note': 1 };
    expect((await check(schema, '"not an email"'))?.passed).toBe(true);
  });

  it('refuses an invalid schema at bind with invalid_argument naming schema', () => {
    for (const schema of [
      { type: 'nope' },
      { $ref: '#/$defs/missing' },
      { $ref: 'https://example.com/remote.json' },
      { $schema: 'http://json-schema.org/draft-04/schema#' },
      { minLength: -1 },
    ]) {
      const err = bindError({ schema });
      expect(isTouchstoneError(err), JSON.stringify(schema)).toBe(true);
      if (!isTouchstoneError(err)) continue;
      expect(err.kind).toBe('invalid_argument');
      expect(err.details[0]?.path).toBe('schema');
    }
  });

  it('requires a schema object, naming the field', () => {
    expect(jsonSchema.manifest.params.safeParse({}).error?.issues[0]?.path).toEqual(['schema']);
    expect(jsonSchema.manifest.params.safeParse({ schema: 'x' }).error?.issues[0]?.path).toEqual([
      'schema',
    ]);
  });

  it('runs pattern and patternProperties on RE2: a catastrophic pattern answers at once', async () => {
    const evil = '^(a+)+$';
    const started = performance.now();
    const text = JSON.stringify(`${'a'.repeat(41)}!`);
    expect((await check({ type: 'string', pattern: evil }, text))?.passed).toBe(false);
    expect((await check({ type: 'string', pattern: evil }, '"aaaa"'))?.passed).toBe(true);
    const keys = { type: 'object', patternProperties: { [evil]: { type: 'number' } } };
    expect((await check(keys, { [`${'a'.repeat(41)}!`]: 'x', aa: 'y' }))?.passed).toBe(false);
    expect((await check(keys, { [`${'a'.repeat(41)}!`]: 'x', aa: 1 }))?.passed).toBe(true);
    const names = { type: 'object', propertyNames: { pattern: evil } };
    expect((await check(names, { [`${'a'.repeat(41)}!`]: 1 }))?.passed).toBe(false);
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('keeps the JavaScript meaning of common pattern syntax', async () => {
    const schema = { type: 'string', pattern: '^\\p{Lu}\\w+-\\d{2,3}$' };
    expect((await check(schema, '"Ab_c-12"'))?.passed).toBe(true);
    expect((await check(schema, '"ab-12"'))?.passed).toBe(false);
    expect((await check({ type: 'string', pattern: 'b' }, '"abc"'))?.passed).toBe(true);
    const named = { type: 'string', pattern: '^(?<year>\\d{4})-\\d\\d$' };
    expect((await check(named, '"2024-06"'))?.passed).toBe(true);
  });

  it.each([
    [{ type: 'string', pattern: '(?<=a)b' }, '/pattern'],
    [{ properties: { name: { pattern: '(a)\\1' } } }, '/properties/name/pattern'],
    [{ patternProperties: { '^(?!x)': {} } }, '/patternProperties/^(?!x)'],
    [
      { prefixItems: [{ const: { pattern: '(?=a)' } }, { pattern: '(?=a)' }] },
      '/prefixItems/1/pattern',
    ],
    [{ $ref: '#/$defs/a~1b', $defs: { 'a/b': { pattern: 'x(?!y)' } } }, '/$defs/a~1b/pattern'],
  ])('refuses %j at bind, naming the pattern by its JSON pointer %s', (schema, pointer) => {
    const err = bindError({ schema });
    expect(isTouchstoneError(err)).toBe(true);
    if (!isTouchstoneError(err)) return;
    expect(err.kind).toBe('invalid_argument');
    expect(err.details[0]?.path).toBe('schema');
    expect(err.message).toContain(`the pattern at ${pointer} uses syntax RE2 cannot run`);
  });

  it('binds the same $id twice (one compiler per bind)', () => {
    const schema = { $id: 'https://example.com/s', type: 'object' };
    expect(bindError({ schema })).toBeUndefined();
    expect(bindError({ schema })).toBeUndefined();
  });
});
