import { describe, expect, it } from 'vitest';
import { llmStep, scoresOf, skipOf, toolStep } from './evaluate.testkit.js';
import { toolErrors } from './tool-errors.js';

describe('tool-errors', () => {
  it('is the share of tool steps with an error, naming tools but not errors', async () => {
    const trajectory = [
      llmStep(),
      toolStep('search', '{}'),
      toolStep('fetch', '{}', 'HTTP 500 from https://internal/secret-path'),
      toolStep('fetch', '{}', 'timeout'),
      toolStep('calc', '{}'),
    ];
    const s = (await scoresOf(toolErrors, {}, { trajectory }))['tool-errors'];
    expect(s?.value).toBe(0.5);
    expect(s?.explanation).toBe('2 of 4 tool calls failed: fetch');
    expect(s?.explanation).not.toMatch(/secret|timeout/);
  });

  it('is 0 when every call succeeded; whitespace is no error', async () => {
    const s = await scoresOf(
      toolErrors,
      {},
      { trajectory: [toolStep('a'), toolStep('b', '', '  ')] },
    );
    expect(s['tool-errors']).toMatchObject({ value: 0, explanation: '0 of 2 tool calls failed' });
  });

  it('caps the list of names', async () => {
    const trajectory = Array.from({ length: 12 }, (_, i) => toolStep(`t${i}`, '', 'x'));
    const s = (await scoresOf(toolErrors, {}, { trajectory }))['tool-errors'];
    expect(s?.value).toBe(1);
    expect(s?.explanation).toMatch(/t9, and 2 more$/);
  });

  it('skips without tool calls', async () => {
    expect(await skipOf(toolErrors, {}, { trajectory: [llmStep()] })).toMatch(/no tool calls/);
  });
});
