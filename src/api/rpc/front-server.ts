import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import {
  createServer as createHttp2Server,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type Http2Session,
  constants as http2Constants,
  type ServerHttp2Stream,
} from 'node:http2';
import type { Socket } from 'node:net';
import { Duplex } from 'node:stream';

/**
 * One port for HTTP/1.1 and cleartext HTTP/2 (h2c with prior knowledge, which gRPC clients
 * use). Node serves either protocol on a socket but not both, so the HTTP/1.1 server's own
 * connection handler is wrapped: it peeks at the first bytes of each connection and hands a
 * connection that opens with the HTTP/2 preface to an HTTP/2 server, everything else to the
 * HTTP/1.1 server. Both run the same request handler (Fastify's, through `serverFactory`).
 * The server has no TLS listener today; one would choose the protocol by ALPN instead.
 */

/** Fastify's request handler; it serves HTTP/2 compatibility requests as well at run time. */
type Handler = (req: IncomingMessage, res: ServerResponse) => void;

export interface FrontServerOptions {
  keepAliveTimeout?: number;
  requestTimeout?: number;
  connectionTimeout?: number;
  /** Longest wait for a connection's first bytes before it is treated as HTTP/1.1. */
  prefaceTimeoutMs?: number;
  /** How often HTTP/1.1 connections are checked against the request and headers timeouts. */
  checkIntervalMs?: number;
  /** Most connections open at once, both protocols; past it new ones are closed at once. */
  maxConnections?: number;
  /** Called (at most once a minute) when connections were closed for `maxConnections`. */
  onDropped?: (count: number) => void;
}

/** Flow-control window: with HTTP/2's default 64 KiB, a large upload stalls on WINDOW_UPDATEs. */
const WINDOW_BYTES = 8 * 1024 * 1024;

/**
 * Streams one HTTP/2 connection may have open at once (Node's default is unbounded): as nginx's
 * 128 or Go's 250, so that one connection is not thousands of requests at once.
 */
const MAX_STREAMS = 256;

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** 'h2' when the bytes open with the HTTP/2 preface, 'h1' when they cannot, undefined if unsure yet. */
function protocolOf(head: Buffer): 'h1' | 'h2' | undefined {
  const n = Math.min(head.length, PREFACE.length);
  if (head.subarray(0, n).equals(PREFACE.subarray(0, n))) {
    return n === PREFACE.length ? 'h2' : undefined;
  }
  return 'h1';
}

/**
 * The socket as a stream that first yields the bytes already read from it. The HTTP/2 session
 * reads from the socket's native handle, past anything pushed back onto the JS stream, so it gets
 * this wrapper instead (Node runs an HTTP/2 session over any duplex stream). The cost: an HTTP/2
 * request's `socket.remoteAddress` is unknown (nothing reads it today).
 */
function replay(socket: Socket, head: Buffer): Duplex {
  const stream = new Duplex({
    read() {
      socket.resume();
    },
    write(chunk: Buffer, _encoding, callback) {
      socket.write(chunk, callback);
    },
    final(callback) {
      socket.end(callback);
    },
    destroy(err, callback) {
      socket.destroy(err ?? undefined);
      callback(err);
    },
  });
  stream.push(head);
  socket.on('data', (chunk: Buffer) => {
    if (!stream.push(chunk)) socket.pause();
  });
  socket.once('end', () => stream.push(null));
  socket.once('error', (err) => stream.destroy(err));
  socket.once('close', () => stream.destroy());
  return stream;
}

/** How long a connection closed after a refusal keeps reading what its client still sends. */
const LINGER_MS = 2000;

/**
 * Closes like nginx's lingering close. Node ends a connection whose response says `Connection:
 * close` (a body refused unread: 413, 503) with `destroySoon()`: the socket is destroyed as soon
 * as the answer is written, and closing it with bytes of the refused body still unread makes the
 * kernel send a reset, which discards the answer on the client's side when it arrives first —
 * the client sees a reset instead of its 413. Instead the answer is followed by a half-close, the
 * body goes on being read and discarded by the HTTP parser, and the socket is destroyed when the
 * client closes too, or after LINGER_MS.
 */
function lingerOnClose(socket: Socket): void {
  socket.destroySoon = () => {
    if (socket.destroyed) return;
    socket.end();
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  };
}

/**
 * Resets a stream whose client has not sent its whole request (headers and body) `timeoutMs`
 * after it began, as HTTP/1.1's `requestTimeout` closes such a connection (after a 408; an
 * HTTP/2 stream is reset with CANCEL instead, since its answer belongs to the handler).
 */
function cutIfUnsent(stream: ServerHttp2Stream, timeoutMs: number): void {
  const timer = setTimeout(() => {
    if (stream.closed || stream.destroyed || stream.state.remoteClose === 1) return;
    stream.close(http2Constants.NGHTTP2_CANCEL);
  }, timeoutMs);
  timer.unref();
  stream.once('close', () => clearTimeout(timer));
}

const DROP_REPORT_MS = 60_000;

