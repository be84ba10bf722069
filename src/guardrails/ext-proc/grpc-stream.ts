/**
 * gRPC over HTTP/2 for the one bidirectional method the processor serves, on node:http2's own
 * streams: length-prefixed messages in, length-prefixed messages out, `grpc-status` in the
 * trailers. A general gRPC stack costs several times the guard's own work per exchange (its
 * per-stream pipelines, header objects and abort signals); this path does only what the method
 * needs. Compressed messages (gzip, deflate, brotli) are read; answers are sent uncompressed.
 */
import type { ServerHttp2Stream } from 'node:http2';
import zlib from 'node:zlib';
import { type DescMessage, fromBinary, type MessageShape } from '@bufbuild/protobuf';

/** A message whose length prefix is past the cap: refused before its bytes are read. */
export class MessageTooLargeError extends Error {
  constructor() {
    super('the message is larger than the cap');
    this.name = 'MessageTooLargeError';
  }
}

/** A failure that ends the stream with this gRPC status (its message is safe to send). */
export class GrpcStatusError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
    this.name = 'GrpcStatusError';
  }
}

export const GRPC_INVALID_ARGUMENT = 3;
export const GRPC_UNIMPLEMENTED = 12;
export const GRPC_INTERNAL = 13;

const HEADER_BYTES = 5;
const COMPRESSED = 1;
/** Messages read ahead of the handler before the stream stops reading (back-pressure). */
const READ_AHEAD = 4;

const DECOMPRESS: Record<string, (b: Buffer, o: zlib.ZlibOptions) => Buffer> = {
  gzip: zlib.gunzipSync,
  deflate: zlib.inflateSync,
  br: zlib.brotliDecompressSync,
};

/** The encodings a request's `grpc-encoding` may name. */
export const ACCEPTED_ENCODINGS = ['identity', ...Object.keys(DECOMPRESS)];

type Waiter<T> = { resolve(r: IteratorResult<T>): void; reject(e: unknown): void };

/**
 * The messages of one request stream, decoded as they complete, as an async iterator the
 * handler pulls: ends when the client half-closes or the stream closes, fails on a message past
 * `maxBytes` (MessageTooLargeError) or one that does not decode (GrpcStatusError).
 */
