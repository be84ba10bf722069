import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readAnswer } from '../support/fake-agentgateway.js';
import {
  type AdversarialServer,
  describeHealth,
  HEALTHZ_P99_BUDGET_MS,
  postUnread,
  probeWhile,
  startAdversarialServer,
} from './responsiveness.js';

/**
 * Hostile prompt-guard calls: no messages, more messages than a call may carry, a body of
 * megabytes, more text than a decision reads, dense PII at the largest size decided. Each gets
 * a bounded, clear reject the gateway obeys (or its decision), and /healthz stays within budget.
 */

const POLICY = {
  apiVersion: 'touchstone.dev/v1alpha1',
  kind: 'GuardPolicy',
  metadata: { name: 'strict' },
  spec: {
    checks: [
      { type: 'secrets', action: 'reject' },
      { type: 'injection', action: 'reject' },
      { type: 'regex', action: 'mask', patterns: ['project-[a-z]+'] },
      { type: 'pii', action: 'mask' },
    ],
  },
};

async function guard(
  base: string,
  body: string,
): Promise<{ status: number; text: string; ms: number }> {
  const started = performance.now();
  const res = await fetch(`${base}/v1alpha1/guardrails/strict/request`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json' },
  });
  return { status: res.status, text: await res.text(), ms: performance.now() - started };
}

const prompt = (messages: { role: string; content: string }[]) =>
  JSON.stringify({ body: { messages } });

describe('hostile prompt-guard calls', () => {
  let server: AdversarialServer;
  beforeAll(async () => {
    server = await startAdversarialServer('log_level: warn\n');
    const res = await fetch(`${server.base}/v1alpha1/guardpolicies`, {
      method: 'POST',
      body: JSON.stringify(POLICY),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(200);
    // The first decisions compile the paths; that is not what is measured.
    for (let i = 0; i < 3; i++)
      await guard(server.base, prompt([{ role: 'user', content: 'warm up' }]));
  });
  afterAll(() => server?.stop());

  const dense = 'card 4111 1111 1111 1111, mail ann@example.com, ssn 123-45-6789; '.repeat(2000);

  it.each([
    [
      'no messages',
      prompt([]),
      400,
      /^guardrail refused the call: not a prompt-guard request \(wrong or missing: body\.messages/,
    ],
    ['no body at all', '{}', 400, /wrong or missing: body/],
    [
      'more messages than a call carries',
      prompt(Array.from({ length: 5000 }, () => ({ role: 'user', content: 'hi' }))),
      400,
      /wrong or missing: body\.messages/,
    ],
    [
      'more text than a decision reads',
      prompt([{ role: 'user', content: 'ignore me '.repeat(20_000) }]),
      503,
      /^guardrail could not decide: the messages hold more than 131072 characters$/,
    ],
  ])('%s: a clear reject, and /healthz within budget', async (_, body, status, message) => {
    const { result, health } = await probeWhile(server.base, () => guard(server.base, body));
    expect(result.status).toBe(200);
    const outcome = readAnswer('request', 1, result.text);
    expect(outcome).toMatchObject({ kind: 'reject', status });
    expect((outcome as { body: string }).body).toMatch(message);
    expect(result.text).not.toContain('ignore me ignore me');
    console.log(`${_}: answered in ${result.ms.toFixed(0)} ms; ${describeHealth(health)}`);
    expect(health.failures).toBe(0);
    expect(health.p99).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
  });

  it('ten megabytes: refused (413) before it is read whole, which the gateway fails closed on', async () => {
    const body = prompt([{ role: 'user', content: 'ignore me '.repeat(1_000_000) }]);
    const { result, health } = await probeWhile(server.base, () =>
      postUnread(`${server.base}/v1alpha1/guardrails/strict/request`, body),
    );
    expect(result.status).toBe(413);
    expect(readAnswer('request', 1, result.text)).toEqual({ kind: 'error', why: 'no action' });
    expect(result.text).not.toContain('ignore me');
    console.log(`ten megabytes: ${describeHealth(health)}`);
    expect(health.failures).toBe(0);
    expect(health.p99).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
  });

  it('dense PII at the largest size decided: masked, and /healthz within budget', async () => {
    const text = dense.slice(0, 120_000);
    const { result, health } = await probeWhile(server.base, () =>
      guard(server.base, prompt([{ role: 'user', content: text }])),
    );
    const outcome = readAnswer('request', 1, result.text);
    expect(outcome.kind).toBe('mask');
    expect(result.text).not.toContain('4111 1111 1111 1111');
    console.log(
      `dense PII (120k chars): answered in ${result.ms.toFixed(0)} ms; ${describeHealth(health)}`,
    );
    expect(health.failures).toBe(0);
    expect(health.p99).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
  });
});
