import { connect as connectHttp2 } from 'node:http2';
import { connect as connectTcp } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFrontServer } from './front-server.js';

/** HTTP/1.1 and h2c on one listening port, including prefaces that arrive in pieces. */

describe('front server', () => {
  const server = createFrontServer((req, res) => {
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`${req.httpVersion} ${req.method} ${req.url} ${bytes}`);
    });
  });
  let port = 0;

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  /** Writes raw bytes in pieces, a pause between them, and returns what came back. */
  const raw = (pieces: (string | Buffer)[]) =>
    new Promise<string>((resolve, reject) => {
      const socket = connectTcp(port, '127.0.0.1');
      let out = '';
      socket.on('data', (d: Buffer) => {
        out += d.toString('latin1');
      });
      socket.on('end', () => resolve(out));
      socket.on('error', reject);
      socket.on('connect', async () => {
        for (const piece of pieces) {
          socket.write(piece);
          await new Promise((r) => setTimeout(r, 30));
        }
      });
    });

  it('serves HTTP/1.1, also when the first bytes could still be an HTTP/2 preface', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/a`, {
      method: 'POST',
      body: 'x'.repeat(70_000),
    });
    expect(await res.text()).toBe('1.1 POST /a 70000');
    // "P" could begin "PRI * HTTP/2.0": the decision waits for the next byte.
    const split = await raw([
      'P',
      'OST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi',
    ]);
    expect(split).toContain('1.1 POST /b 2');
  });

  it('serves cleartext HTTP/2 with prior knowledge', async () => {
    const session = connectHttp2(`http://127.0.0.1:${port}`);
    try {
      const answer = await new Promise<string>((resolve, reject) => {
        const req = session.request({ ':method': 'POST', ':path': '/c' });
        let body = '';
        req.setEncoding('utf8');
        req.on('data', (d: string) => {
          body += d;
        });
        req.on('end', () => resolve(body));
        req.on('error', reject);
        req.end(Buffer.alloc(3_000_000));
      });
      expect(answer).toBe('2.0 POST /c 3000000');
      // One connection is not thousands of requests at once.
      expect(session.remoteSettings.maxConcurrentStreams).toBe(256);
    } finally {
      session.close();
    }
  });

  it('closes open HTTP/2 sessions when the server closes', async () => {
    const other = createFrontServer((_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const session = connectHttp2(`http://127.0.0.1:${(other.address() as { port: number }).port}`);
    await new Promise<void>((resolve, reject) => {
      const req = session.request({ ':path': '/' });
      req.on('response', () => resolve());
      req.on('error', reject);
      req.resume();
      req.end();
    });
    const closedSession = new Promise<void>((resolve) => session.once('close', () => resolve()));
    await new Promise<void>((resolve) => other.close(() => resolve()));
    await closedSession;
  });

  it('after refusing a body unread, keeps reading what the client still sends instead of resetting', async () => {
    const refusing = createFrontServer((_req, res) => {
      res.writeHead(413, { connection: 'close', 'content-type': 'text/plain' });
      res.end('too large');
    });
    await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
    const { port: refusingPort } = refusing.address() as { port: number };
    try {
      // Half-open: the client goes on sending after the server's FIN, as a client mid-upload does.
      const socket = connectTcp({ port: refusingPort, host: '127.0.0.1', allowHalfOpen: true });
      const errors: string[] = [];
      let out = '';
      let ended = false;
      socket.on('error', (err: NodeJS.ErrnoException) => errors.push(err.code ?? err.message));
      socket.on('data', (d: Buffer) => {
        out += d.toString('latin1');
      });
      socket.on('end', () => {
        ended = true;
      });
      await new Promise((r) => socket.once('connect', r));
      const mib = Buffer.alloc(1024 * 1024, 'A');
      socket.write(`POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: ${8 * mib.length}\r\n\r\n`);
      socket.write(mib);
      while (!out.includes('too large')) await new Promise((r) => setTimeout(r, 10));
      // Closed at once, the server's side would answer these bytes with a reset.
      for (let i = 0; i < 3; i++) {
        await new Promise((r) => setTimeout(r, 100));
        socket.write(mib);
      }
      await new Promise((r) => setTimeout(r, 200));
      expect(out).toMatch(/^HTTP\/1\.1 413/);
      expect(ended).toBe(true);
      expect(errors).toEqual([]);
      socket.destroy();
    } finally {
      refusing.closeAllConnections();
      await new Promise<void>((resolve) => refusing.close(() => resolve()));
    }
  });

  /** A server of its own with these options, listening; `stop()` closes every connection. */
  async function serving(options: Parameters<typeof createFrontServer>[1]) {
    const own = createFrontServer((_req, res) => res.end('ok'), options);
    await new Promise<void>((resolve) => own.listen(0, '127.0.0.1', resolve));
    return {
      port: (own.address() as { port: number }).port,
      stop: () => {
        own.closeAllConnections();
        return new Promise<void>((resolve) => own.close(() => resolve()));
      },
    };
  }

  it('closes an HTTP/2 session idle for the keep-alive timeout, with GOAWAY', async () => {
    const own = await serving({ keepAliveTimeout: 300 });
    try {
      const session = connectHttp2(`http://127.0.0.1:${own.port}`);
      session.on('error', () => undefined);
      const started = performance.now();
      const goaway = new Promise<number>((resolve) => session.once('goaway', resolve));
      const closed = new Promise<number>((resolve) =>
        session.once('close', () => resolve(performance.now() - started)),
      );
      expect(await goaway).toBe(0); // NO_ERROR
      expect(await closed).toBeGreaterThanOrEqual(250);
    } finally {
      await own.stop();
    }
  });

  it('closes connections past maxConnections at once, and reports them', async () => {
    const dropped: number[] = [];
    const own = await serving({ maxConnections: 2, onDropped: (n) => dropped.push(n) });
    const open = () => {
      const socket = connectTcp(own.port, '127.0.0.1');
      socket.on('error', () => undefined);
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      return { socket, closed, connected: new Promise((r) => socket.once('connect', r)) };
    };
    try {
      const held = [open(), open()];
      await Promise.all(held.map((c) => c.connected));
      // The server counts a connection once it accepted it; give it that turn.
      await new Promise((r) => setTimeout(r, 50));
      const third = open();
      await third.closed;
      expect(dropped).toEqual([1]);
      held[0]?.socket.destroy();
      await held[0]?.closed;
      await new Promise((r) => setTimeout(r, 50));
      const res = await fetch(`http://127.0.0.1:${own.port}/`);
      expect(await res.text()).toBe('ok');
      held[1]?.socket.destroy();
    } finally {
      await own.stop();
    }
  });
});
