import type { Command } from 'commander';
import type { PostMcp } from '../mcp/index.js';
import type { ApiClient } from './client.js';
import type { CliIO } from './io.js';
import { configFromFlags, type ServerFlags } from './serve.js';
import { remoteOrLocal } from './target.js';

interface McpFlags extends ServerFlags {
  server?: string;
}

const ACCEPT = 'application/json, text/event-stream';

function authorization(token: string | undefined): Record<string, string> {
  return token === undefined || token === '' ? {} : { authorization: `Bearer ${token}` };
}

/** Each message posted to a remote server's `/mcp` with the command's credential. */
function remotePost(client: ApiClient, path: string): PostMcp {
  return async (message) => {
    const res = await fetch(`${client.baseUrl}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: ACCEPT,
        ...authorization(client.bearer?.token),
      },
      body: JSON.stringify(message),
    });
    return { status: res.status, body: await res.text() };
  };
}

/**
 * `touchstone mcp`: the tool-protocol server over stdin/stdout, for clients that start it as a
 * command (Claude Code, Cursor). With `--server` (or TOUCHSTONE_SERVER) it calls that server's
 * `/mcp`; without, the API built in this process on the local data dir. Either way the
 * credential is TOUCHSTONE_API_KEY (or the `touchstone login` sign-in for that server), so the
 * tools act as that caller.
 */
export function mcpCommand(
  program: Command,
  io: CliIO,
  stdin: NodeJS.ReadableStream = process.stdin,
): void {
  program
    .command('mcp')
    .description('Serve the tool protocol (MCP) over stdio, with the same tools as /mcp.')
    .option(
      '--server <url>',
      'server URL or HOST:PORT (default: $TOUCHSTONE_SERVER; without one, the local data dir)',
    )
    .option('-c, --config <file>', 'YAML config file (local mode)')
    .option('--data-dir <dir>', 'data directory (local mode, default ./.touchstone)')
    .action(async (flags: McpFlags) => {
      const streams = { stdin, stdout: io.stdout };
      const { MCP_PATH, serveStdio } = await import('../mcp/index.js');
      await remoteOrLocal(
        flags,
        io,
        (client) => serveStdio(remotePost(client, MCP_PATH), streams),
        async () => {
          const { createApp } = await import('./local.js');
          const app = await createApp(configFromFlags(flags, io), { env: io.env });
          try {
            const headers = {
              'content-type': 'application/json',
              accept: ACCEPT,
              host: 'localhost',
              ...authorization(io.env.TOUCHSTONE_API_KEY),
            };
            await serveStdio(async (message) => {
              const res = await app.server.inject({
                method: 'POST',
                url: MCP_PATH,
                headers,
                payload: JSON.stringify(message),
              });
              return { status: res.statusCode, body: res.body };
            }, streams);
          } finally {
            await app.close();
          }
        },
      );
    });
}
