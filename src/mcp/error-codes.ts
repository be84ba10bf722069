import { defineErrors } from '../core/index.js';

export const McpErrors = defineErrors({
  MCP_ARGUMENT_TOO_LARGE: {
    kind: 'invalid_argument',
    doc: 'A tool argument is over the size a tool call takes (an `evaluate` record over 64 KiB, `upload_dataset` rows over 1 MiB); send it with the REST API instead.',
  },
  MCP_BATCH_TOO_LARGE: {
    kind: 'invalid_argument',
    doc: 'A JSON-RPC batch posted to `/mcp` holds more messages than the server takes in one request (docs/mcp.md); send fewer per request.',
  },
  MCP_ORIGIN_REFUSED: {
    kind: 'permission_denied',
    doc: 'A request to `/mcp` came from a web page whose `Origin` is not in `mcp.allowed_origins`, or named a host other than localhost on a loopback server (DNS-rebinding protection).',
  },
});
