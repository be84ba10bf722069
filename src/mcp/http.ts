import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isLoopbackHost } from '../config/index.js';
import { onDemand } from '../core/index.js';
import { McpErrors } from './error-codes.js';
import type { McpServices } from './tools.js';

export const MCP_PATH = '/mcp';
/** Where a client finds the identity providers that issue tokens for `/mcp` (RFC 9728). */
export const MCP_RESOURCE_METADATA_PATH = '/.well-known/oauth-protected-resource/mcp';
/** Largest JSON-RPC body `/mcp` reads: tool arguments are small (a dataset is at most 1 MiB). */
export const MCP_BODY_LIMIT = 2 * 1024 * 1024;
/** Messages in one JSON-RPC batch; each is checked and run on its own, so their number is capped. */
export const MAX_BATCH_MESSAGES = 32;

export interface McpHttpOptions {
  services: McpServices;
  /** `mcp.allowed_origins`: web origins (`https://host[:port]`) whose pages may call `/mcp`. */
  allowedOrigins: readonly string[];
  /** The server listens on loopback only: Host must name localhost (DNS-rebinding protection). */
  loopback: boolean;
  /** Issuers of `auth.oidc`; when any, 401s point at the protected-resource metadata. */
  issuers: readonly string[];
}

/**
 * The protocol SDK and the tool server (about 4 MB of heap), loaded at the first `/mcp` POST: a
 * server no agent talks to over the tool protocol never holds them.
 */
const loadProtocol = onDemand(() =>
  Promise.all([
    import('./server.js'),
    import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
  ]),
);

/** A host name without its port; `[::1]:4318` → `::1`. */
function hostName(host: string): string {
  const bracketed = /^\[([^\]]*)\]/.exec(host);
  if (bracketed !== null) return bracketed[1] as string;
  return host.split(':')[0] as string;
}

function originHost(origin: string): string | undefined {
  try {
    return new URL(origin).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return undefined;
  }
}

/**
 * DNS-rebinding protection: a page on another site that got its name to resolve to this server
 * sends that name as Host and its own Origin. On loopback, Host must name localhost; an Origin,
 * when sent (browsers do, other clients do not), must be listed or be a localhost page.
 */
function checkOrigin(request: FastifyRequest, options: McpHttpOptions): void {
  if (options.loopback && !isLoopbackHost(hostName(request.headers.host ?? ''))) {
    throw McpErrors.MCP_ORIGIN_REFUSED('the Host header must name localhost on a loopback server');
  }
  const origin = request.headers.origin;
  if (origin === undefined || options.allowedOrigins.includes(origin)) return;
  const host = originHost(origin);
  if (options.loopback && host !== undefined && isLoopbackHost(host)) return;
  throw McpErrors.MCP_ORIGIN_REFUSED(
    'requests from this web origin are refused; list it in mcp.allowed_origins to allow it',
  );
}

function baseUrl(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}`;
}

/**
 * The 401 challenge MCP clients read: with identity providers, where the protected-resource
 * metadata is (clients then sign in there); with API keys only, a plain realm, so clients do not
 * go looking for OAuth endpoints that do not exist.
 */
function challenge(request: FastifyRequest, options: McpHttpOptions): string {
  const parts = ['Bearer realm="touchstone"'];
  const sent = request.headers.authorization;
  if (sent !== undefined && sent !== '') parts.push('error="invalid_token"');
  if (options.issuers.length > 0) {
    parts.push(`resource_metadata="${baseUrl(request)}${MCP_RESOURCE_METADATA_PATH}"`);
  }
  return parts.join(', ');
}

/** A JSON-RPC error answer, as the protocol's own transport writes them. */
function rpcError(reply: FastifyReply, status: number, message: string) {
  return reply
    .code(status)
    .header('content-type', 'application/json')
    .send({ jsonrpc: '2.0', error: { code: -32000, message }, id: null });
}

/**
 * `/mcp`: the tool protocol over streamable HTTP, stateless (no session id: each POST carries
 * its own messages; GET and DELETE are answered 405 as the protocol says for such a server).
 * The caller is resolved by the same auth hook as REST; every message runs against a server
 * built for that caller.
 */
export async function mcpRoutes(app: FastifyInstance, options: McpHttpOptions): Promise<void> {
  app.addHook('onSend', async (request, reply) => {
    if (reply.statusCode === 401) reply.header('www-authenticate', challenge(request, options));
  });

  if (options.issuers.length > 0) {
    app.get(MCP_RESOURCE_METADATA_PATH, async (request) => ({
      resource: `${baseUrl(request)}${MCP_PATH}`,
      authorization_servers: options.issuers,
      bearer_methods_supported: ['header'],
      resource_name: 'Touchstone',
    }));
  }

  app.route({
    method: ['GET', 'DELETE'],
    url: MCP_PATH,
    handler: async (request, reply) => {
      checkOrigin(request, options);
      reply.header('allow', 'POST');
      return rpcError(reply, 405, 'Method not allowed: this server is stateless, send POST');
    },
  });

  app.post(MCP_PATH, { bodyLimit: MCP_BODY_LIMIT }, async (request, reply) => {
    checkOrigin(request, options);
    const body = request.body;
    if (Array.isArray(body) && body.length > MAX_BATCH_MESSAGES) {
      throw McpErrors.MCP_BATCH_TOO_LARGE(
        `a batch of ${body.length} messages; at most ${MAX_BATCH_MESSAGES} per request`,
      );
    }
    const [{ createMcpServer }, { StreamableHTTPServerTransport }] = await loadProtocol();
    const server = createMcpServer(request.principal, options.services, request.log, request.id);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    reply.hijack();
    reply.raw.setHeader('x-request-id', request.id);
    reply.raw.once('close', () => {
      void transport.close();
      void server.close();
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(request.raw, reply.raw, body);
    } catch (err) {
      request.log.error({ err }, 'tool-protocol request failed');
      if (!reply.raw.headersSent) {
        reply.raw.writeHead(500, { 'content-type': 'application/json' });
        reply.raw.end(
          JSON.stringify({
            jsonrpc: '2.0',
            error: { code: -32603, message: 'internal error' },
            id: null,
          }),
        );
      }
    }
  });
}
