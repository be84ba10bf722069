/**
 * @module mcp
 * The tool-protocol (MCP) surface: one tool registry served at `/mcp` (streamable HTTP,
 * stateless) and over stdio by `touchstone mcp`. Tools call the domain areas' application
 * functions as the caller, checked by its permissions and the access rules (which see
 * `mcp.tool.name` and `mcp.tool.arguments`); every result is bounded. Holds no business logic;
 * never imported by the domain areas.
 */
export { bound, RESULT_BUDGET_CHARS, RESULT_HARD_CAP_CHARS } from './bounds.js';
export { McpErrors } from './error-codes.js';
export {
  MAX_BATCH_MESSAGES,
  MCP_BODY_LIMIT,
  MCP_PATH,
  MCP_RESOURCE_METADATA_PATH,
  type McpHttpOptions,
  mcpRoutes,
} from './http.js';
export { type PostedAnswer, type PostMcp, serveStdio } from './stdio.js';
export { type McpServices, type McpTool, TOOLS } from './tools.js';
