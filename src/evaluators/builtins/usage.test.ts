import { describe, expect, it } from 'vitest';
import type { Step } from '../../core/index.js';
import { llmStep, scoresOf, skipOf, toolStep } from './evaluate.testkit.js';
import { cost, latency, tokenUsage } from './usage.js';

describe('latency', () => {
  it('reports usage.latencyMs', async () => {
    const s = await scoresOf(latency, {}, { usage: { latencyMs: 1234.5 } });
    expect(s).toEqual({ latency: { name: 'latency', value: 1234.5, explanation: '1234.5 ms' } });
  });

  it('checks thresholdMs, also given as CLI text', async () => {
    const ok = await scoresOf(latency, { thresholdMs: '2000' }, { usage: { latencyMs: 2000 } });
    expect(ok.within?.passed).toBe(true);
    const slow = await scoresOf(latency, { thresholdMs: 2000 }, { usage: { latencyMs: 2300 } });
    expect(slow.within).toMatchObject({
      passed: false,
      explanation: 'latency 2300 ms is above the maximum 2000 ms',
    });
  });

  it('skips without latency', async () => {
    expect(await skipOf(latency, {}, {})).toMatch(/latencyMs/);
    expect(await skipOf(latency, {}, { usage: { inputTokens: 3 } })).toMatch(/latencyMs/);
  });

  it('refuses a bad threshold, naming the field', () => {
    expect(latency.manifest.params.safeParse({ thresholdMs: '2s' }).error?.issues[0]?.path).toEqual(
      ['thresholdMs'],
    );
  });
});

describe('token-usage', () => {
  it("prefers the record's usage", async () => {
    const s = await scoresOf(
      tokenUsage,
      {},
      {
        usage: { inputTokens: 10, outputTokens: 5, totalTokens: 16 },
        trajectory: [llmStep({ inputTokens: 99, outputTokens: 99 })],
      },
    );
    expect(s.input_tokens?.value).toBe(10);
    expect(s.output_tokens?.value).toBe(5);
    expect(s.total_tokens?.value).toBe(16);
    expect(s.within).toBeUndefined();
  });

  it('sums LLM steps for figures the record lacks, and derives the total', async () => {
    const trajectory: Step[] = [
      llmStep({ inputTokens: 100, outputTokens: 20 }),
      { ...toolStep('search'), usage: { inputTokens: 1000 } },
      llmStep({ inputTokens: 150, outputTokens: 30 }),
      llmStep(),
    ];
    const s = await scoresOf(tokenUsage, {}, { usage: { latencyMs: 5 }, trajectory });
    expect(s.input_tokens?.value).toBe(250);
    expect(s.output_tokens?.value).toBe(50);
    expect(s.total_tokens?.value).toBe(300);
  });

  it('reports only what is known', async () => {
    const s = await scoresOf(tokenUsage, { maxTotalTokens: 10 }, { usage: { outputTokens: 7 } });
    expect(Object.keys(s)).toEqual(['output_tokens']);
  });

  it('checks maxTotalTokens', async () => {
    const s = await scoresOf(tokenUsage, { maxTotalTokens: 100 }, { usage: { totalTokens: 101 } });
    expect(s.within?.passed).toBe(false);
  });

  it('skips when no token count is known', async () => {
    expect(
      await skipOf(tokenUsage, {}, { usage: { latencyMs: 3 }, trajectory: [llmStep()] }),
    ).toMatch(/no token/);
  });
});

describe('cost', () => {
  it("reports the record's cost, else the sum over non-agent steps", async () => {
    expect((await scoresOf(cost, {}, { usage: { costUsd: 0.25 } })).cost?.value).toBe(0.25);
    const trajectory: Step[] = [
      { type: 'agent', name: 'agent', error: '', usage: { costUsd: 0.3 } },
      llmStep({ costUsd: 0.1 }),
      { ...toolStep('paid-api'), usage: { costUsd: 0.2 } },
    ];
    expect((await scoresOf(cost, {}, { trajectory })).cost?.value).toBeCloseTo(0.3);
  });

  it('checks maxUsd', async () => {
    const s = await scoresOf(cost, { maxUsd: 0.1 }, { usage: { costUsd: 0.25 } });
    expect(s.within).toMatchObject({
      passed: false,
      explanation: 'cost 0.25 USD is above the maximum 0.1 USD',
    });
  });

  it('skips without any cost', async () => {
    expect(await skipOf(cost, {}, { trajectory: [llmStep({ inputTokens: 1 })] })).toMatch(
      /no cost/,
    );
  });

  it('treats a zero cost as known', async () => {
    expect((await scoresOf(cost, {}, { usage: { costUsd: 0 } })).cost?.value).toBe(0);
  });
});
