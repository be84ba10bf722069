import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local OpenAI-compatible chat-completions endpoint for run targets (no hosted model runs on the
 * test machines). `answer` decides each reply from the request's last user message and how many
 * times that same conversation was asked before, so a test can script per-trial outcomes that do
 * not depend on the order in which a run's calls arrive.
 */

export interface StubRequest {
  url: string;
  headers: IncomingHttpHeaders;
  body: { model?: string; messages?: { role: string; content: unknown }[]; [k: string]: unknown };
}

export interface StubAnswer {
  /** The assistant's text; `null` sends `"content": null` (as OpenAI does beside tool calls). */
  content?: string | null;
  /** Tool calls of the assistant message (sent as `tool_calls`, even when empty). */
  toolCalls?: { id: string; name: string; arguments: string }[];
  /** The model named in the answer (the served model); default: the model asked for. */
  servedModel?: string;
  /** An HTTP error status instead of a completion. */
  status?: number;
  /** Sent with an error status. */
  retryAfter?: string;
  /** A raw body instead of a completion. */
  raw?: string;
  delayMs?: number;
}

export type AnswerFn = (
  lastUser: string,
  seen: number,
  request: StubRequest,
) => StubAnswer | string;

function assistantMessage(a: StubAnswer): Record<string, unknown> {
  const message: Record<string, unknown> = { role: 'assistant', content: a.content ?? '' };
  if (a.toolCalls !== undefined) {
    message.tool_calls = a.toolCalls.map((c) => ({
      id: c.id,
      type: 'function',
      function: { name: c.name, arguments: c.arguments },
    }));
  }
  return message;
}

export class OpenAiStub {
  readonly requests: StubRequest[] = [];
  private readonly seen = new Map<string, number>();
  private server: Server | undefined;
  /** Completions sent (200 answers that reached an open connection). */
  answered = 0;
  answer: AnswerFn = (lastUser) => `echo: ${lastUser}`;

  constructor(answer?: AnswerFn) {
    if (answer) this.answer = answer;
  }

  async start(host = '127.0.0.1'): Promise<string> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        let body: StubRequest['body'] = {};
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          res.writeHead(400).end('{"error":"bad json"}');
          return;
        }
        const request = { url: req.url ?? '', headers: req.headers, body };
        this.requests.push(request);
        if (req.url !== '/v1/chat/completions') {
          res.writeHead(404).end('{"error":"not found"}');
          return;
        }
        const messages = body.messages ?? [];
        const key = JSON.stringify(messages);
        const count = this.seen.get(key) ?? 0;
        this.seen.set(key, count + 1);
        const lastUser = [...messages].reverse().find((m) => m.role === 'user');
        const text = typeof lastUser?.content === 'string' ? lastUser.content : '';
        const raw = this.answer(text, count, request);
        const a: StubAnswer = typeof raw === 'string' ? { content: raw } : raw;
        const send = () => {
          if (res.destroyed) return;
          if (a.raw !== undefined) {
            res.writeHead(a.status ?? 200, { 'content-type': 'text/plain' }).end(a.raw);
            return;
          }
          if (a.status !== undefined && a.status !== 200) {
            const headers: Record<string, string> = { 'content-type': 'application/json' };
            if (a.retryAfter !== undefined) headers['retry-after'] = a.retryAfter;
            res.writeHead(a.status, headers).end('{"error":{"message":"scripted failure"}}');
            return;
          }
          this.answered += 1;
          res.writeHead(200, { 'content-type': 'application/json' }).end(
            JSON.stringify({
              id: `chatcmpl-${this.requests.length}`,
              object: 'chat.completion',
              model: a.servedModel ?? body.model ?? 'stub-model',
              choices: [
                {
                  index: 0,
                  message: assistantMessage(a),
                  finish_reason: a.toolCalls?.length ? 'tool_calls' : 'stop',
                },
              ],
              usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 },
            }),
          );
        };
        if (a.delayMs !== undefined) setTimeout(send, a.delayMs);
        else send();
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, host, resolve));
    const { port } = this.server.address() as AddressInfo;
    return `http://${host}:${port}/v1`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }
}
