import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthErrors, OPEN_PRINCIPAL } from '../../auth/index.js';
import { JudgeConfigSchema } from '../../config/index.js';
import { createJudges } from '../../evaluators/index.js';
import { completion, FakeOpenAi } from '../../evaluators/judge/fake-openai.testkit.js';
import { createHttpClient } from '../../net/index.js';
import { GuardEngine } from '../engine.js';
import { CLIENTS, exchange, MCP_HEADERS, type Outcome, toolCall } from './gateway.testkit.js';
import { createExtProcServer, type ExtProcServer, POLICY_METADATA } from './server.js';

const CARD = '4111 1111 1111 1111';

/** The guard policies of project `default`, as the GuardPolicy resource stores them. */
const POLICIES: Record<string, Record<string, unknown>> = {
  'mcp-tools': {
    checks: [
      {
        name: 'deny-tools',
        type: 'cel',
        action: 'reject',
        condition: 'mcp.tool.name == "delete_everything"',
      },
      {
        name: 'needs-field',
        type: 'cel',
        action: 'reject',
        condition: 'mcp.tool.name == "unevaluable" && mcp.tool.arguments.missing == 1',
      },
      { name: 'cards', type: 'pii', action: 'mask' },
    ],
  },
  'mcp-tools-open': {
    failOpen: true,
    checks: [
      {
        name: 'needs-field',
        type: 'cel',
        action: 'reject',
        condition: 'mcp.tool.name == "unevaluable" && mcp.tool.arguments.missing == 1',
      },
    ],
  },
  judged: {
    deadline: '5s',
    checks: [
      {
        name: 'judge',
        type: 'judge',
        action: 'reject',
        rubric: 'The call is safe.',
        timeout: '5s',
      },
    ],
  },
};

const fakeJudge = new FakeOpenAi();
const http = createHttpClient();
const engine = () =>
  new GuardEngine({
    policies: {
      async get(project, name) {
        const spec = POLICIES[name];
        if (project !== 'default' || spec === undefined) return undefined;
        const resource = {
          apiVersion: 'touchstone.dev/v1alpha1',
          kind: 'GuardPolicy',
          metadata: { name },
          spec,
        };
        return { resource, generation: 1 };
      },
    },
    judges: createJudges(
      {
        main: JudgeConfigSchema.parse({
          endpoint: fakeJudge.endpoint,
          model: 'gpt-test',
          max_retries: 0,
        }),
      },
      { http, env: {} },
    ),
    defaultJudge: 'main',
  });

const KEY = 'tsk_gateway';

async function start(
  guard: GuardEngine,
  failOpen: boolean,
  policy?: string,
): Promise<ExtProcServer> {
  const server = createExtProcServer({
    host: '127.0.0.1',
    port: 0,
    maxStreams: 100,
    shutdownTimeoutMs: 1_000,
    guard,
    settings: {
      ...(policy === undefined ? {} : { policy }),
      failOpen,
      maxBodyBytes: 64 * 1024,
      maxBatch: 10,
      bodyTimeoutMs: 300,
      decisionTimeoutMs: 500,
    },
    authenticate: async (authorization) => {
      if (authorization !== `Bearer ${KEY}`) throw AuthErrors.UNAUTHENTICATED('unknown API key');
      return OPEN_PRINCIPAL;
    },
  });
  await server.start();
  return server;
}

const body = (json: unknown) => JSON.stringify(json);
const metadata = { authorization: `Bearer ${KEY}`, [POLICY_METADATA]: 'mcp-tools' };

function blocked(outcome: Outcome) {
  if (!outcome.blocked) throw new Error('expected the processor to block');
  return outcome;
}
function forwarded(outcome: Outcome) {
  if (outcome.blocked)
    throw new Error(`expected the exchange to pass, got ${outcome.status} ${outcome.text}`);
  return outcome;
}

