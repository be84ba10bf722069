import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { create, toBinary } from '@bufbuild/protobuf';
import type { Principal } from '../../auth/index.js';
import { type Component, component } from '../../core/index.js';
import {
  ExternalProcessor,
  ProcessingRequestSchema,
  ProcessingResponseSchema,
} from './gen/envoy/service/ext_proc/v3/external_processor_pb.js';
import {
  ACCEPTED_ENCODINGS,
  GRPC_INTERNAL,
  GRPC_UNIMPLEMENTED,
  GrpcStatusError,
  isGrpcContentType,
  MessageReader,
  MessageWriter,
} from './grpc-stream.js';
import type { Guard } from './guard-port.js';
import type { Reply } from './messages.js';
import { type ExtProcSettings, processStream, type StreamCaller } from './processor.js';

/** Initial-metadata keys a gateway sets on the stream (agentgateway: grpc_initial_metadata). */
export const POLICY_METADATA = 'x-touchstone-guard-policy';
export const PROJECT_METADATA = 'x-touchstone-project';

/** Framing and headers beside the largest body a ProcessingRequest carries. */
const MESSAGE_OVERHEAD_BYTES = 256 * 1024;

const PROCESS_PATH = `/${ExternalProcessor.typeName}/${ExternalProcessor.method.process.name}`;

export interface ExtProcServerDeps {
  host: string;
  port: number;
  settings: ExtProcSettings;
  /** Streams one gateway connection may hold open at once. */
  maxStreams: number;
  guard: Guard;
  /**
   * The principal of a stream from its `authorization` metadata (the server's bearer auth path);
   * throws when the credentials are refused.
   */
  authenticate(authorization: string | undefined): Promise<Principal>;
  /** How long stop waits for streams in flight before cutting connections. */
  shutdownTimeoutMs: number;
}

export interface ExtProcServer extends Component {
  /** Where it listens once started (`127.0.0.1:9002`). */
  address(): string;
}

/**
 * The Envoy external processor (`envoy.service.ext_proc.v3.ExternalProcessor/Process`) on its
 * own port, as gRPC over HTTP/2 cleartext (h2c, prior knowledge): what Envoy's HTTP/2 clusters
 * and agentgateway dial.
 */
export function createExtProcServer(deps: ExtProcServerDeps): ExtProcServer {
  const server = http2.createServer({ settings: { maxConcurrentStreams: deps.maxStreams } });
  server.on('stream', (stream, headers) => {
    // A client that resets its stream: nothing to answer, and not a server error.
    stream.on('error', () => {});
    void serveStream(stream, headers, deps);
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  const serving = component('ext-proc-server', {
    start: () =>
      new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(deps.port, deps.host, () => {
          server.off('error', reject);
          resolve();
        });
      }),
    stop: () => stopServer(server, sessions, deps.shutdownTimeoutMs),
  });
  return {
    ...serving,
    address() {
      const addr = server.address() as AddressInfo | null;
      if (addr === null) return `${deps.host}:${deps.port}`;
      return addr.family === 'IPv6'
        ? `[${addr.address}]:${addr.port}`
        : `${addr.address}:${addr.port}`;
    },
  };
}

/** One `Process` stream: the gateway's messages through the processor, its replies back. */
async function serveStream(
  stream: http2.ServerHttp2Stream,
  headers: http2.IncomingHttpHeaders,
  deps: ExtProcServerDeps,
): Promise<void> {
  const writer = new MessageWriter(stream);
  if (headers[':method'] !== 'POST' || !isGrpcContentType(headers['content-type'])) {
    stream.respond({ ':status': 415 }, { endStream: true });
    return;
  }
  if (headers[':path'] !== PROCESS_PATH) {
    writer.end(GRPC_UNIMPLEMENTED, `only ${PROCESS_PATH.slice(1)} is served here`);
    return;
  }
  const encoding = single(headers['grpc-encoding']);
  if (encoding !== undefined && !ACCEPTED_ENCODINGS.includes(encoding)) {
    writer.end(GRPC_UNIMPLEMENTED, 'unsupported grpc-encoding', {
      'grpc-accept-encoding': ACCEPTED_ENCODINGS.join(','),
    });
    return;
  }
  const maxBytes = deps.settings.maxBodyBytes + MESSAGE_OVERHEAD_BYTES;
  const requests = new MessageReader(stream, ProcessingRequestSchema, maxBytes, encoding);
  try {
    const caller = await callerOf(headers, deps);
    for await (const reply of processStream(requests, caller, deps.guard, deps.settings)) {
      if (writer.closed) break;
      writer.write(encoded(reply));
    }
    writer.end(0);
  } catch (err) {
    if (err instanceof GrpcStatusError) writer.end(err.code, err.message);
    else writer.end(GRPC_INTERNAL, 'internal error');
  }
}

/** The wire bytes of a reply; the constant ones (carry on unchanged) are encoded once. */
const encodings = new WeakMap<Reply, Uint8Array>();
function encoded(reply: Reply): Uint8Array {
  const cached = encodings.get(reply);
  if (cached !== undefined) return cached;
  const bytes = toBinary(ProcessingResponseSchema, create(ProcessingResponseSchema, reply));
  if (Object.isFrozen(reply)) encodings.set(reply, bytes);
  return bytes;
}

const single = (value: string | string[] | undefined): string | undefined =>
  Array.isArray(value) ? value[0] : value;

async function callerOf(
  headers: http2.IncomingHttpHeaders,
  deps: ExtProcServerDeps,
): Promise<StreamCaller> {
  const policy = single(headers[POLICY_METADATA]);
  const project = single(headers[PROJECT_METADATA]);
  const named = {
    ...(policy === undefined || policy === '' ? {} : { policy }),
    ...(project === undefined || project === '' ? {} : { project }),
  };
  try {
    const principal = await deps.authenticate(single(headers.authorization));
    return { ...named, principal };
  } catch (err) {
    const reason = err instanceof Error && isSafe(err) ? err.message : 'refused';
    return { ...named, refused: reason };
  }
}

/** TouchstoneErrors carry safe messages; anything else is reported without its text. */
function isSafe(err: Error): boolean {
  return (err as { kind?: unknown }).kind === 'unauthenticated';
}

/** Stops accepting, asks every connection to go away, and cuts those still open at the deadline. */
async function stopServer(
  server: http2.Http2Server,
  sessions: Set<http2.ServerHttp2Session>,
  timeoutMs: number,
): Promise<void> {
  if (!server.listening) return;
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  for (const session of sessions) session.close();
  const timer = setTimeout(() => {
    for (const session of sessions) session.destroy();
  }, timeoutMs);
  timer.unref();
  try {
    await closed;
  } finally {
    clearTimeout(timer);
  }
}
