/**
 * A model of a gateway's ext_proc client in buffered mode, for tests only (not the gateway): it
 * sends an HTTP exchange's messages the way agentgateway does (pseudo-headers in `value`, other
 * headers in `raw_value`), waits for each answer, and applies it as the gateway would. Two
 * independent gRPC stacks drive it: @connectrpc/connect-node with the generated code, and
 * @grpc/grpc-js with @grpc/proto-loader reading the vendored protos at run time.
 */
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import {
  ExternalProcessor,
  type ProcessingRequest,
  ProcessingRequestSchema,
  type ProcessingResponse,
} from './gen/envoy/service/ext_proc/v3/external_processor_pb.js';

/** A gateway → processor message, independent of the gRPC stack. */
export type Sent =
  | {
      kind: 'requestHeaders' | 'responseHeaders';
      headers: [string, string][];
      endOfStream: boolean;
    }
  | { kind: 'requestBody' | 'responseBody'; body: Uint8Array; endOfStream: boolean };

/** A processor → gateway message, independent of the gRPC stack. */
export interface Answer {
  kind: string;
  /** A body mutation's new body. */
  body?: Buffer;
  removeHeaders?: string[];
  /** An immediate response's status, headers (`raw_value`, or `value`) and body. */
  status?: number;
  headers?: Record<string, string>;
  /** Set when a header carried `value` (Envoy refuses headers with both, and may ignore `value`). */
  usedValue?: boolean;
  text?: string;
}

export interface GatewayStream {
  send(message: Sent): void;
  /** The next answer, or 'end' when the processor closed the stream. */
  receive(): Promise<Answer | 'end'>;
  /** Half-close, as a gateway does when the exchange is over. */
  end(): void;
  /** Drop the stream (a gateway whose client went away). */
  cancel(): void;
}

export type Client = (address: string, metadata: Record<string, string>) => GatewayStream;

/** An async queue: what `receive()` reads and what a client's stream writes. */
class Queue<T> {
  private readonly items: T[] = [];
  private readonly waiters: ((v: T) => void)[] = [];
  push(item: T): void {
    const waiter = this.waiters.shift();
    if (waiter === undefined) this.items.push(item);
    else waiter(item);
  }
  shift(): Promise<T> {
    const item = this.items.shift();
    if (item !== undefined) return Promise.resolve(item);
    return new Promise((resolve) => this.waiters.push(resolve));
  }
}

function toConnect(message: Sent): ProcessingRequest {
  if ('headers' in message) {
    const headers = message.headers.map(([key, value]) =>
      key.startsWith(':') ? { key, value } : { key, rawValue: Buffer.from(value) },
    );
    return create(ProcessingRequestSchema, {
      request: {
        case: message.kind,
        value: { headers: { headers }, endOfStream: message.endOfStream },
      },
    });
  }
  return create(ProcessingRequestSchema, {
    request: {
      case: message.kind,
      value: { body: message.body, endOfStream: message.endOfStream },
    },
  });
}

function fromConnect(response: ProcessingResponse): Answer {
  const r = response.response;
  if (r.case === 'immediateResponse') {
    const headers: Record<string, string> = {};
    let usedValue = false;
    for (const h of r.value.headers?.setHeaders ?? []) {
      const key = h.header?.key ?? '';
      if (h.header?.value !== '') usedValue = true;
      headers[key] = Buffer.from(h.header?.rawValue ?? []).toString('utf8');
    }
    return {
      kind: r.case,
      status: r.value.status?.code ?? 0,
      headers,
      usedValue,
      text: Buffer.from(r.value.body).toString('utf8'),
    };
  }
  if (r.case === undefined) return { kind: 'none' };
  const common = 'response' in r.value ? r.value.response : undefined;
  const mutation = common?.bodyMutation?.mutation;
  return {
    kind: r.case,
    ...(mutation?.case === 'body' ? { body: Buffer.from(mutation.value) } : {}),
    ...(common?.headerMutation === undefined
      ? {}
      : { removeHeaders: common.headerMutation.removeHeaders }),
  };
}

/** One HTTP/2 connection per processor address, as a gateway keeps. */
const transports = new Map<string, ReturnType<typeof createGrpcTransport>>();