export class MessageReader<Desc extends DescMessage>
  implements AsyncIterableIterator<MessageShape<Desc>>
{
  private readonly chunks: Buffer[] = [];
  private buffered = 0;
  /** The length of the message being read, or -1 while reading its prefix. */
  private length = -1;
  private compressed = false;
  private readonly ready: MessageShape<Desc>[] = [];
  private readonly waiters: Waiter<MessageShape<Desc>>[] = [];
  private failure: unknown;
  private done = false;

  constructor(
    private readonly stream: ServerHttp2Stream,
    private readonly schema: Desc,
    private readonly maxBytes: number,
    private readonly encoding: string | undefined,
  ) {
    stream.on('data', (chunk: Buffer) => this.onData(chunk));
    stream.once('end', () => this.finish());
    stream.once('close', () => this.finish());
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<MessageShape<Desc>>> {
    const message = this.ready.shift();
    if (message !== undefined) {
      if (this.ready.length < READ_AHEAD && this.stream.isPaused()) this.stream.resume();
      return Promise.resolve({ done: false, value: message });
    }
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.done) return Promise.resolve({ done: true, value: undefined });
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** The handler is done reading: drop what is buffered and read no further. */
  return(): Promise<IteratorResult<MessageShape<Desc>>> {
    this.stop();
    this.ready.length = 0;
    return Promise.resolve({ done: true, value: undefined });
  }

  private onData(chunk: Buffer): void {
    if (this.done) return;
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    try {
      for (;;) {
        if (this.length < 0) {
          if (this.buffered < HEADER_BYTES) return;
          const prefix = this.take(HEADER_BYTES);
          this.compressed = ((prefix[0] as number) & COMPRESSED) !== 0;
          this.length = prefix.readUInt32BE(1);
          if (this.length > this.maxBytes) throw new MessageTooLargeError();
        }
        if (this.buffered < this.length) return;
        const bytes = this.take(this.length);
        this.length = -1;
        this.deliver(this.decode(bytes));
      }
    } catch (err) {
      this.fail(err);
    }
  }

  private decode(bytes: Buffer): MessageShape<Desc> {
    let plain = bytes;
    if (this.compressed) {
      const decompress = this.encoding === undefined ? undefined : DECOMPRESS[this.encoding];
      if (decompress === undefined) {
        throw new GrpcStatusError(GRPC_INTERNAL, 'a compressed message without grpc-encoding');
      }
      try {
        plain = decompress(bytes, { maxOutputLength: this.maxBytes });
      } catch (err) {
        if (err instanceof RangeError) throw new MessageTooLargeError();
        throw new GrpcStatusError(
          GRPC_INTERNAL,
          `the message does not decompress as ${this.encoding}`,
        );
      }
    }
    try {
      return fromBinary(this.schema, plain);
    } catch {
      throw new GrpcStatusError(GRPC_INVALID_ARGUMENT, `the message is not a ${this.schema.name}`);
    }
  }

  /** The next `n` buffered bytes, copied only when they span chunks. */
  private take(n: number): Buffer {
    this.buffered -= n;
    const first = this.chunks[0] as Buffer;
    if (first.length === n) {
      this.chunks.shift();
      return first;
    }
    if (first.length > n) {
      this.chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    while (filled < n) {
      const chunk = this.chunks[0] as Buffer;
      const used = Math.min(chunk.length, n - filled);
      chunk.copy(out, filled, 0, used);
      filled += used;
      if (used === chunk.length) this.chunks.shift();
      else this.chunks[0] = chunk.subarray(used);
    }
    return out;
  }

  private deliver(message: MessageShape<Desc>): void {
    const waiter = this.waiters.shift();
    if (waiter !== undefined) {
      waiter.resolve({ done: false, value: message });
      return;
    }
    this.ready.push(message);
    if (this.ready.length >= READ_AHEAD) this.stream.pause();
  }

  private fail(err: unknown): void {
    this.failure = err;
    this.stop();
    for (const waiter of this.waiters.splice(0)) waiter.reject(err);
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    for (const waiter of this.waiters.splice(0)) waiter.resolve({ done: true, value: undefined });
  }

  private stop(): void {
    this.done = true;
    this.chunks.length = 0;
    this.buffered = 0;
    this.stream.removeAllListeners('data');
    // Keep draining (and discarding) what the client still sends, so flow control never stalls.
    this.stream.on('data', () => {});
    if (this.stream.isPaused()) this.stream.resume();
  }
}

const CONTENT_TYPE = 'application/grpc';

/**
 * The response side of one stream: headers with the first message, each message framed and
 * written at once, `grpc-status` in the trailers (or a trailers-only response when nothing was
 * sent). Writes after the client went away are dropped.
 */
export class MessageWriter {
  private responded = false;

  constructor(private readonly stream: ServerHttp2Stream) {}

  get closed(): boolean {
    return this.stream.closed || this.stream.destroyed;
  }

  write(bytes: Uint8Array): void {
    if (this.closed) return;
    if (!this.responded) {
      this.responded = true;
      this.stream.respond(
        { ':status': 200, 'content-type': CONTENT_TYPE },
        { waitForTrailers: true },
      );
    }
    const frame = Buffer.allocUnsafe(HEADER_BYTES + bytes.length);
    frame[0] = 0;
    frame.writeUInt32BE(bytes.length, 1);
    frame.set(bytes, HEADER_BYTES);
    this.stream.write(frame);
  }

  /** Ends the stream with this gRPC status (and `extra` trailers). */
  end(code: number, message = '', extra: Record<string, string> = {}): void {
    if (this.closed) return;
    const status = {
      ...extra,
      'grpc-status': String(code),
      ...(message === '' ? {} : { 'grpc-message': encodeURIComponent(message) }),
    };
    if (!this.responded) {
      this.responded = true;
      this.stream.respond(
        { ':status': 200, 'content-type': CONTENT_TYPE, ...status },
        { endStream: true },
      );
      return;
    }
    this.stream.once('wantTrailers', () => {
      if (!this.closed) this.stream.sendTrailers(status);
    });
    this.stream.end();
  }
}

/** Whether request headers name gRPC (`application/grpc`, optionally `+proto`). */
export function isGrpcContentType(type: string | undefined): boolean {
  return type === CONTENT_TYPE || type === `${CONTENT_TYPE}+proto`;
}
