import http2 from 'node:http2';
import { gzipSync } from 'node:zlib';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPEN_PRINCIPAL } from '../../auth/index.js';
import { GuardEngine } from '../engine.js';
import {
  ProcessingRequestSchema,
  type ProcessingResponse,
  ProcessingResponseSchema,
} from './gen/envoy/service/ext_proc/v3/external_processor_pb.js';
import { createExtProcServer, type ExtProcServer } from './server.js';

const PROCESS = '/envoy.service.ext_proc.v3.ExternalProcessor/Process';

const headersMessage = toBinary(
  ProcessingRequestSchema,
  create(ProcessingRequestSchema, {
    request: {
      case: 'requestHeaders',
      value: { headers: { headers: [{ key: ':method', value: 'GET' }] }, endOfStream: true },
    },
  }),
);

function frame(bytes: Uint8Array, compressed = false): Buffer {
  const out = Buffer.alloc(5 + bytes.length);
  out[0] = compressed ? 1 : 0;
  out.writeUInt32BE(bytes.length, 1);
  out.set(bytes, 5);
  return out;
}

interface Result {
  status?: number;
  grpcStatus?: string;
  grpcMessage?: string;
  acceptEncoding?: string;
  answers: ProcessingResponse[];
}

/** One raw stream: these headers, these writes (each its own DATA frame), then half-close. */
async function call(
  address: string,
  headers: http2.OutgoingHttpHeaders,
  writes: Buffer[],
): Promise<Result> {
  const session = http2.connect(`http://${address}`);
  try {
    return await new Promise<Result>((resolve, reject) => {
      const req = session.request({
        ':method': 'POST',
        ':path': PROCESS,
        te: 'trailers',
        ...headers,
      });
      const result: Result = { answers: [] };
      const read = (h: http2.IncomingHttpHeaders) => {
        if (h[':status'] !== undefined) result.status = Number(h[':status']);
        if (h['grpc-status'] !== undefined) result.grpcStatus = String(h['grpc-status']);
        if (h['grpc-message'] !== undefined) {
          result.grpcMessage = decodeURIComponent(String(h['grpc-message']));
        }
        if (h['grpc-accept-encoding'] !== undefined) {
          result.acceptEncoding = String(h['grpc-accept-encoding']);
        }
      };
      let data = Buffer.alloc(0);
      req.on('response', read);
      req.on('trailers', read);
      req.on('data', (chunk: Buffer) => {
        data = Buffer.concat([data, chunk]);
      });
      req.on('end', () => {
        for (let at = 0; at + 5 <= data.length; ) {
          const length = data.readUInt32BE(at + 1);
          result.answers.push(
            fromBinary(ProcessingResponseSchema, data.subarray(at + 5, at + 5 + length)),
          );
          at += 5 + length;
        }
        resolve(result);
      });
      req.on('error', reject);
      for (const w of writes) req.write(w);
      req.end();
    });
  } finally {
    session.close();
  }
}

describe('the processor gRPC transport (node:http2)', () => {
  let server: ExtProcServer;
  beforeAll(async () => {
    server = createExtProcServer({
      host: '127.0.0.1',
      port: 0,
      maxStreams: 10,
      shutdownTimeoutMs: 1_000,
      guard: new GuardEngine({ policies: { get: async () => undefined } }),
      settings: {
        failOpen: false,
        maxBodyBytes: 1024,
        maxBatch: 10,
        bodyTimeoutMs: 1_000,
        decisionTimeoutMs: 1_000,
      },
      authenticate: async () => OPEN_PRINCIPAL,
    });
    await server.start();
  });
  afterAll(() => server.stop());

  it('reads a message split over many DATA frames, and answers with grpc-status 0', async () => {
    const bytes = frame(headersMessage);
    const pieces = Array.from(bytes, (b) => Buffer.from([b]));
    const out = await call(server.address(), { 'content-type': 'application/grpc' }, pieces);
    expect(out.status).toBe(200);
    expect(out.answers.map((a) => a.response.case)).toEqual(['requestHeaders']);
    expect(out.grpcStatus).toBe('0');
  });

  it('reads two messages in one DATA frame, and a gzip-compressed one', async () => {
    const two = Buffer.concat([frame(headersMessage), frame(headersMessage)]);
    const plain = await call(server.address(), { 'content-type': 'application/grpc+proto' }, [two]);
    expect(plain.answers).toHaveLength(2);
    const gzip = await call(
      server.address(),
      { 'content-type': 'application/grpc', 'grpc-encoding': 'gzip' },
      [frame(gzipSync(headersMessage), true)],
    );
    expect(gzip.answers.map((a) => a.response.case)).toEqual(['requestHeaders']);
    expect(gzip.grpcStatus).toBe('0');
  });

  it('refuses another method, another content type and an unknown compression, echoing none', async () => {
    const other = await call(
      server.address(),
      {
        ':path': '/envoy.service.ext_proc.v3.ExternalProcessor/Other',
        'content-type': 'application/grpc',
      },
      [],
    );
    expect(other.grpcStatus).toBe('12');
    expect(other.grpcMessage).toBe(
      'only envoy.service.ext_proc.v3.ExternalProcessor/Process is served here',
    );
    const json = await call(server.address(), { 'content-type': 'application/json' }, []);
    expect(json.status).toBe(415);
    const snappy = await call(
      server.address(),
      { 'content-type': 'application/grpc', 'grpc-encoding': 'snappy-secret' },
      [frame(headersMessage, true)],
    );
    expect(snappy.grpcStatus).toBe('12');
    expect(snappy.acceptEncoding).toBe('identity,gzip,deflate,br');
    expect(snappy.grpcMessage).not.toContain('snappy-secret');
  });

  it('a compressed message that inflates past the cap is refused as too large (413)', async () => {
    const bomb = gzipSync(Buffer.alloc(2 * 1024 * 1024));
    const out = await call(
      server.address(),
      { 'content-type': 'application/grpc', 'grpc-encoding': 'gzip' },
      [frame(bomb, true)],
    );
    const [answer] = out.answers;
    expect(answer?.response.case).toBe('immediateResponse');
    expect(
      answer?.response.case === 'immediateResponse' && answer.response.value.status?.code,
    ).toBe(413);
  });
});