/** The Connect (connect-node) client, over h2c. */
export const connectClient: Client = (address, metadata) => {
  let transport = transports.get(address);
  if (transport === undefined) {
    // Closed soon after its last stream, so a test process is not held open by it.
    transport = createGrpcTransport({
      baseUrl: `http://${address}`,
      idleConnectionTimeoutMs: 500,
      nodeOptions: { maxSessionMemory: 64 },
    });
    transports.set(address, transport);
  }
  const client = createClient(ExternalProcessor, transport);
  const outgoing = new Queue<ProcessingRequest | 'end'>();
  const answers = new Queue<Answer | 'end'>();
  const abort = new AbortController();
  let finished = false;
  async function* requests(): AsyncGenerator<ProcessingRequest> {
    for (;;) {
      const next = await outgoing.shift();
      if (next === 'end') return;
      yield next;
    }
  }
  void (async () => {
    try {
      for await (const response of client.process(requests(), {
        headers: metadata,
        signal: abort.signal,
      })) {
        answers.push(fromConnect(response));
      }
    } catch {
      // A cancelled or failed stream ends like a closed one for the model.
    }
    finished = true;
    answers.push('end');
  })();
  return {
    send: (m) => outgoing.push(toConnect(m)),
    receive: () => answers.shift(),
    end: () => outgoing.push('end'),
    cancel: () => {
      // A stream that ended needs no reset (and an abort costs an error with its stack).
      if (!finished) abort.abort();
      outgoing.push('end');
    },
  };
};

type GrpcProcessor = new (
  address: string,
  credentials: grpc.ChannelCredentials,
) => grpc.Client & { Process(metadata: grpc.Metadata): grpc.ClientDuplexStream<unknown, unknown> };

let grpcProcessor: GrpcProcessor | undefined;

function loadGrpcProcessor(): GrpcProcessor {
  if (grpcProcessor !== undefined) return grpcProcessor;
  const definition = protoLoader.loadSync('envoy/service/ext_proc/v3/external_processor.proto', {
    includeDirs: [join(process.cwd(), 'proto', 'envoy-ext-proc')],
    keepCase: true,
    oneofs: true,
    longs: String,
    enums: Number,
    defaults: false,
  });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    envoy: { service: { ext_proc: { v3: { ExternalProcessor: GrpcProcessor } } } };
  };
  grpcProcessor = pkg.envoy.service.ext_proc.v3.ExternalProcessor;
  return grpcProcessor;
}

function toGrpc(message: Sent): Record<string, unknown> {
  const field = message.kind.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
  if ('headers' in message) {
    const headers = message.headers.map(([key, value]) =>
      key.startsWith(':') ? { key, value } : { key, raw_value: Buffer.from(value) },
    );
    return { [field]: { headers: { headers }, end_of_stream: message.endOfStream } };
  }
  return { [field]: { body: Buffer.from(message.body), end_of_stream: message.endOfStream } };
}

interface GrpcHeader {
  header?: { key?: string; value?: string; raw_value?: Buffer };
}

function fromGrpc(response: Record<string, unknown>): Answer {
  const kind = String(response.response ?? 'none').replace(/_([a-z])/g, (_, c: string) =>
    c.toUpperCase(),
  );
  const value = (response[String(response.response)] ?? {}) as Record<string, never>;
  if (kind === 'immediateResponse') {
    const headers: Record<string, string> = {};
    let usedValue = false;
    const set = ((value.headers as { set_headers?: GrpcHeader[] } | undefined)?.set_headers ??
      []) as GrpcHeader[];
    for (const h of set) {
      if ((h.header?.value ?? '') !== '') usedValue = true;
      headers[h.header?.key ?? ''] = Buffer.from(h.header?.raw_value ?? []).toString('utf8');
    }
    return {
      kind,
      status: (value.status as { code?: number } | undefined)?.code ?? 0,
      headers,
      usedValue,
      text: Buffer.from((value.body as Buffer | undefined) ?? []).toString('utf8'),
    };
  }
  const common = (value.response ?? {}) as {
    body_mutation?: { body?: Buffer };
    header_mutation?: { remove_headers?: string[] };
  };
  return {
    kind,
    ...(common.body_mutation?.body === undefined ? {} : { body: common.body_mutation.body }),
    ...(common.header_mutation === undefined
      ? {}
      : { removeHeaders: common.header_mutation.remove_headers ?? [] }),
  };
}

