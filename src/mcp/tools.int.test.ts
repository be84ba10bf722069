import { createMCPClient } from '@ai-sdk/mcp';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bigTrace,
  jsonOf,
  type McpFixture,
  mcpFixture,
  sdkClient,
  storedTrace,
  textOf,
} from '../../test/support/mcp.js';
import { OPEN_PRINCIPAL } from '../auth/index.js';
import { RESULT_BUDGET_CHARS, RESULT_HARD_CAP_CHARS } from './bounds.js';
import { TOOLS } from './tools.js';

const ALL_TOOLS = [
  'whoami',
  'search_traces',
  'get_trace',
  'get_trace_scores',
  'list_scores',
  'score_trends',
  'list_evaluators',
  'evaluate',
  'create_run',
  'get_run',
  'list_runs',
  'upload_dataset',
  'list_sources',
  'list_policies',
  'list_webhook_deliveries',
];

describe('/mcp with the SDK client (streamable HTTP, stateless)', () => {
  let f: McpFixture;
  let owner: Client;

  beforeAll(async () => {
    f = await mcpFixture();
    owner = await sdkClient(f.url, f.keys.owner);
    await f.t.app.webhooks.service.apply(OPEN_PRINCIPAL, {
      name: 'hook',
      project: 'p1',
      url: 'https://example.com/hook',
      events: ['trace.scored'],
    });
  });
  afterAll(async () => {
    await owner?.close();
    await f?.close();
  });

  it('initializes and lists every tool with its schema and annotations, in registry order', async () => {
    expect(owner.getServerVersion()?.name).toBe('touchstone');
    const { tools } = await owner.listTools();
    expect(tools.map((t) => t.name)).toEqual(ALL_TOOLS);
    for (const t of tools) {
      expect(t.inputSchema.type, t.name).toBe('object');
      expect(typeof t.annotations?.readOnlyHint, t.name).toBe('boolean');
      expect(typeof t.annotations?.destructiveHint, t.name).toBe('boolean');
      expect(typeof t.annotations?.idempotentHint, t.name).toBe('boolean');
      expect(t.annotations?.destructiveHint, t.name).toBe(false);
    }
    const getTrace = tools.find((t) => t.name === 'get_trace');
    expect(getTrace?.inputSchema.required).toEqual(['trace_id']);
  });

  it('whoami, search_traces, get_trace and get_trace_scores read as the caller', async () => {
    const me = jsonOf(await owner.callTool({ name: 'whoami', arguments: {} }));
    expect(me).toMatchObject({ kind: 'key', project: 'p1', roles: ['owner'] });

    const found = jsonOf<{ traces: { traceId: string; service: string }[] }>(
      await owner.callTool({ name: 'search_traces', arguments: { service: 'agent' } }),
    );
    expect(found.traces.map((t) => t.traceId)).toEqual([f.traceId]);

    const trace = jsonOf<{ trace: { traceId: string }; record: object; trajectory_steps: number }>(
      await owner.callTool({ name: 'get_trace', arguments: { trace_id: f.traceId } }),
    );
    expect(trace.trace.traceId).toBe(f.traceId);
    expect(trace.trajectory_steps).toBeGreaterThan(0);

    const scores = jsonOf(
      await owner.callTool({ name: 'get_trace_scores', arguments: { trace_id: f.traceId } }),
    );
    expect(scores).toMatchObject({ results: {} });
  });

  it('search_traces takes a CEL filter over each trace', async () => {
    const call = async (filter: string) =>
      jsonOf<{ traces: unknown[]; scanned: number }>(
        await owner.callTool({ name: 'search_traces', arguments: { filter } }),
      );
    const hit = await call('"get_weather" in tools');
    expect(hit.traces).toHaveLength(1);
    expect(hit.scanned).toBe(1);
    expect((await call('error')).traces).toHaveLength(0);
    // The root span's attributes, as policy selectors see them.
    expect(
      (await call('attributes["gen_ai.operation.name"] == "invoke_agent"')).traces,
    ).toHaveLength(1);
    const bad = await owner.callTool({ name: 'search_traces', arguments: { filter: 'tools.(' } });
    expect(bad.isError).toBe(true);
    expect(textOf(bad)).toMatch(/^POLICY_CEL_INVALID: .*filter/);
  });

  it('a scoped key sees only its traces through the tools', async () => {
    const scoped = await sdkClient(f.url, f.scopedOut);
    try {
      const found = jsonOf<{ traces: unknown[] }>(
        await scoped.callTool({ name: 'search_traces', arguments: {} }),
      );
      expect(found.traces).toEqual([]);
      const read = await scoped.callTool({ name: 'get_trace', arguments: { trace_id: f.traceId } });
      expect(read.isError).toBe(true);
      expect(textOf(read)).toMatch(/^TRACE_NOT_FOUND: /);
    } finally {
      await scoped.close();
    }
  });

  it('lists, evaluates, runs and uploads through the same services as REST', async () => {
    const evaluators = jsonOf<{ evaluators: { type: string }[] }>(
      await owner.callTool({ name: 'list_evaluators', arguments: { name: 'exact' } }),
    );
    expect(evaluators.evaluators.map((e) => e.type)).toContain('exact-match');

    const scored = jsonOf<{ results: { results: { outcome: string }[] }[] }>(
      await owner.callTool({
        name: 'evaluate',
        arguments: {
          evaluators: [{ ref: 'exact-match' }],
          records: [{ input: 'q', output: 'a', reference: 'a' }],
        },
      }),
    );
    expect(scored.results[0]?.results[0]?.outcome).toBe('OUTCOME_SCORED');
    const byTrace = await owner.callTool({
      name: 'evaluate',
      arguments: { evaluators: [{ ref: 'tool-errors' }], trace_ids: [f.traceId] },
    });
    expect(byTrace.isError, textOf(byTrace)).toBeFalsy();

    const uploaded = jsonOf<{ dataset: { path: string; records: number } }>(
      await owner.callTool({
        name: 'upload_dataset',
        arguments: { name: 'qa', rows: [{ input: 'q', output: 'a', reference: 'a' }] },
      }),
    );
    expect(uploaded.dataset.records).toBe(1);

    const spec = {
      name: 'from-tool',
      dataset: { path: uploaded.dataset.path },
      evaluators: [{ ref: 'exact-match' }],
    };
    const create = () =>
      owner.callTool({ name: 'create_run', arguments: { spec, idempotency_key: 'k-1' } });
    const first = jsonOf<{ run: { id: string } }>(await create());
    const again = jsonOf<{ run: { id: string } }>(await create());
    expect(again.run.id).toBe(first.run.id);
    const got = jsonOf<{ run: { id: string } }>(
      await owner.callTool({ name: 'get_run', arguments: { run_id: first.run.id } }),
    );
    expect(got.run.id).toBe(first.run.id);
    const runs = jsonOf<{ runs: { id: string }[] }>(
      await owner.callTool({ name: 'list_runs', arguments: {} }),
    );
    expect(runs.runs.map((r) => r.id)).toContain(first.run.id);

    for (const [name, key] of [
      ['list_sources', 'sources'],
      ['list_policies', 'policies'],
      ['list_scores', 'entries'],
    ] as const) {
      const listed = jsonOf(await owner.callTool({ name, arguments: {} }));
      expect(Array.isArray(listed[key]), name).toBe(true);
    }
    const deliveries = jsonOf(
      await owner.callTool({ name: 'list_webhook_deliveries', arguments: { webhook: 'hook' } }),
    );
    expect(deliveries).toEqual({ deliveries: [] });
    const trends = await owner.callTool({ name: 'score_trends', arguments: {} });
    expect(trends.isError, textOf(trends)).toBeFalsy();
  });

  it('arguments that do not match the schema are refused naming the field, not echoing it', async () => {
    const bad = await owner.callTool({
      name: 'get_trace',
      arguments: { trace_id: 42, step_limit: 100_000, ['x'.repeat(5000)]: 'y'.repeat(5000) },
    });
    expect(bad.isError).toBe(true);
    const text = textOf(bad);
    expect(text).toMatch(/^invalid arguments for get_trace: /);
    expect(text).toContain('trace_id');
    expect(text).toContain('step_limit');
    expect(text).not.toContain('y'.repeat(100));
    expect(text.length).toBeLessThan(1000);
  });

  it('an unknown tool and a tool the caller may not use get the same "not found"', async () => {
    const viewer = await sdkClient(f.url, f.keys.viewer);
    try {
      const listed = (await viewer.listTools()).tools.map((t) => t.name);
      expect(listed).not.toContain('create_run');
      expect(listed).not.toContain('upload_dataset');
      expect(listed).not.toContain('list_sources');
      const denied = await viewer.callTool({ name: 'create_run', arguments: { spec: {} } });
      const unknown = await viewer.callTool({ name: 'drop_tables', arguments: {} });
      expect(denied).toEqual({
        content: [{ type: 'text', text: 'tool create_run not found' }],
        isError: true,
      });
      expect(unknown).toEqual({
        content: [{ type: 'text', text: 'tool drop_tables not found' }],
        isError: true,
      });
    } finally {
      await viewer.close();
    }
  });

  it('access rules on mcp.tool.name hide a tool and refuse it as unknown', async () => {
    const ruled = await sdkClient(f.url, f.ruled);
    try {
      const listed = (await ruled.listTools()).tools.map((t) => t.name);
      expect(listed).not.toContain('get_trace');
      expect(listed).toContain('search_traces');
      const refused = await ruled.callTool({
        name: 'get_trace',
        arguments: { trace_id: f.traceId },
      });
      expect(textOf(refused)).toBe('tool get_trace not found');
    } finally {
      await ruled.close();
    }
  });

  it('access rules on mcp.tool.arguments refuse only the calls they match', async () => {
    const hidden = await owner.callTool({
      name: 'search_traces',
      arguments: { service: 'secret-service' },
    });
    expect(textOf(hidden)).toBe('tool search_traces not found');
    const allowed = await owner.callTool({
      name: 'search_traces',
      arguments: { service: 'agent' },
    });
    expect(allowed.isError).toBeFalsy();
  });

  it('tool writes and refused tool calls are in the audit trail; reads and the POSTs are not', async () => {
    const viewer = await sdkClient(f.url, f.keys.viewer);
    try {
      await viewer.callTool({ name: 'upload_dataset', arguments: { name: 'x', rows: [{ a: 1 }] } });
    } finally {
      await viewer.close();
    }
    await f.t.app.audit.flush();
    const res = await f.t.app.server.inject({
      method: 'GET',
      url: '/v1alpha1/audit?page_size=1000',
      headers: { authorization: `Bearer ${f.keys.owner}` },
    });
    const entries = res.json().entries as { action: string; outcome: string; code?: string }[];
    const mcp = entries.filter((e) => e.action.startsWith('MCP ') || e.action.includes('/mcp'));
    expect(mcp).toContainEqual(
      expect.objectContaining({ action: 'MCP create_run', outcome: 'ok' }),
    );
    expect(mcp).toContainEqual(
      expect.objectContaining({
        action: 'MCP upload_dataset',
        outcome: 'denied',
        code: 'PERMISSION_DENIED',
      }),
    );
    expect(mcp.filter((e) => e.action === 'POST /mcp')).toEqual([]);
    expect(mcp.filter((e) => e.action === 'MCP get_trace' && e.outcome === 'ok')).toEqual([]);
  });

  it('every registry tool is exercised above', () => {
    expect(TOOLS.map((t) => t.name)).toEqual(ALL_TOOLS);
  });
});

