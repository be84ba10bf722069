import { describe, expect, it } from 'vitest';
import { llmStep, scoresOf, skipOf, toolStep } from './evaluate.testkit.js';
import { parseArguments } from './shared.js';
import { argumentsSatisfy, matchCalls, toolCallAccuracy } from './tool-call-accuracy.js';

const args = parseArguments;

describe('argumentsSatisfy', () => {
  it('matches pinned keys as a JSON subset', () => {
    expect(argumentsSatisfy(args({ city: 'Paris' }), args('{"units": "c", "city": "Paris"}'))).toBe(
      true,
    );
    expect(argumentsSatisfy(args({ city: 'Paris' }), args('{"city": "Lyon"}'))).toBe(false);
    expect(argumentsSatisfy(args({ city: 'Paris' }), args('{}'))).toBe(false);
    expect(argumentsSatisfy(args({ n: 1 }), args('{"n": 1.0}'))).toBe(true);
    expect(argumentsSatisfy(args({ o: { a: 1, b: 2 } }), args('{"o": {"b": 2, "a": 1}}'))).toBe(
      true,
    );
    expect(argumentsSatisfy(args({ o: { a: 1 } }), args('{"o": {"a": 1, "b": 2}}'))).toBe(false);
    expect(argumentsSatisfy(args({}), args('{"anything": true}'))).toBe(true);
  });

  it('compares non-object pins and malformed arguments whole', () => {
    expect(argumentsSatisfy(args('[1,2]'), args('[1, 2]'))).toBe(true);
    expect(argumentsSatisfy(args({ a: 1 }), args('{"a": 1'))).toBe(false);
    expect(argumentsSatisfy(args('raw  text'), args('raw text'))).toBe(true);
    expect(argumentsSatisfy(args({ a: 1 }), args('[{"a": 1}]'))).toBe(false);
  });
});

describe('matchCalls', () => {
  it('finds the largest pairing where greedy would not', () => {
    const expected = [{ name: 'f' }, { name: 'f', arguments: args({ x: 1 }) }];
    const actual = [
      { name: 'f', args: args({ x: 1 }) },
      { name: 'f', args: args({ x: 2 }) },
    ];
    expect(matchCalls(expected, actual)).toBe(2);
  });

  it('uses each call once', () => {
    expect(matchCalls([{ name: 'f' }, { name: 'f' }], [{ name: 'f', args: args('') }])).toBe(1);
  });
});

describe('tool-call-accuracy', () => {
  const reference = {
    toolCalls: [
      { name: 'get_weather', arguments: { city: 'Paris' } },
      { name: 'get_weather', arguments: { city: 'Lyon' } },
      { name: 'send_email' },
    ],
  };

  it('scores precision, recall and f1, order ignored', async () => {
    const trajectory = [
      toolStep('get_weather', '{"city": "Lyon", "units": "c"}'),
      llmStep(),
      toolStep('get_weather', '{"city": "Paris"}'),
      toolStep('search', '{"q": "x"}'),
    ];
    const s = await scoresOf(toolCallAccuracy, {}, { trajectory, reference });
    expect(s.precision?.value).toBeCloseTo(2 / 3);
    expect(s.recall?.value).toBeCloseTo(2 / 3);
    expect(s.f1?.value).toBeCloseTo(2 / 3);
    expect(s.f1?.explanation).toBe(
      '0.666667: 2 of 3 expected calls matched by 3 actual call(s); missing send_email: 1; unexpected search: 1',
    );
    expect(JSON.stringify(s)).not.toContain('Paris');
  });

  it('is perfect when every expected call is made once', async () => {
    const trajectory = [
      toolStep('send_email', '{"to": "x"}'),
      toolStep('get_weather', '{"city":"Paris"}'),
      toolStep('get_weather', '{"city":"Lyon"}'),
    ];
    const s = await scoresOf(toolCallAccuracy, {}, { trajectory, reference });
    expect([s.precision?.value, s.recall?.value, s.f1?.value]).toEqual([1, 1, 1]);
  });

  it('counts a call with wrong pinned arguments as neither precise nor recalled', async () => {
    const s = await scoresOf(
      toolCallAccuracy,
      {},
      {
        trajectory: [toolStep('get_weather', '{"city": "Rome"}')],
        reference: { tool_calls: [{ name: 'get_weather', arguments: '{"city":"Paris"}' }] },
      },
    );
    expect([s.precision?.value, s.recall?.value, s.f1?.value]).toEqual([0, 0, 0]);
    expect(s.f1?.explanation).toBe(
      '0: 0 of 1 expected calls matched by 1 actual call(s); 1 expected call(s) made with other arguments',
    );
  });

  it('scores zero precision when no tool was called', async () => {
    const s = await scoresOf(toolCallAccuracy, {}, { trajectory: [llmStep()], reference: ['a'] });
    expect([s.precision?.value, s.recall?.value, s.f1?.value]).toEqual([0, 0, 0]);
    expect(s.precision?.explanation).toBe('no tool calls were made');
  });

  it('picks the best reference candidate', async () => {
    const s = await scoresOf(
      toolCallAccuracy,
      {},
      {
        trajectory: [toolStep('b')],
        reference: [{ toolCalls: [{ name: 'a' }] }, { toolCalls: [{ name: 'b' }] }],
      },
    );
    expect(s.f1?.value).toBe(1);
  });

  it('skips when the reference names no tools', async () => {
    expect(
      await skipOf(toolCallAccuracy, {}, { trajectory: [toolStep('a')], reference: '42' }),
    ).toMatch(/no expected/);
  });
});
