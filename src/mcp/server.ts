import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  ListToolsRequestSchema,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { z } from 'zod';
import { authorize, type McpToolFacts, type Principal } from '../auth/index.js';
import {
  CoreErrors,
  describeDetails,
  issuesToDetails,
  isTouchstoneError,
  type TouchstoneError,
} from '../core/index.js';
import { bound } from './bounds.js';
import { findTool, type McpServices, type McpTool, shortName, TOOLS } from './tools.js';

/** What a request's log needs (a Fastify or pino logger). */
export interface McpLogger {
  error(obj: object, msg: string): void;
}

export const SERVER_INFO = { name: 'touchstone', version: '0.1.0' };

const INSTRUCTIONS =
  'Touchstone scores AI-agent traces. Start with whoami (projects and permissions), then search_traces, get_trace and get_trace_scores. Results are bounded: when an answer has `truncated`, follow its hint.';

/**
 * The SDK validates elicitation answers with it (this server asks none); one is shared, since
 * each server would otherwise build its own, the largest cost of a stateless request.
 */
const VALIDATOR = new AjvJsonSchemaValidator();

/** Problems named in one refusal; the rest are counted. */
const MAX_DETAILS = 10;

/** The JSON Schemas `tools/list` shows, made once: the registry does not change. */
const LISTED = new Map<string, Tool>(
  TOOLS.map((t) => [
    t.name,
    {
      name: t.name,
      title: t.title,
      description: t.description,
      inputSchema: z.toJSONSchema(t.input, {
        io: 'input',
        unrepresentable: 'any',
      }) as Tool['inputSchema'],
      annotations: { title: t.title, ...t.annotations },
    },
  ]),
);

/**
 * Why `principal` may not use `tool` with `args` (undefined: it may): its permission, then the
 * access rules with `mcp.tool.name` and `mcp.tool.arguments` (the empty map when listing).
 * `whoami` needs neither.
 */
function refusalOf(
  principal: Principal,
  tool: McpTool,
  args: Record<string, unknown>,
): TouchstoneError | undefined {
  if (tool.permission === undefined) return undefined;
  const project = typeof args.project === 'string' ? args.project : undefined;
  try {
    authorize(principal, tool.permission, project, { mcp: { name: tool.name, arguments: args } });
    return undefined;
  } catch (err) {
    if (isTouchstoneError(err)) return err;
    throw err;
  }
}

/**
 * The principal a tool acts as: the caller, with the access rules seeing the tool on every check
 * the services make for it (a rule on `mcp.tool.name` applies to the reads the tool does).
 */
function actingThrough(principal: Principal, tool: McpToolFacts): Principal {
  const rules = principal.rules;
  if (rules === undefined) return principal;
  return {
    ...principal,
    rules: {
      check: (p, action, project, resource = {}) =>
        rules.check(p, action, project, { ...resource, mcp: tool }),
    },
  };
}

/** What the audit trail names as the resource of a tool call. */
const MCP_RESOURCE = '/mcp';

function isDenial(err: unknown): boolean {
  return (
    isTouchstoneError(err) && (err.kind === 'permission_denied' || err.kind === 'unauthenticated')
  );
}

function textResult(text: string, isError = false): CallToolResult {
  return { content: [{ type: 'text', text }], ...(isError ? { isError: true } : {}) };
}

/** The one answer for a tool that does not exist and one the caller may not see. */
function notFound(name: string): CallToolResult {
  return textResult(`tool ${shortName(name)} not found`, true);
}

function invalidArguments(tool: McpTool, issues: readonly z.core.$ZodIssue[]): CallToolResult {
  const details = issuesToDetails(issues).map((d) => ({ ...d, path: shortName(d.path) }));
  const more = details.length > MAX_DETAILS ? ` (and ${details.length - MAX_DETAILS} more)` : '';
  return textResult(
    `invalid arguments for ${tool.name}: ${describeDetails(details.slice(0, MAX_DETAILS))}${more}`,
    true,
  );
}

/** A refusal the model can act on: the error's code and message (safe by construction). */
function failure(err: unknown, log: McpLogger, requestId: string): CallToolResult {
  if (isTouchstoneError(err)) {
    const details = err.details
      .slice(0, MAX_DETAILS)
      .map((d) => ({ ...d, path: shortName(d.path) }));
    const named = details.length === 0 ? '' : ` (${describeDetails(details)})`;
    return textResult(`${err.code}: ${err.message}${named}`, true);
  }
  log.error({ err, requestId }, 'tool call failed');
  return textResult(`internal error (request id ${requestId})`, true);
}

/**
 * A tool-protocol server for one caller: `tools/list` shows the tools it may use, `tools/call`
 * runs one as that caller or answers "not found" alike for an unknown tool and one it may not
 * use. Permission and rules are checked in the handler, per call, so each message of a JSON-RPC
 * batch is checked on its own.
 */
export function createMcpServer(
  principal: Principal,
  services: McpServices,
  log: McpLogger,
  requestId: string,
): Server {
  /** Tool writes and refusals, in the audit trail as REST's are (never the arguments). */
  const audit = (tool: McpTool, args: Record<string, unknown>, err: unknown) => {
    const project = typeof args.project === 'string' ? args.project : principal.project;
    const code = isTouchstoneError(err)
      ? err.code
      : err === undefined
        ? undefined
        : CoreErrors.INTERNAL.code;
    services.audit?.record({
      principal: principal.id,
      principalKind: principal.kind,
      action: `MCP ${tool.name}`,
      resource: MCP_RESOURCE,
      ...(project === undefined ? {} : { project: shortName(project) }),
      outcome: err === undefined ? 'ok' : isDenial(err) ? 'denied' : 'failed',
      status: 200,
      ...(code === undefined ? {} : { code }),
      requestId,
    });
  };
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: { listChanged: false } },
    instructions: INSTRUCTIONS,
    jsonSchemaValidator: VALIDATOR,
  });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: TOOLS.filter((t) => refusalOf(principal, t, {}) === undefined).map(
      (t) => LISTED.get(t.name) as Tool,
    ),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const { name } = request.params;
    const args = request.params.arguments ?? {};
    const tool = findTool(name);
    if (tool === undefined) return notFound(name);
    const refused = refusalOf(principal, tool, args);
    if (refused !== undefined) {
      audit(tool, args, refused);
      return notFound(name);
    }
    const parsed = tool.input.safeParse(args);
    if (!parsed.success) return invalidArguments(tool, parsed.error.issues);
    try {
      const caller = actingThrough(principal, { name: tool.name, arguments: args });
      const answer = await tool.run(caller, services, parsed.data);
      if (!tool.annotations.readOnlyHint) audit(tool, args, undefined);
      return textResult(bound(answer.value, answer).text);
    } catch (err) {
      if (!tool.annotations.readOnlyHint || isDenial(err)) audit(tool, args, err);
      return failure(err, log, requestId);
    }
  });
  return server;
}
