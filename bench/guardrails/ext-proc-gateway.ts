/**
 * The bench's gateway: an ext_proc client as lean as Envoy's, so that the figures are the
 * processor's and not a JavaScript gRPC stack's. Every ProcessingRequest is encoded once, up
 * front; a stream writes the prepared frames on node:http2 and reads the length-prefixed answers.
 */
import http2 from 'node:http2';
import { create, fromBinary, type MessageInitShape, toBinary } from '@bufbuild/protobuf';
import {
  ExternalProcessor,
  ProcessingRequestSchema,
  type ProcessingResponse,
  ProcessingResponseSchema,
} from '../../src/guardrails/ext-proc/gen/envoy/service/ext_proc/v3/external_processor_pb.js';

const PATH = `/${ExternalProcessor.typeName}/${ExternalProcessor.method.process.name}`;

/** A ProcessingRequest as one gRPC frame (no compression). */
export function frame(request: MessageInitShape<typeof ProcessingRequestSchema>): Buffer {
  const bytes = toBinary(ProcessingRequestSchema, create(ProcessingRequestSchema, request));
  const out = Buffer.allocUnsafe(5 + bytes.length);
  out[0] = 0;
  out.writeUInt32BE(bytes.length, 1);
  out.set(bytes, 5);
  return out;
}

/** Headers as agentgateway sends them: pseudo-headers in `value`, the rest in `raw_value`. */
export function headersFrame(
  kind: 'requestHeaders' | 'responseHeaders',
  headers: [string, string][],
): Buffer {
  const list = headers.map(([key, value]) =>
    key.startsWith(':') ? { key, value } : { key, rawValue: Buffer.from(value) },
  );
  return frame({ request: { case: kind, value: { headers: { headers: list } } } });
}

export function bodyFrame(kind: 'requestBody' | 'responseBody', body: Uint8Array): Buffer {
  return frame({ request: { case: kind, value: { body, endOfStream: true } } });
}

/** One ext_proc stream: send prepared frames, receive decoded answers. */
export interface BenchStream {
  send(frame: Buffer): void;
  /** The next answer, or undefined when the stream ended. */
  receive(): Promise<ProcessingResponse | undefined>;
  end(): void;
  /** Reset the stream if still open (Envoy does after an immediate response). */
  close(): void;
}

/** One HTTP/2 connection, as a gateway keeps to its processor cluster. */
export function connect(address: string): {
  open(): BenchStream;
  close(): void;
} {
  const session = http2.connect(`http://${address}`);
  session.on('error', () => {});
  return {
    open: () => openStream(session),
    close: () => session.close(),
  };
}

function openStream(session: http2.ClientHttp2Session): BenchStream {
  const req = session.request({
    ':method': 'POST',
    ':path': PATH,
    'content-type': 'application/grpc',
    te: 'trailers',
  });
  const answers: (ProcessingResponse | undefined)[] = [];
  const waiters: ((a: ProcessingResponse | undefined) => void)[] = [];
  const push = (answer: ProcessingResponse | undefined) => {
    const waiter = waiters.shift();
    if (waiter === undefined) answers.push(answer);
    else waiter(answer);
  };
  let pending: Buffer = Buffer.alloc(0);
  req.on('data', (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 5) {
      const length = pending.readUInt32BE(1);
      if (pending.length < 5 + length) break;
      push(fromBinary(ProcessingResponseSchema, pending.subarray(5, 5 + length)));
      pending = pending.subarray(5 + length);
    }
  });
  req.on('close', () => push(undefined));
  req.on('error', () => {});
  return {
    send: (f) => req.write(f),
    receive: () => {
      if (answers.length > 0) return Promise.resolve(answers.shift());
      return new Promise((resolve) => waiters.push(resolve));
    },
    end: () => req.end(),
    close: () => {
      if (!req.closed) req.close(http2.constants.NGHTTP2_CANCEL);
    },
  };
}
