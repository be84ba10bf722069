import { describe, expect, it } from 'vitest';
import type { Step } from '../../core/index.js';
import { llmStep, scoresOf, toolStep } from './evaluate.testkit.js';
import { stepBudget } from './step-budget.js';

const trajectory: Step[] = [
  { type: 'agent', name: 'agent', error: '' },
  llmStep(),
  toolStep('a'),
  { type: 'retrieval', name: 'r', error: '' },
  llmStep(),
  toolStep('b'),
  toolStep('c'),
];

describe('step-budget', () => {
  it('counts LLM + tool steps and tool calls only', async () => {
    const s = await scoresOf(stepBudget, {}, { trajectory });
    expect(s).toEqual({
      steps: { name: 'steps', value: 5 },
      tool_calls: { name: 'tool_calls', value: 3 },
    });
  });

  it('checks maxSteps and maxToolCalls together', async () => {
    expect(
      (await scoresOf(stepBudget, { maxSteps: 5, maxToolCalls: 3 }, { trajectory })).within?.passed,
    ).toBe(true);
    const over = await scoresOf(stepBudget, { maxSteps: 4, maxToolCalls: '2' }, { trajectory });
    expect(over.within).toMatchObject({
      passed: false,
      explanation: 'steps 5 is above the maximum 4; tool calls 3 is above the maximum 2',
    });
    expect((await scoresOf(stepBudget, { maxToolCalls: 2 }, { trajectory })).within?.passed).toBe(
      false,
    );
  });

  it('scores a trajectory without model or tool steps as zero steps', async () => {
    const s = await scoresOf(
      stepBudget,
      { maxSteps: 0 },
      { trajectory: [{ type: 'agent', name: 'a', error: '' }] },
    );
    expect(s.steps?.value).toBe(0);
    expect(s.within?.passed).toBe(true);
  });

  it('refuses negative or fractional budgets, naming the field', () => {
    expect(stepBudget.manifest.params.safeParse({ maxSteps: -1 }).error?.issues[0]?.path).toEqual([
      'maxSteps',
    ]);
    expect(
      stepBudget.manifest.params.safeParse({ maxToolCalls: 1.5 }).error?.issues[0]?.path,
    ).toEqual(['maxToolCalls']);
  });
});
