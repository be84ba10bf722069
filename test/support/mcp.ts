/**
 * A listening server for the tool-protocol tests: auth on, access rules on tools, one agent
 * trace in project p1, and keys per role (plus a scoped key and a key of a ruled project).
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { context, type Tracer, trace } from '@opentelemetry/api';
import { OPEN_PRINCIPAL, ROLES, type Role } from '../../src/auth/index.js';
import { type TestApp, testApp } from './app.js';
import { agentTrace, jsonBody, recordSpans } from './otel.js';

export interface McpFixture {
  t: TestApp;
  url: string;
  /** An API key of p1 per role. */
  keys: Record<Role, string>;
  /** A viewer of p1 whose scope holds only the service `elsewhere` (not the trace's `agent`). */
  scopedOut: string;
  /** An owner of project `ruled`, whose tools the rules hide. */
  ruled: string;
  traceId: string;
  close(): Promise<void>;
}

/** The access rules of the fixture: one by tool name, one by a tool argument. */
export const TOOL_RULES = [
  { effect: 'deny', when: 'principal.project == "ruled" && mcp.tool.name == "get_trace"' },
  {
    effect: 'deny',
    when: 'mcp.tool.name == "search_traces" && "service" in mcp.tool.arguments && mcp.tool.arguments.service == "secret-service"',
  },
] as const;

/**
 * An agent trace of `steps` tool calls whose root output is `outputChars` long (the fixture's
 * attribute limit keeps it whole), for the size bounds.
 */
export function bigTrace(tracer: Tracer, steps: number, outputChars: number): string {
  let id = '';
  tracer.startActiveSpan(
    'agent',
    {
      attributes: {
        'openinference.span.kind': 'AGENT',
        'input.value': 'summarize the logs',
        'output.value': 'o'.repeat(outputChars),
      },
    },
    (root) => {
      id = root.spanContext().traceId;
      const parent = trace.setSpan(context.active(), root);
      for (let i = 0; i < steps; i++) {
        const attributes = {
          'openinference.span.kind': 'TOOL',
          'tool.name': 'read_log',
          'input.value': `{"chunk": ${i}}`,
          'output.value': 'l'.repeat(2_000),
        };
        tracer.startSpan(`read_log ${i}`, { attributes }, parent).end();
      }
      root.end();
    },
  );
  return id;
}

/** Sends the spans `build` records over OTLP and waits until the trace is stored (completed). */
export async function storedTrace(
  t: TestApp,
  project: string,
  ingestKey: string,
  build: (tracer: Tracer) => string = (tracer) => agentTrace(tracer, { fail: false }),
  service = 'agent',
): Promise<string> {
  let id = '';
  const spans = recordSpans({ 'service.name': service }, (tracer) => {
    id = build(tracer);
  });
  const sent = await t.app.server.inject({
    method: 'POST',
    url: '/v1/traces',
    payload: jsonBody(spans),
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ingestKey}` },
  });
  if (sent.statusCode !== 200) throw new Error(`ingest failed: ${sent.body}`);
  for (let i = 0; i < 100 && (await t.app.store.traces.get(project, id)) === undefined; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    await t.app.completer.tick();
  }
  return id;
}

export async function mcpFixture(overrides: Record<string, unknown> = {}): Promise<McpFixture> {
  const t = await testApp({
    listen: '127.0.0.1:0',
    auth: { rules: TOOL_RULES },
    // Large enough for the 1 MB outputs of the size-bound tests.
    traces: { completion_grace: '100ms', max_attribute_bytes: 2 * 1024 * 1024 },
    ...overrides,
  });
  const address = await t.app.listen();
  const keys = {} as Record<Role, string>;
  for (const role of ROLES) {
    keys[role] = (
      await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: [role], name: role })
    ).secret;
  }
  const scopedOut = (
    await t.app.keys.create(OPEN_PRINCIPAL, {
      project: 'p1',
      roles: ['viewer'],
      scope: { services: ['elsewhere'] },
    })
  ).secret;
  const ruled = (await t.app.keys.create(OPEN_PRINCIPAL, { project: 'ruled', roles: ['owner'] }))
    .secret;
  const traceId = await storedTrace(t, 'p1', keys.ingest);
  const port = address.split(':').pop() as string;
  return {
    t,
    url: `http://localhost:${port}/mcp`,
    keys,
    scopedOut,
    ruled,
    traceId,
    close: () => t.close(),
  };
}

/** The SDK's own client, connected to `url` with `key`. */
export async function sdkClient(url: string, key: string | undefined): Promise<Client> {
  const client = new Client({ name: 'touchstone-tests', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: key === undefined ? {} : { authorization: `Bearer ${key}` } },
    }),
  );
  return client;
}

/** The text of a tool result's first content item. */
export function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content[0]?.text ?? '';
}

/** A tool result's JSON. */
export function jsonOf<T = Record<string, unknown>>(result: unknown): T {
  return JSON.parse(textOf(result)) as T;
}
