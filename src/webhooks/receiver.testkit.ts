import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifyWebhookSignature } from '../client/index.js';

/**
 * A real webhook receiver on 127.0.0.1 for tests. It reads the raw body, verifies the signature
 * with `verifyWebhookSignature` (as docs/webhooks.md tells users to) and records every request;
 * `respond` decides the answer (default 204), so tests can make it fail, hang or misbehave.
 */

export interface ReceivedDelivery {
  id: string;
  event: string;
  signature: string;
  contentType: string;
  body: string;
  /** Whether the signature verified against `secret` at `now()`. */
  verified: boolean;
}

export type Responder = (req: IncomingMessage, res: ServerResponse, n: number) => void;

export class TestReceiver {
  readonly received: ReceivedDelivery[] = [];
  /** The secret to verify with; set it once the webhook exists. */
  secret = '';
  respond: Responder = (_req, res) => {
    res.writeHead(204);
    res.end();
  };
  private waiters: (() => void)[] = [];

  private constructor(
    private readonly server: Server,
    readonly url: string,
    private readonly now: () => number,
  ) {}

  /** Starts a receiver; `now` is the clock signatures are checked against (a FakeClock's). */
  static async start(now: () => number = Date.now): Promise<TestReceiver> {
    let self: TestReceiver | undefined;
    const server = createServer((req, res) => self?.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    self = new TestReceiver(server, `http://127.0.0.1:${port}/hooks/touchstone`, now);
    return self;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const header = req.headers['touchstone-signature'] as string | undefined;
      let verified = true;
      try {
        verifyWebhookSignature({ payload: raw, header, secret: this.secret, now: this.now() });
      } catch {
        verified = false;
      }
      this.received.push({
        id: String(req.headers['touchstone-delivery']),
        event: String(req.headers['touchstone-event']),
        signature: header ?? '',
        contentType: String(req.headers['content-type']),
        body: raw.toString('utf8'),
        verified,
      });
      for (const w of this.waiters.splice(0)) w();
      this.respond(req, res, this.received.length);
    });
  }

  /** Resolves once `n` requests in total have arrived. */
  async waitFor(n: number, timeoutMs = 10_000): Promise<ReceivedDelivery[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.received.length < n) {
      if (Date.now() > deadline) {
        throw new Error(`receiver got ${this.received.length} of ${n} requests in time`);
      }
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 100);
      });
    }
    return this.received;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
