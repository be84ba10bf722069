import { describe, expect, it } from 'vitest';
import { maskedBody, parseRpcBody, rejectCode } from './json-rpc.js';

const bytes = (s: string) => Buffer.from(s, 'utf8');
const parse = (json: unknown) => parseRpcBody(bytes(JSON.stringify(json)), 10);

describe('parseRpcBody', () => {
  it('reads a tools/call: method, id, tool name and arguments', () => {
    expect(
      parse({
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'gh_issue', arguments: { a: 1 } },
      }),
    ).toMatchObject({
      ok: true,
      batch: false,
      calls: [
        {
          index: 0,
          method: 'tools/call',
          hasId: true,
          id: 7,
          toolName: 'gh_issue',
          arguments: { a: 1 },
        },
      ],
    });
  });

  it('reads a batch of calls, notifications and client responses, with a leading BOM', () => {
    const body = `\ufeff${JSON.stringify([
      { jsonrpc: '2.0', id: 'a', method: 'tools/list' },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 3, result: {} },
    ])}`;
    const parsed = parseRpcBody(bytes(body), 10);
    expect(parsed).toMatchObject({
      ok: true,
      batch: true,
      calls: [
        { method: 'tools/list', hasId: true, id: 'a' },
        { method: 'notifications/initialized', hasId: false, id: null },
        { method: '', hasId: true, id: 3 },
      ],
    });
  });

  it.each([
    ['{"jsonrpc":', -32700, 'the body is not valid JSON'],
    ['[]', -32600, 'the batch is empty'],
    ['"text"', -32600, 'a JSON-RPC message must be an object'],
    ['{"id":1,"method":"x"}', -32600, 'a JSON-RPC message must have "jsonrpc": "2.0"'],
    ['{"jsonrpc":"2.0","id":{},"method":"x"}', -32600, '"id" must be a string, a number or null'],
    ['{"jsonrpc":"2.0","id":1,"method":3}', -32600, '"method" must be a string'],
    [
      '{"jsonrpc":"2.0","id":1,"method":"tools/call"}',
      -32600,
      'tools/call needs "params" with the tool\'s "name"',
    ],
    [
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":""}}',
      -32600,
      'tools/call needs "params.name" (a string)',
    ],
    [
      '[{"jsonrpc":"2.0","method":"a"},1]',
      -32600,
      'message 1: a JSON-RPC message must be an object',
    ],
    [`{"a":${'['.repeat(65)}${']'.repeat(65)}}`, -32600, 'the body nests deeper than 64 levels'],
  ])('refuses %s naming what is wrong', (body, code, message) => {
    expect(parseRpcBody(bytes(body), 10)).toEqual({ ok: false, code, message });
  });

  it('counts nesting outside strings only', () => {
    const args = { s: `${'['.repeat(100)}"\\` };
    expect(
      parse({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 't', arguments: args } })
        .ok,
    ).toBe(true);
  });

  it('caps a batch', () => {
    const batch = Array.from({ length: 11 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'ping' }));
    expect(parse(batch)).toEqual({
      ok: false,
      code: -32600,
      message: 'a batch holds at most 10 messages',
    });
  });
});

describe('maskedBody', () => {
  it("replaces only the masked calls' arguments, keeping the other params and messages", () => {
    const messages = [
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'a', arguments: { t: 'x' }, _meta: { p: 1 } },
      },
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'b', arguments: { t: 'y' } } },
    ];
    const out = JSON.parse(
      String(maskedBody({ batch: true, messages }, new Map([[0, { t: '[REDACTED]' }]]))),
    );
    expect(out).toEqual([
      { ...messages[0], params: { name: 'a', arguments: { t: '[REDACTED]' }, _meta: { p: 1 } } },
      messages[1],
    ]);
  });
});

describe('rejectCode', () => {
  it("maps a reject's status to agentgateway's JSON-RPC codes", () => {
    expect([403, 400, 429, 503, 500].map(rejectCode)).toEqual([
      -32001, -32001, -32003, -32603, -32603,
    ]);
  });
});