/** The @grpc/grpc-js client with @grpc/proto-loader, over h2c. */
export const grpcJsClient: Client = (address, metadata) => {
  const Processor = loadGrpcProcessor();
  const client = new Processor(address, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  const call = client.Process(md);
  const answers = new Queue<Answer | 'end'>();
  let ended = false;
  const finish = () => {
    if (ended) return;
    ended = true;
    answers.push('end');
    client.close();
  };
  call.on('data', (data) => answers.push(fromGrpc(data as Record<string, unknown>)));
  call.on('end', finish);
  call.on('error', finish);
  return {
    send: (m) => call.write(toGrpc(m)),
    receive: () => answers.shift(),
    end: () => call.end(),
    cancel: () => {
      if (!ended) call.cancel();
    },
  };
};

export const CLIENTS: [string, Client][] = [
  ['connect-node', connectClient],
  ['grpc-js', grpcJsClient],
];

/** An HTTP request as the gateway's client sent it. */
export interface HttpRequest {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
}

/** What the client got: the processor's immediate answer, or the upstream's after forwarding. */
export type Outcome =
  | {
      blocked: true;
      status: number;
      headers: Record<string, string>;
      text: string;
      usedValue: boolean;
    }
  | { blocked: false; forwardedBody: Buffer | undefined; removedHeaders: string[] };

/**
 * One MCP exchange through the processor as a buffered gateway runs it: request headers, the
 * whole body, then (when forwarded) the upstream's response headers and body, then half-close.
 */
export async function exchange(
  client: Client,
  address: string,
  metadata: Record<string, string>,
  request: HttpRequest,
): Promise<Outcome> {
  const stream = client(address, metadata);
  try {
    const body =
      request.body === undefined
        ? undefined
        : typeof request.body === 'string'
          ? Buffer.from(request.body)
          : request.body;
    const headers: [string, string][] = [
      [':method', request.method],
      [':path', request.path],
      [':authority', 'mcp.example'],
      [':scheme', 'http'],
      ...Object.entries(request.headers ?? MCP_HEADERS),
    ];
    stream.send({ kind: 'requestHeaders', headers, endOfStream: body === undefined });
    let answer = await expectAnswer(stream, 'requestHeaders');
    if (answer.kind === 'immediateResponse') return blockedOutcome(answer);
    let forwardedBody: Buffer | undefined;
    let removedHeaders: string[] = [];
    if (body !== undefined) {
      stream.send({ kind: 'requestBody', body, endOfStream: true });
      answer = await expectAnswer(stream, 'requestBody');
      if (answer.kind === 'immediateResponse') return blockedOutcome(answer);
      forwardedBody = answer.body ?? Buffer.from(body);
      removedHeaders = answer.removeHeaders ?? [];
    }
    stream.send({
      kind: 'responseHeaders',
      headers: [
        [':status', '200'],
        ['content-type', 'application/json'],
      ],
      endOfStream: false,
    });
    await expectAnswer(stream, 'responseHeaders');
    stream.send({
      kind: 'responseBody',
      body: Buffer.from('{"jsonrpc":"2.0","id":1,"result":{}}'),
      endOfStream: true,
    });
    await expectAnswer(stream, 'responseBody');
    stream.end();
    if ((await stream.receive()) !== 'end')
      throw new Error('the processor answered past the exchange');
    return { blocked: false, forwardedBody, removedHeaders };
  } finally {
    stream.cancel();
  }
}

/** The headers an MCP client sends on a POST to a Streamable HTTP endpoint. */
export const MCP_HEADERS: Record<string, string> = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-06-18',
};

async function expectAnswer(stream: GatewayStream, kind: string): Promise<Answer> {
  const answer = await stream.receive();
  if (answer === 'end')
    throw new Error(`the processor closed the stream instead of answering ${kind}`);
  if (answer.kind !== kind && answer.kind !== 'immediateResponse') {
    throw new Error(`answered ${answer.kind} to ${kind}`);
  }
  return answer;
}

function blockedOutcome(answer: Answer): Outcome {
  return {
    blocked: true,
    status: answer.status ?? 0,
    headers: answer.headers ?? {},
    text: answer.text ?? '',
    usedValue: answer.usedValue === true,
  };
}

/** A JSON-RPC `tools/call` body. */
export function toolCall(
  id: number | string | null,
  name: string,
  args: unknown,
): Record<string, unknown> {
  return {
    jsonrpc: '2.0',
    ...(id === null ? {} : { id }),
    method: 'tools/call',
    params: { name, arguments: args },
  };
}
