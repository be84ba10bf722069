import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AdversarialServer,
  describeHealth,
  HEALTHZ_P99_BUDGET_MS,
  postUnread,
  probeWhile,
  startAdversarialServer,
} from './responsiveness.js';

/**
 * Hostile JSON-RPC at `/mcp`: each is refused (or answered) with a bounded, clear answer that
 * never echoes the input, and `/healthz` stays within budget while it runs.
 */

const ACCEPT = 'application/json, text/event-stream';

function call(id: number, name: string, args: unknown) {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } };
}

describe('hostile tool-protocol requests', () => {
  let s: AdversarialServer;
  beforeAll(async () => {
    s = await startAdversarialServer();
    // The first requests of a fresh process compile their code paths, and its start-up work
    // settles: neither is what is measured.
    for (let i = 0; i < 3; i++) {
      await post(JSON.stringify([call(1, 'whoami', {}), call(2, 'get_trace', { trace_id: 7 })]));
      await post(JSON.stringify(call(3, 'get_trace', { trace_id: 'x'.repeat(3 * 1024 * 1024) })));
      await post(JSON.stringify(Array.from({ length: 40 }, (_, i) => call(i, 'whoami', {}))));
    }
  });
  afterAll(async () => {
    await s?.stop();
  });

  const post = async (body: string | Uint8Array) => {
    const res = await fetch(`${s.base}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: ACCEPT },
      body,
    });
    return { status: res.status, text: await res.text() };
  };

  it('a 10 MB JSON-RPC body is refused (413) without being read into a tool', async () => {
    // Encoded before probing starts: the measure is the server's, not this process's encoding.
    const huge = Buffer.from(
      JSON.stringify(call(1, 'get_trace', { trace_id: 'A'.repeat(10 * 1024 * 1024) })),
    );
    const { result, health } = await probeWhile(s.base, () =>
      postUnread(`${s.base}/mcp`, huge, { accept: ACCEPT }),
    );
    expect(result.status).toBe(413);
    expect(result.text.length).toBeLessThan(2_000);
    expect(result.text).not.toContain('AAAAAAAA');
    expect(health.p99, describeHealth(health)).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
    expect(health.failures, describeHealth(health)).toBe(0);
  });

  it('a batch of 1,000 calls is refused whole, naming the cap', async () => {
    const batch = JSON.stringify(
      Array.from({ length: 1000 }, (_, i) =>
        call(i, 'search_traces', { filter: 'size(tools) > 0' }),
      ),
    );
    const { result, health } = await probeWhile(s.base, () => post(batch));
    expect(result.status).toBe(400);
    const body = JSON.parse(result.text) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('MCP_BATCH_TOO_LARGE');
    expect(body.error.message).toMatch(/at most 32/);
    expect(health.p99, describeHealth(health)).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
  });

  it('arguments that do not match the schema: each call refused by field, none echoed', async () => {
    const hostile = [
      // Wrong types and out-of-range numbers.
      { trace_id: 7, step_limit: 1e12, include: 'everything' },
      // A 1 MB unknown key.
      { trace_id: 't', ['k'.repeat(1024 * 1024)]: 1 },
      // Not an object at all.
      'get everything',
    ];
    const batch = JSON.stringify(hostile.map((args, i) => call(i, 'get_trace', args)));
    const { result, health } = await probeWhile(s.base, () => post(batch));
    expect(result.status).toBe(200);
    expect(result.text.length).toBeLessThan(10_000);
    expect(result.text).not.toContain('kkkkkkkk');
    const answers = JSON.parse(result.text) as {
      id: number;
      result?: { isError?: boolean; content: { text: string }[] };
      error?: { code: number; message: string };
    }[];
    expect(answers).toHaveLength(hostile.length);
    for (const a of answers) {
      // A tool-level refusal the model can act on, or a protocol error for a malformed call.
      const text = a.result?.content[0]?.text ?? a.error?.message ?? '';
      expect(a.result?.isError === true || a.error !== undefined, text).toBe(true);
      expect(text.length).toBeLessThan(2_000);
    }
    const first = answers.find((a) => a.id === 0)?.result?.content[0]?.text ?? '';
    expect(first).toMatch(/^invalid arguments for get_trace: /);
    expect(first).toContain('trace_id');
    expect(first).toContain('step_limit');
    expect(health.p99, describeHealth(health)).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
  });

  it('arguments nested 5,000 deep are refused, never a crash', async () => {
    const deep = `${'['.repeat(5_000)}${']'.repeat(5_000)}`;
    const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_trace","arguments":{"trace_id":${deep}}}}`;
    const { result, health } = await probeWhile(s.base, () => post(body));
    expect(result.text.length).toBeLessThan(2_000);
    if (result.status === 200) {
      expect(result.text).toMatch(/invalid arguments for get_trace: trace_id/);
    } else {
      expect(result.status).toBe(400);
    }
    expect(health.p99, describeHealth(health)).toBeLessThan(HEALTHZ_P99_BUDGET_MS);
    expect((await post(JSON.stringify(call(2, 'whoami', {})))).status).toBe(200);
  });
});