/**
 * Reports connections closed for `maxConnections`: the first at once, then those of the minute
 * after it in one call, so that a flood of them logs a line a minute.
 */
function countDrops(server: Server, onDropped: ((count: number) => void) | undefined): void {
  let dropped = 0;
  let timer: NodeJS.Timeout | undefined;
  server.on('drop', () => {
    dropped += 1;
    if (onDropped === undefined || timer !== undefined) return;
    onDropped(dropped);
    dropped = 0;
    timer = setTimeout(() => {
      timer = undefined;
      if (dropped > 0) onDropped(dropped);
      dropped = 0;
    }, DROP_REPORT_MS);
    timer.unref();
  });
}

/**
 * Returns an `http.Server` (what Fastify expects from `serverFactory`) that also speaks h2c.
 * `close()`, `closeIdleConnections()` and `closeAllConnections()` also close the HTTP/2
 * sessions (gracefully, with GOAWAY, or at once).
 */
export function createFrontServer(handler: Handler, options: FrontServerOptions = {}): Server {
  const h1 = createHttpServer(
    options.checkIntervalMs === undefined
      ? {}
      : { connectionsCheckingInterval: options.checkIntervalMs },
    handler,
  );
  if (options.keepAliveTimeout !== undefined) h1.keepAliveTimeout = options.keepAliveTimeout;
  if (options.requestTimeout !== undefined) {
    h1.requestTimeout = options.requestTimeout;
    // Node cuts a request off at `requestTimeout` only when `headersTimeout` is not longer (its
    // createServer refuses the other combination; set afterwards, the request timeout never fires).
    if (options.requestTimeout > 0) {
      h1.headersTimeout = Math.min(h1.headersTimeout, options.requestTimeout);
    }
  }
  if (options.connectionTimeout !== undefined && options.connectionTimeout > 0) {
    h1.setTimeout(options.connectionTimeout);
  }
  if (options.maxConnections !== undefined) {
    h1.maxConnections = options.maxConnections;
    countDrops(h1, options.onDropped);
  }
  const h2 = createHttp2Server(
    { settings: { initialWindowSize: WINDOW_BYTES, maxConcurrentStreams: MAX_STREAMS } },
    handler as unknown as (req: Http2ServerRequest, res: Http2ServerResponse) => void,
  );
  const sessions = new Set<Http2Session>();
  h2.on('session', (session) => {
    session.once('localSettings', () => session.setLocalWindowSize(WINDOW_BYTES));
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  // HTTP/1.1's limits, held for HTTP/2 too, which Node's HTTP/2 server has none of: without them
  // one connection could keep a write's place for ever with streams that never send their body,
  // and an idle session stayed open for ever.
  if (options.keepAliveTimeout !== undefined && options.keepAliveTimeout > 0) {
    h2.setTimeout(options.keepAliveTimeout);
    // A session with no frame either way that long: GOAWAY, its open streams still answered.
    h2.on('timeout', (session: Http2Session) => session.close());
  }
  const requestTimeout = options.requestTimeout ?? 0;
  if (requestTimeout > 0) h2.on('stream', (stream) => cutIfUnsent(stream, requestTimeout));

  const serveH1 = h1.listeners('connection') as ((socket: Socket) => void)[];
  h1.removeAllListeners('connection');
  const prefaceTimeoutMs = options.prefaceTimeoutMs ?? 10_000;

  h1.on('connection', (socket: Socket) => {
    let head = Buffer.alloc(0);
    const decide = (to: 'h1' | 'h2') => {
      socket.removeListener('data', onData);
      socket.removeListener('end', onEnd);
      socket.removeListener('error', onError);
      clearTimeout(timer);
      if (to === 'h2') {
        h2.emit('connection', replay(socket, head));
        return;
      }
      socket.pause();
      // The peeked bytes go back in front of the stream; the HTTP/1.1 parser reads them first.
      if (head.length > 0) socket.unshift(head);
      for (const listener of serveH1) listener.call(h1, socket);
      lingerOnClose(socket);
      socket.resume();
    };
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const protocol = protocolOf(head);
      if (protocol !== undefined) decide(protocol);
    };
    // Closed before its first request could be read: nothing to answer. Handed to the HTTP/1.1
    // server after its end, the socket would stay half-open until the headers timeout.
    const onEnd = () => {
      clearTimeout(timer);
      socket.destroy();
    };
    const onError = () => socket.destroy();
    const timer = setTimeout(() => decide('h1'), prefaceTimeoutMs);
    timer.unref();
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('error', onError);
  });

  const closeIdle = h1.closeIdleConnections.bind(h1);
  const closeAll = h1.closeAllConnections.bind(h1);
  const close = h1.close.bind(h1);
  h1.closeIdleConnections = () => {
    for (const session of sessions) session.close();
    closeIdle();
  };
  h1.closeAllConnections = () => {
    for (const session of sessions) session.destroy();
    closeAll();
  };
  h1.close = ((callback?: (err?: Error) => void) => {
    for (const session of sessions) session.close();
    return close(callback);
  }) as typeof h1.close;
  return h1;
}