describe.each(CLIENTS)('ext_proc over h2c, driven by %s', (_name, client) => {
  let closed: ExtProcServer;
  let open: ExtProcServer;
  beforeAll(async () => {
    await fakeJudge.start();
    const guard = engine();
    closed = await start(guard, false);
    open = await start(guard, true);
  });
  afterAll(async () => {
    await closed.stop();
    await open.stop();
    await fakeJudge.stop();
  });
  const post = (json: unknown, md: Record<string, string> = metadata, server = closed) =>
    exchange(client, server.address(), md, { method: 'POST', path: '/mcp', body: body(json) });

  it('passes an allowed tools/call unchanged through headers, body and response', async () => {
    const out = forwarded(await post(toolCall(1, 'get_trace', { id: 'abc' })));
    expect(JSON.parse(String(out.forwardedBody))).toEqual(toolCall(1, 'get_trace', { id: 'abc' }));
    expect(out.removedHeaders).toEqual([]);
  });

  it('passes methods other than tools/call without asking the guard, and a GET with no body', async () => {
    forwarded(
      await post(
        { jsonrpc: '2.0', id: 0, method: 'initialize', params: {} },
        { authorization: `Bearer ${KEY}` },
      ),
    );
    forwarded(await post({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    forwarded(await post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }));
    forwarded(await exchange(client, closed.address(), metadata, { method: 'GET', path: '/mcp' }));
  });

  it('blocks a denied tool with a JSON-RPC error an MCP client reads (HTTP 200, the call id)', async () => {
    const out = blocked(await post(toolCall(7, 'delete_everything', {})));
    expect(out.status).toBe(200);
    expect(out.headers['content-type']).toBe('application/json');
    expect(out.usedValue).toBe(false);
    expect(JSON.parse(out.text)).toEqual({
      jsonrpc: '2.0',
      id: 7,
      error: { code: -32001, message: 'blocked by guard policy "mcp-tools" (check "deny-tools")' },
    });
  });

  it('masks arguments by rewriting the body and dropping its content-length', async () => {
    const out = forwarded(await post(toolCall('a', 'create_issue', { text: `card ${CARD}` })));
    expect(JSON.parse(String(out.forwardedBody))).toEqual(
      toolCall('a', 'create_issue', { text: 'card [REDACTED]' }),
    );
    expect(out.removedHeaders).toEqual(['content-length']);
  });

  it('checks a batch per call: one blocked call blocks the batch, with an error for each id', async () => {
    const out = blocked(
      await post([
        toolCall(1, 'get_trace', {}),
        toolCall(2, 'delete_everything', {}),
        { jsonrpc: '2.0', method: 'notifications/progress', params: {} },
      ]),
    );
    expect(out.status).toBe(200);
    expect(JSON.parse(out.text)).toEqual([
      {
        jsonrpc: '2.0',
        id: 1,
        error: { code: -32001, message: 'not sent: another call of this batch was blocked' },
      },
      {
        jsonrpc: '2.0',
        id: 2,
        error: {
          code: -32001,
          message: 'blocked by guard policy "mcp-tools" (check "deny-tools")',
        },
      },
    ]);
  });

  it('masks within a batch and passes a clean batch untouched', async () => {
    const batch = [toolCall(1, 'get_trace', {}), toolCall(2, 'note', { t: CARD })];
    const out = forwarded(await post(batch));
    expect(JSON.parse(String(out.forwardedBody))).toEqual([
      batch[0],
      toolCall(2, 'note', { t: '[REDACTED]' }),
    ]);
    const clean = forwarded(
      await post([toolCall(1, 'get_trace', {}), toolCall(2, 'list_runs', {})]),
    );
    expect(clean.removedHeaders).toEqual([]);
  });

  it('cannot decide (a judge past the decision deadline, no policy named) → 503 unless fail-open', async () => {
    fakeJudge.setDefault({ ...completion('{"reasoning":"fine","score":5}'), delayMs: 2_000 });
    const judged = { ...metadata, [POLICY_METADATA]: 'judged' };
    const slow = blocked(await post(toolCall(3, 'get_trace', {}), judged));
    expect(slow.status).toBe(200);
    expect(JSON.parse(slow.text)).toEqual({
      jsonrpc: '2.0',
      id: 3,
      error: { code: -32603, message: 'guardrail could not decide: no decision within 500 ms' },
    });
    const unnamed = blocked(
      await post(toolCall(4, 'get_trace', {}), { authorization: `Bearer ${KEY}` }),
    );
    expect(JSON.parse(unnamed.text).error.message).toBe(
      'guardrail could not decide: no guard policy named (gateway metadata or guardrails.ext_proc.policy)',
    );
    forwarded(await post(toolCall(3, 'get_trace', {}), judged, open));
    forwarded(await post(toolCall(4, 'get_trace', {}), { authorization: `Bearer ${KEY}` }, open));
  });

  it("the engine's cannot-decide (an unevaluable condition) blocks unless the policy fails open", async () => {
    const out = blocked(await post(toolCall(6, 'unevaluable', {})));
    const { error } = JSON.parse(out.text);
    expect(error.code).toBe(-32603);
    expect(error.message).toMatch(/^guardrail could not decide: check "needs-field"/);
    forwarded(
      await post(toolCall(6, 'unevaluable', {}), {
        ...metadata,
        [POLICY_METADATA]: 'mcp-tools-open',
      }),
    );
  });

  it('a policy the engine cannot find blocks with its plain-text reason', async () => {
    const out = blocked(
      await post(toolCall(5, 'get_trace', {}), { ...metadata, [POLICY_METADATA]: 'nope' }),
    );
    expect(JSON.parse(out.text).error).toEqual({
      code: -32603,
      message: 'guardrail could not decide: no guard policy "nope" in project "default"',
    });
  });

  it('refuses a gateway without valid credentials, even when failing open', async () => {
    for (const server of [closed, open]) {
      const out = blocked(
        await post(toolCall(1, 'get_trace', {}), { [POLICY_METADATA]: 'mcp-tools' }, server),
      );
      expect(out.status).toBe(503);
      expect(JSON.parse(out.text).error.message).toBe(
        "guardrail refused the gateway's credentials: unknown API key",
      );
    }
  });

  it('refuses a body over the cap (413), a body that is not JSON-RPC (400) and a batch over the cap', async () => {
    const big = blocked(await post(toolCall(1, 'get_trace', { pad: 'x'.repeat(70 * 1024) })));
    expect(big.status).toBe(413);
    expect(JSON.parse(big.text).error).toEqual({
      code: -32003,
      message: 'the request body is larger than 65536 bytes',
    });
    // Past the transport's own cap on one message too.
    const huge = blocked(await post(toolCall(1, 'get_trace', { pad: 'x'.repeat(400 * 1024) })));
    expect(huge.status).toBe(413);
    const bad = blocked(
      await exchange(client, closed.address(), metadata, {
        method: 'POST',
        path: '/mcp',
        body: '{"jsonrpc":',
      }),
    );
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.text).error).toEqual({
      code: -32700,
      message: 'the body is not valid JSON',
    });
    const many = blocked(
      await post(Array.from({ length: 11 }, (_, i) => toolCall(i, 'get_trace', {}))),
    );
    expect(JSON.parse(many.text).error.message).toBe('a batch holds at most 10 messages');
    const deep = blocked(
      await post(toolCall(1, 'get_trace', JSON.parse(`${'['.repeat(70)}${']'.repeat(70)}`))),
    );
    expect(JSON.parse(deep.text).error.message).toBe('the body nests deeper than 64 levels');
  });

  it('answers a client that is not an MCP client in plain text', async () => {
    const out = blocked(
      await exchange(client, closed.address(), metadata, {
        method: 'POST',
        path: '/upload',
        headers: { 'content-type': 'application/octet-stream' },
        body: Buffer.alloc(70 * 1024),
      }),
    );
    expect(out.status).toBe(413);
    expect(out.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(out.text).toBe('the request body is larger than 65536 bytes');
    // Not JSON and not sent as JSON: not MCP traffic, passed.
    forwarded(
      await exchange(client, closed.address(), metadata, {
        method: 'POST',
        path: '/upload',
        headers: { 'content-type': 'application/octet-stream' },
        body: 'raw bytes',
      }),
    );
  });

  it('a stream that never sends the announced body gets a bounded 408 refusal', async () => {
    const stream = client(closed.address(), metadata);
    const started = performance.now();
    stream.send({
      kind: 'requestHeaders',
      headers: [[':method', 'POST'], [':path', '/mcp'], ...Object.entries(MCP_HEADERS)],
      endOfStream: false,
    });
    expect((await stream.receive()) as { kind: string }).toMatchObject({ kind: 'requestHeaders' });
    const refusal = await stream.receive();
    expect(refusal).toMatchObject({ kind: 'immediateResponse', status: 408 });
    expect(JSON.parse((refusal as { text: string }).text).error.message).toBe(
      'the gateway sent no request body within 300 ms',
    );
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(await stream.receive()).toBe('end');
    stream.cancel();
  });

  it('a body sent in pieces (not buffered) blocks unless fail-open', async () => {
    for (const [server, expected] of [
      [closed, 'immediateResponse'],
      [open, 'requestBody'],
    ] as const) {
      const stream = client(server.address(), metadata);
      stream.send({
        kind: 'requestHeaders',
        headers: [[':method', 'POST'], ...Object.entries(MCP_HEADERS)],
        endOfStream: false,
      });
      await stream.receive();
      stream.send({ kind: 'requestBody', body: Buffer.from('{"jsonrpc"'), endOfStream: false });
      expect(await stream.receive()).toMatchObject({ kind: expected });
      stream.cancel();
    }
  });

  it('keeps serving after streams cancelled midway', async () => {
    for (let i = 0; i < 20; i++) {
      const stream = client(closed.address(), metadata);
      stream.send({
        kind: 'requestHeaders',
        headers: [[':method', 'POST'], ...Object.entries(MCP_HEADERS)],
        endOfStream: false,
      });
      stream.cancel();
    }
    forwarded(await post(toolCall(1, 'get_trace', {})));
  });
});
