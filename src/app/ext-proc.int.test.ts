import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import { freePort } from '../../test/support/process.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { connectClient, exchange, toolCall } from '../guardrails/ext-proc/gateway.testkit.js';

describe('the Envoy external processor in the app', () => {
  let t: TestApp;
  let address: string;
  let secret: string;
  beforeAll(async () => {
    address = `127.0.0.1:${await freePort()}`;
    t = await testApp({
      listen: '127.0.0.1:0',
      auth: {},
      guardrails: { ext_proc: { listen: address, policy: 'mcp-tools' } },
    });
    await t.app.listen();
    ({ secret } = await t.app.keys.create(OPEN_PRINCIPAL, {
      project: 'agents',
      roles: ['viewer'],
      name: 'gateway',
    }));
  });
  afterAll(() => t?.close());

  const initialize = JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: {} });
  const post = (metadata: Record<string, string>, body = initialize) =>
    exchange(connectClient, address, metadata, { method: 'POST', path: '/mcp', body });

  it('serves on guardrails.ext_proc.listen once the app listens, for a gateway with an API key', async () => {
    expect(await post({ authorization: `Bearer ${secret}` })).toMatchObject({ blocked: false });
  });

  it('refuses a gateway without a valid credential through the bearer path, naming why', async () => {
    for (const [metadata, why] of [
      [{}, 'missing credentials: send "authorization: Bearer <API key>" metadata'],
      [
        { authorization: 'Basic abc' },
        'malformed authorization metadata: expected "Bearer <API key>"',
      ],
      [{ authorization: 'Bearer tsk_nope' }, undefined],
    ] as const) {
      const out = await post(metadata);
      if (!out.blocked) throw new Error('forwarded without credentials');
      expect(out.status).toBe(503);
      const message = JSON.parse(out.text).error.message as string;
      expect(message).toMatch(/^guardrail refused the gateway's credentials: /);
      if (why !== undefined) expect(message).toContain(why);
      expect(message).not.toContain('tsk_nope');
    }
  });

  it("decides a tools/call by the project's stored GuardPolicy, as the gateway's principal", async () => {
    const key = { authorization: `Bearer ${secret}` };
    const call = (tool: string) => post(key, JSON.stringify(toolCall(1, tool, { id: 'x' })));
    // Before the policy exists, the named policy cannot be found: blocked, cannot decide.
    const missing = await call('get_trace');
    if (!missing.blocked) throw new Error('expected a block without the policy');
    expect(JSON.parse(missing.text).error.message).toBe(
      'guardrail could not decide: no guard policy "mcp-tools" in project "agents"',
    );
    await t.app.guardrails.service.apply(
      OPEN_PRINCIPAL,
      {
        apiVersion: 'touchstone.dev/v1alpha1',
        kind: 'GuardPolicy',
        metadata: { name: 'mcp-tools' },
        spec: {
          checks: [
            { type: 'cel', action: 'reject', condition: 'mcp.tool.name == "delete_everything"' },
          ],
        },
      },
      { project: 'agents' },
    );
    t.app.guardrails.engine.invalidate();
    expect(await call('get_trace')).toMatchObject({ blocked: false });
    const refused = await call('delete_everything');
    if (!refused.blocked) throw new Error('expected the policy to block the tool');
    expect(JSON.parse(refused.text).error.message).not.toMatch(/could not decide/);
  });
});
