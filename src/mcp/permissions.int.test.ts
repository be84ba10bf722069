import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type McpFixture, mcpFixture, sdkClient, textOf } from '../../test/support/mcp.js';
import { OPERATIONS } from '../api/openapi.js';
import { ROLE_PERMISSIONS, ROLES, type Role } from '../auth/index.js';
import { TOOLS } from './tools.js';

/** The REST operation each tool mirrors: the tool needs the permission that operation needs. */
const MIRRORS: Record<string, string> = {
  whoami: 'get /v1alpha1/whoami',
  search_traces: 'get /v1alpha1/traces',
  get_trace: 'get /v1alpha1/traces/{traceId}',
  get_trace_scores: 'get /v1alpha1/traces/{traceId}/scores',
  list_scores: 'get /v1alpha1/scores',
  score_trends: 'get /v1alpha1/scores:aggregate',
  list_evaluators: 'get /v1alpha1/evaluators',
  evaluate: 'post /v1alpha1/evaluate',
  create_run: 'post /v1alpha1/runs',
  get_run: 'get /v1alpha1/runs/{id}',
  list_runs: 'get /v1alpha1/runs',
  upload_dataset: 'post /v1alpha1/datasets/{name}/upload',
  list_sources: 'get /v1alpha1/sources',
  list_policies: 'get /v1alpha1/policies',
  list_webhook_deliveries: 'get /v1alpha1/webhooks/{name}/deliveries',
};

/** Arguments each tool accepts (a call the caller may make runs; what it finds does not matter). */
function argsOf(tool: string, traceId: string): Record<string, unknown> {
  switch (tool) {
    case 'get_trace':
    case 'get_trace_scores':
      return { trace_id: traceId };
    case 'evaluate':
      return { evaluators: [{ ref: 'exact-match' }], records: [{ output: 'a', reference: 'a' }] };
    case 'create_run':
      return {
        spec: { dataset: { records: [{ input: 'q' }] }, evaluators: [{ ref: 'exact-match' }] },
        validate_only: true,
      };
    case 'get_run':
      return { run_id: 'run-that-does-not-exist' };
    case 'upload_dataset':
      return { name: 'matrix', rows: [{ input: 'q' }] };
    case 'list_webhook_deliveries':
      return { webhook: 'no-such-hook' };
    default:
      return {};
  }
}

describe('MCP tools × roles (API keys of each role)', () => {
  let f: McpFixture;
  const clients = {} as Record<Role, Client>;
  beforeAll(async () => {
    f = await mcpFixture();
    for (const role of ROLES) clients[role] = await sdkClient(f.url, f.keys[role]);
  });
  afterAll(async () => {
    for (const role of ROLES) await clients[role]?.close();
    await f?.close();
  });

  it('each tool needs the permission of the REST operation it mirrors', () => {
    expect(Object.keys(MIRRORS).sort()).toEqual(TOOLS.map((t) => t.name).sort());
    for (const tool of TOOLS) {
      const op = OPERATIONS.find((o) => `${o.method} ${o.path}` === MIRRORS[tool.name]);
      expect(op, tool.name).toBeDefined();
      expect(op?.access, tool.name).toBe(tool.permission ?? 'any-key');
    }
  });

  it('no tool writes secrets or acts as an administrator', () => {
    const forbidden = ['sources.write', 'webhooks.write', 'keys.read', 'keys.write', 'runs.delete'];
    for (const tool of TOOLS) expect(forbidden, tool.name).not.toContain(tool.permission);
  });

  for (const role of ROLES) {
    it(`${role}: tools/list shows exactly the tools it may call, the rest are "not found"`, async () => {
      const may = TOOLS.filter(
        (t) => t.permission === undefined || ROLE_PERMISSIONS[role].has(t.permission),
      ).map((t) => t.name);
      const listed = (await clients[role].listTools()).tools.map((t) => t.name);
      expect(listed).toEqual(may);
      for (const tool of TOOLS) {
        const result = await clients[role].callTool({
          name: tool.name,
          arguments: argsOf(tool.name, f.traceId),
        });
        const text = textOf(result);
        if (may.includes(tool.name)) {
          expect(text, `${role} ${tool.name}`).not.toBe(`tool ${tool.name} not found`);
          expect(text, `${role} ${tool.name}`).not.toMatch(/^invalid arguments/);
        } else {
          expect(text, `${role} ${tool.name}`).toBe(`tool ${tool.name} not found`);
        }
      }
    });
  }
});
