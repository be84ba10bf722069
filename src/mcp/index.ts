/**
 * @module mcp
 * The tool-protocol (MCP) surface: one tool registry served at `/mcp` (streamable HTTP,
 * stateless) and over stdio by `touchstone mcp`. Tools call the domain areas' application
 * functions as the caller, checked by its permissions and the access rules (which see
 * `mcp.tool.name` and `mcp.tool.arguments`); every result is bounded. Holds no business logic;
 * never imported by the domain areas.
 */
export { MCP_PATH, mcpRoutes } from './http.js';
export { type PostMcp, serveStdio } from './stdio.js';
