import {
  createServer,
  type IncomingMessage,
  request,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local HTTP proxy in front of a real (or fake) store that forwards every request unchanged,
 * except while a fault is set: then it answers with the fault (a status with headers and body,
 * or no answer at all) instead. Connector tests use it to make a real server fail on demand.
 */
export type Fault =
  | { status: number; headers?: Record<string, string>; body?: string }
  | { hang: true };

export class FaultProxy {
  /** Answers every request with this fault while set; `undefined` forwards. */
  fault: Fault | undefined;
  /** Requests seen (method and path), forwarded or not. */
  readonly seen: string[] = [];
  private readonly hanging = new Set<ServerResponse>();

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(target: string): Promise<FaultProxy> {
    const upstream = new URL(target);
    let proxy: FaultProxy | undefined;
    const server = createServer((req, res) => proxy?.handle(req, res, upstream));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    proxy = new FaultProxy(
      server,
      `http://127.0.0.1:${port}${upstream.pathname.replace(/\/$/, '')}`,
    );
    return proxy;
  }

  private handle(req: IncomingMessage, res: ServerResponse, upstream: URL): void {
    this.seen.push(`${req.method} ${req.url}`);
    const fault = this.fault;
    if (fault !== undefined) {
      req.resume();
      if ('hang' in fault) {
        this.hanging.add(res);
        res.on('close', () => this.hanging.delete(res));
        return;
      }
      res.writeHead(fault.status, fault.headers ?? { 'content-type': 'application/json' });
      res.end(fault.body ?? '{}');
      return;
    }
    const forward = request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', () => {
      res.writeHead(502);
      res.end();
    });
    req.pipe(forward);
  }

  async close(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
