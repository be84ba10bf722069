import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { MAX_BATCH_MESSAGES } from './http.js';

/** One HTTP answer of `/mcp`: its status and body text (empty for an accepted notification). */
export interface PostedAnswer {
  status: number;
  body: string;
}

/** Sends one JSON-RPC message to `/mcp` (the in-process server, or a remote one). */
export type PostMcp = (message: JSONRPCMessage) => Promise<PostedAnswer>;

/** A refusal of the HTTP edge (401, 403, 413, ...): its JSON error body's message. */
function refusalText(answer: PostedAnswer): string {
  try {
    const parsed = JSON.parse(answer.body) as { error?: { message?: unknown } };
    if (typeof parsed.error?.message === 'string') return parsed.error.message;
  } catch {
    // Not JSON: only the status is said.
  }
  return `the server answered HTTP ${answer.status}`;
}

function isJsonRpc(value: unknown): value is JSONRPCMessage {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { jsonrpc?: unknown }).jsonrpc === '2.0'
  );
}

/**
 * `touchstone mcp`: the tool protocol over stdin/stdout, each message handed to `/mcp` as one
 * POST, so stdio serves the same tools, checks and bounds as HTTP. Resolves when stdin ends.
 */
export async function serveStdio(
  post: PostMcp,
  streams: { stdin: NodeJS.ReadableStream; stdout: NodeJS.WritableStream },
): Promise<void> {
  const { StdioServerTransport } = await import('@modelcontextprotocol/sdk/server/stdio.js');
  const transport = new StdioServerTransport(streams.stdin as never, streams.stdout as never);
  const answer = async (message: JSONRPCMessage) => {
    const posted = await post(message);
    if (posted.body === '') return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(posted.body);
    } catch {
      parsed = undefined;
    }
    const replies = (Array.isArray(parsed) ? parsed : [parsed]).filter(isJsonRpc);
    if (replies.length > 0) {
      for (const reply of replies.slice(0, MAX_BATCH_MESSAGES)) await transport.send(reply);
      return;
    }
    if ('id' in message && 'method' in message) {
      await transport.send({
        jsonrpc: '2.0',
        id: message.id,
        error: { code: -32000, message: refusalText(posted) },
      });
    }
  };
  transport.onmessage = (message) => {
    answer(message).catch((err: unknown) => {
      transport.onerror?.(err instanceof Error ? err : new Error(String(err)));
    });
  };
  await new Promise<void>((resolve, reject) => {
    transport.onerror = (err) => reject(err);
    streams.stdin.once('end', resolve);
    streams.stdin.once('close', resolve);
    transport.start().catch(reject);
  });
  await transport.close();
}
