import { describe, expect, it } from 'vitest';
import { llmStep, scoresOf, skipOf, toolStep } from './evaluate.testkit.js';
import { loopDetection } from './loop-detection.js';

const run = async (trajectory: ReturnType<typeof toolStep>[], params: object = {}) =>
  (await scoresOf(loopDetection, params, { trajectory }))['loop-detection'];

describe('loop-detection', () => {
  it('allows maxRepeats identical calls in a row and fails one more', async () => {
    const call = () => toolStep('search', '{"q": "weather"}');
    expect((await run([call(), call()]))?.passed).toBe(true);
    const s = await run([call(), call(), call()]);
    expect(s).toMatchObject({
      passed: false,
      explanation: 'tool search called 3 times in a row with identical arguments (max 2)',
      metadata: { tool: 'search', repeats: 3 },
    });
    expect(s?.explanation).not.toContain('weather');
  });

  it('ignores non-tool steps between the calls', async () => {
    const call = () => toolStep('search', '{"q": 1}');
    expect((await run([call(), llmStep(), call(), llmStep(), call()]))?.passed).toBe(false);
  });

  it('compares JSON arguments canonically and text arguments up to whitespace', async () => {
    expect(
      (
        await run([
          toolStep('f', '{"a":1,"b":2}'),
          toolStep('f', '{ "b": 2, "a": 1 }'),
          toolStep('f', { a: 1, b: 2 }),
        ])
      )?.passed,
    ).toBe(false);
    expect(
      (await run([toolStep('f', 'ls  -la'), toolStep('f', 'ls -la'), toolStep('f', ' ls -la\n')]))
        ?.passed,
    ).toBe(false);
  });

  it('does not count different arguments, different tools or interrupted runs', async () => {
    expect(
      (await run([toolStep('f', '{"p":1}'), toolStep('f', '{"p":2}'), toolStep('f', '{"p":3}')]))
        ?.passed,
    ).toBe(true);
    expect(
      (
        await run([
          toolStep('f', '{}'),
          toolStep('g', '{}'),
          toolStep('f', '{}'),
          toolStep('f', '{}'),
        ])
      )?.passed,
    ).toBe(true);
  });

  it('honours maxRepeats, also as CLI text', async () => {
    const calls = [toolStep('f'), toolStep('f'), toolStep('f')];
    expect((await run(calls, { maxRepeats: 3 }))?.passed).toBe(true);
    expect((await run(calls.slice(0, 2), { maxRepeats: '1' }))?.passed).toBe(false);
    expect(
      loopDetection.manifest.params.safeParse({ maxRepeats: 0 }).error?.issues[0]?.path,
    ).toEqual(['maxRepeats']);
  });

  it('skips without tool calls', async () => {
    expect(await skipOf(loopDetection, {}, { trajectory: [llmStep()] })).toMatch(/no tool calls/);
  });
});