describe('/mcp with an independent client (@ai-sdk/mcp)', () => {
  let f: McpFixture;
  beforeAll(async () => {
    f = await mcpFixture();
  });
  afterAll(async () => {
    await f?.close();
  });

  it('lists the tools and calls get_trace', async () => {
    const client = await createMCPClient({
      transport: {
        type: 'http',
        url: f.url,
        headers: { authorization: `Bearer ${f.keys.viewer}` },
      },
    });
    try {
      expect(client.serverInfo.name).toBe('touchstone');
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toContain('get_trace');
      const set = await client.tools();
      const result = await set.get_trace?.execute(
        { trace_id: f.traceId },
        { toolCallId: '1', messages: [] },
      );
      expect(jsonOf<{ trace: { traceId: string } }>(result).trace.traceId).toBe(f.traceId);
    } finally {
      await client.close();
    }
  });
});

describe('tool results stay within their size budget', () => {
  let f: McpFixture;
  let big = '';
  beforeAll(async () => {
    f = await mcpFixture();
    big = await storedTrace(
      f.t,
      'p1',
      f.keys.ingest,
      (tracer) => bigTrace(tracer, 500, 1_000_000),
      'big',
    );
  });
  afterAll(async () => {
    await f?.close();
  });

  it('get_trace of a 1 MB output and 500 steps: fields cut and marked, steps windowed and counted', async () => {
    const client = await sdkClient(f.url, f.keys.viewer);
    try {
      const result = await client.callTool({
        name: 'get_trace',
        arguments: { trace_id: big, include: ['output', 'trajectory'], step_limit: 100 },
      });
      const text = textOf(result);
      expect(text.length).toBeLessThanOrEqual(RESULT_BUDGET_CHARS);
      const v = JSON.parse(text);
      expect(v.record.output).toMatch(/…\[cut: \d+ chars\]$/);
      expect(v.trajectory.total).toBeGreaterThanOrEqual(500);
      expect(v.trajectory.omitted_after).toBe(v.trajectory.total - 100);
      expect(v.trajectory.next_step_offset).toBe(100);
      // The window itself was still too large: the list was shortened and the note says so.
      expect(v.truncated.lists[0]).toMatchObject({ path: 'trajectory.steps', total: 100 });
      expect(v.truncated.hint).toMatch(/step_limit/);

      const wide = await client.callTool({
        name: 'get_trace',
        arguments: { trace_id: big, include: ['output'], max_chars_per_field: 20_000 },
      });
      expect(textOf(wide).length).toBeLessThanOrEqual(RESULT_HARD_CAP_CHARS);
      expect(JSON.parse(textOf(wide)).record.output).toHaveLength(
        20_000 + '…[cut: 1000000 chars]'.length,
      );
    } finally {
      await client.close();
    }
  });
});
