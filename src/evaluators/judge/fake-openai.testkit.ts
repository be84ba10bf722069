import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local stand-in for an OpenAI-compatible endpoint (no hosted model runs on the test machines).
 * Each request takes the next scripted reply, or the default reply when the script is empty.
 * Test support only; imported by `*.test.ts` beside it.
 */

export interface Reply {
  status?: number;
  headers?: Record<string, string>;
  /** A string is sent as is; anything else as JSON. */
  body?: unknown;
  /** Wait before answering (a slow judge). */
  delayMs?: number;
}

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: unknown;
  receivedAt: number;
}

/** A chat completion whose message content is `content`. */
export function completion(
  content: string,
  usage: { prompt_tokens: number; completion_tokens: number } = {
    prompt_tokens: 11,
    completion_tokens: 7,
  },
): Reply {
  return {
    body: {
      id: 'chatcmpl-test',
      object: 'chat.completion',
      model: 'judge-model-2026',
      choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
      usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
    },
  };
}

export class FakeOpenAi {
  readonly requests: SeenRequest[] = [];
  private script: Reply[] = [];
  private defaultReply: Reply = completion('{"reasoning":"fine","score":4}');
  private inFlight = 0;
  /** Replies still pending from an earlier test must not count toward this test's figures. */
  private generation = 0;
  maxInFlight = 0;
  private server: Server | undefined;
  private port = 0;

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        let body: unknown = raw;
        try {
          body = raw === '' ? undefined : JSON.parse(raw);
        } catch {
          // Kept as text.
        }
        this.requests.push({
          method: req.method ?? '',
          url: req.url ?? '',
          headers: req.headers,
          body,
          receivedAt: Date.now(),
        });
        const reply = this.script.shift() ?? this.defaultReply;
        const generation = this.generation;
        this.inFlight += 1;
        this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
        const send = () => {
          if (generation === this.generation) this.inFlight -= 1;
          if (res.destroyed) return;
          const payload =
            typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body ?? {});
          res.writeHead(reply.status ?? 200, {
            'content-type': 'application/json',
            ...reply.headers,
          });
          res.end(payload);
        };
        if (reply.delayMs) setTimeout(send, reply.delayMs);
        else send();
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  /** Base URL as a judge's `endpoint`. */
  get endpoint(): string {
    return `http://127.0.0.1:${this.port}/v1`;
  }

  /** Replies for the next requests, in order. */
  reply(...replies: Reply[]): void {
    this.script.push(...replies);
  }

  setDefault(reply: Reply): void {
    this.defaultReply = reply;
  }

  reset(): void {
    this.requests.length = 0;
    this.script = [];
    this.defaultReply = completion('{"reasoning":"fine","score":4}');
    this.maxInFlight = 0;
    this.inFlight = 0;
    this.generation += 1;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }
}
