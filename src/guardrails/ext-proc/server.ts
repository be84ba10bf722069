import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { HandlerContext } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import type { Principal } from '../../auth/index.js';
import { type Component, component } from '../../core/index.js';
import { ExternalProcessor } from './gen/envoy/service/ext_proc/v3/external_processor_pb.js';
import type { Guard } from './guard-port.js';
import { type ExtProcSettings, processStream, type StreamCaller } from './processor.js';

/** Initial-metadata keys a gateway sets on the stream (agentgateway: grpc_initial_metadata). */
export const POLICY_METADATA = 'x-touchstone-guard-policy';
export const PROJECT_METADATA = 'x-touchstone-project';

/** Framing and headers beside the largest body a ProcessingRequest carries. */
const MESSAGE_OVERHEAD_BYTES = 256 * 1024;

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
  const handler = connectNodeAdapter({
    grpc: true,
    grpcWeb: false,
    connect: false,
    readMaxBytes: deps.settings.maxBodyBytes + MESSAGE_OVERHEAD_BYTES,
    routes: (router) => {
      router.service(ExternalProcessor, {
        process: async function* (requests, ctx) {
          yield* processStream(requests, await callerOf(ctx, deps), deps.guard, deps.settings);
        },
      });
    },
  });
  const server = http2.createServer(
    { settings: { maxConcurrentStreams: deps.maxStreams } },
    handler,
  );
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

async function callerOf(ctx: HandlerContext, deps: ExtProcServerDeps): Promise<StreamCaller> {
  const policy = ctx.requestHeader.get(POLICY_METADATA) ?? undefined;
  const project = ctx.requestHeader.get(PROJECT_METADATA) ?? undefined;
  const named = {
    ...(policy === undefined || policy === '' ? {} : { policy }),
    ...(project === undefined || project === '' ? {} : { project }),
  };
  try {
    const principal = await deps.authenticate(ctx.requestHeader.get('authorization') ?? undefined);
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
