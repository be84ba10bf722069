import { mkdirSync, writeFileSync } from 'node:fs';
import { connect as connectHttp2 } from 'node:http2';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import {
  type Client,
  Code,
  ConnectError,
  createClient,
  type Interceptor,
} from '@connectrpc/connect';
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from '@connectrpc/connect-node';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../../test/support/app.js';
import { storeVariants } from '../../../test/support/stores.js';
import { OPEN_PRINCIPAL } from '../../auth/index.js';
import {
  DatasetService,
  type UploadDatasetRequest,
  UploadDatasetRequestSchema,
} from './gen/touchstone/v1alpha1/datasets_pb.js';
import { RunService } from './gen/touchstone/v1alpha1/runs_pb.js';

/**
 * The Connect RPC services on the real listening port: gRPC over cleartext HTTP/2, Connect over
 * HTTP/1.1 with JSON, gRPC-Web; authentication, refusals in each protocol, limits, idempotency,
 * DeleteRun; and REST and OTLP still answering on the same port over HTTP/1.1 and HTTP/2.
 */

const SECRET = 'sk-live-STREAMED-ROW-0b7e';

function config(name: string, format = 'jsonl', project = 'p1'): UploadDatasetRequest {
  return create(UploadDatasetRequestSchema, {
    message: { case: 'config', value: { project, name, format } },
  });
}

function data(bytes: string | Uint8Array): UploadDatasetRequest {
  return create(UploadDatasetRequestSchema, {
    message: { case: 'data', value: typeof bytes === 'string' ? Buffer.from(bytes) : bytes },
  });
}

async function* stream(...messages: UploadDatasetRequest[]) {
  yield* messages;
}

async function refusal(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (err) {
    const e = ConnectError.from(err);
    expect(e.rawMessage).not.toContain(SECRET);
    return e;
  }
  throw new Error('expected the call to be refused');
}

describe.each(storeVariants())('Connect RPC on the main port on $name', (variant) => {
  let t: TestApp;
  let dispose: () => Promise<void>;
  let baseUrl: string;
  const keys: Record<'editor' | 'viewer' | 'admin', string> = { editor: '', viewer: '', admin: '' };

  const bearer =
    (key: string | undefined): Interceptor =>
    (next) =>
    (req) => {
      if (key !== undefined) req.header.set('authorization', `Bearer ${key}`);
      return next(req);
    };
  const transports = (key: string | undefined) => ({
    grpc: createGrpcTransport({ baseUrl, interceptors: [bearer(key)] }),
    connectJson: createConnectTransport({
      baseUrl,
      httpVersion: '1.1',
      useBinaryFormat: false,
      interceptors: [bearer(key)],
    }),
    grpcWeb: createGrpcWebTransport({ baseUrl, httpVersion: '1.1', interceptors: [bearer(key)] }),
  });
  let datasets: Record<keyof ReturnType<typeof transports>, Client<typeof DatasetService>>;

  beforeAll(async () => {
    const store = await variant.open();
    dispose = store.dispose;
    t = await testApp({ ...store.overrides, auth: {}, listen: '127.0.0.1:0' });
    for (const role of ['editor', 'viewer', 'admin'] as const) {
      keys[role] = (
        await t.app.keys.create(OPEN_PRINCIPAL, { project: 'p1', roles: [role] })
      ).secret;
    }
    baseUrl = `http://${await t.app.listen()}`;
    const tr = transports(keys.editor);
    datasets = {
      grpc: createClient(DatasetService, tr.grpc),
      connectJson: createClient(DatasetService, tr.connectJson),
      grpcWeb: createClient(DatasetService, tr.grpcWeb),
    };
  });
  afterAll(async () => {
    await t.close();
    await dispose();
  });

  it('uploads JSON Lines over gRPC (HTTP/2) in chunks that split rows', async () => {
    const file = Buffer.from(
      '{"id":"a","input":"2+2?","output":"4","reference":"4"}\n{"input":"capital?","expected":"Paris"}\n',
    );
    const result = await datasets.grpc.uploadDataset(
      stream(
        config('qa'),
        data(file.subarray(0, 10)),
        data(file.subarray(10, 50)),
        data(file.subarray(50)),
      ),
    );
    expect(result.records).toBe(2n);
    expect(result.path).toBe(`datasets/p1/qa/${result.sha256}.jsonl`);
    expect(await t.app.datasets.read('p1', result.path)).toEqual([
      { id: 'a', input: '2+2?', output: '4', reference: '4' },
      { id: '2', input: 'capital?', reference: 'Paris' },
    ]);
    // The REST upload of the same file publishes the same path.
    const rest = await t.app.server.inject({
      method: 'POST',
      url: '/v1alpha1/datasets/qa/upload?project=p1',
      payload: file,
      headers: { authorization: `Bearer ${keys.editor}`, 'content-type': 'application/jsonl' },
    });
    expect(rest.json().path).toBe(result.path);
  });

  it('uploads Parquet over Connect (HTTP/1.1, JSON) and over gRPC-Web', async () => {
    const file = new Uint8Array(
      parquetWriteBuffer({
        columnData: [
          { name: 'input', data: ['a', 'b', 'c'], type: 'STRING' },
          { name: 'output', data: ['a', 'x', 'c'], type: 'STRING' },
          { name: 'reference', data: ['a', 'b', 'c'], type: 'STRING' },
        ],
      }),
    );
    const viaConnect = await datasets.connectJson.uploadDataset(
      stream(config('pq', 'parquet'), data(file.subarray(0, 7)), data(file.subarray(7))),
    );
    expect(viaConnect.records).toBe(3n);
    const viaWeb = await datasets.grpcWeb.uploadDataset(stream(config('pq', ''), data(file)));
    expect(viaWeb.path).toBe(viaConnect.path);
  });

  it('imports from incoming/<project>/ with the documented Connect JSON call', async () => {
    mkdirSync(join(t.dataDir, 'datasets', 'incoming', 'p1'), { recursive: true });
    writeFileSync(
      join(t.dataDir, 'datasets', 'incoming', 'p1', 'batch.jsonl'),
      '{"input":"a","output":"a"}\n{"input":"b","output":"b"}\n{"input":"c","output":"c"}\n',
    );
    const res = await fetch(`${baseUrl}/touchstone.v1alpha1.DatasetService/ImportDataset`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${keys.editor}` },
      body: JSON.stringify({
        config: { project: 'p1', name: 'batch', format: 'jsonl' },
        uri: 'incoming/p1/batch.jsonl',
      }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { path: string; records: string; sha256: string };
    // int64 travels as a string in protobuf JSON.
    expect(body).toEqual({
      path: `datasets/p1/batch/${body.sha256}.jsonl`,
      records: '3',
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    const viaGrpc = await datasets.grpc.importDataset({
      config: { project: 'p1', name: 'batch' },
      uri: 'incoming/p1/batch.jsonl',
    });
    expect(viaGrpc.path).toBe(body.path);
    const outside = await refusal(
      datasets.grpc.importDataset({ config: { name: 'batch' }, uri: 'incoming/p2/batch.jsonl' }),
    );
    expect(outside.code).toBe(Code.InvalidArgument);
    expect(outside.metadata.get('touchstone-error-code')).toBe('DATASET_URI_REFUSED');
  });

  it('answers a bad row with INVALID_ARGUMENT naming the line, never the value', async () => {
    for (const client of Object.values(datasets)) {
      const err = await refusal(
        client.uploadDataset(
          stream(config('bad'), data(`{"input":"ok"}\n{"input":"x","token":"${SECRET}"}\n`)),
        ),
      );
      expect(err.code).toBe(Code.InvalidArgument);
      expect(err.metadata.get('touchstone-error-code')).toBe('DATASET_ROW_INVALID');
      expect(err.rawMessage).toContain('line 2, field token: unknown field');
      expect(err.metadata.get('x-request-id')).toBeTruthy();
    }
  });

  it('needs a config first, and only first', async () => {
    const noConfig = await refusal(datasets.grpc.uploadDataset(stream(data('{"input":"a"}'))));
    expect(noConfig.code).toBe(Code.InvalidArgument);
    expect(noConfig.rawMessage).toContain('first UploadDataset message must be a config');
    const twice = await refusal(
      datasets.grpc.uploadDataset(stream(config('x'), data('{"input":"a"}'), config('x'))),
    );
    expect(twice.code).toBe(Code.InvalidArgument);
    const name = await refusal(datasets.grpc.uploadDataset(stream(config('Bad Name'))));
    expect(name.metadata.get('touchstone-error-code')).toBe('DATASET_INVALID_REQUEST');
  });

  it('refuses callers without a key, with a bad key, or without datasets.write, in every protocol', async () => {
    for (const [key, code, errorCode] of [
      [undefined, Code.Unauthenticated, 'UNAUTHENTICATED'],
      ['tsk_not-a-key', Code.Unauthenticated, 'UNAUTHENTICATED'],
      [keys.viewer, Code.PermissionDenied, 'PERMISSION_DENIED'],
    ] as const) {
      for (const transport of Object.values(transports(key))) {
        const client = createClient(DatasetService, transport);
        const upload = await refusal(
          client.uploadDataset(stream(config('denied'), data('{"input":"a"}'))),
        );
        expect(upload.code).toBe(code);
        expect(upload.metadata.get('touchstone-error-code')).toBe(errorCode);
        const imported = await refusal(
          client.importDataset({ config: { name: 'denied' }, uri: 'incoming/p1/x.jsonl' }),
        );
        expect(imported.code).toBe(code);
      }
    }
    // Another project's dataset, with a key of p1.
    const other = await refusal(
      datasets.grpc.uploadDataset(stream(config('denied', 'jsonl', 'p2'), data('{"input":"a"}'))),
    );
    expect(other.code).toBe(Code.PermissionDenied);
  });

  it('refuses a third conversion with RESOURCE_EXHAUSTED and retry-after', async () => {
    const held = [t.app.datasets.reserve(), t.app.datasets.reserve()];
    try {
      const err = await refusal(
        datasets.grpc.uploadDataset(stream(config('busy'), data('{"input":"a"}'))),
      );
      expect(err.code).toBe(Code.ResourceExhausted);
      expect(err.metadata.get('touchstone-error-code')).toBe('DATASET_CAPACITY_EXHAUSTED');
      expect(err.metadata.get('retry-after')).toBe('2');
    } finally {
      for (const slot of held) slot.release();
    }
  });

  it('caps a stream at 64 MiB of data (the message count: datasets.test.ts)', async () => {
    const chunk = new Uint8Array(4 * 1024 * 1024).fill(0x20);
    const big = await refusal(
      datasets.grpc.uploadDataset(
        stream(config('big'), ...Array.from({ length: 17 }, () => data(chunk))),
      ),
    );
    expect(big.code).toBe(Code.ResourceExhausted);
    expect(big.metadata.get('touchstone-error-code')).toBe('DATASET_TOO_LARGE');
  });

  it('replays a keyed upload and refuses the key with another file', async () => {
    const key = `rpc-upload-${variant.name}`;
    const headers = { 'idempotency-key': key };
    const file = '{"input":"keyed"}\n';
    const first = await datasets.grpc.uploadDataset(stream(config('keyed'), data(file)), {
      headers,
    });
    let replayed: string | null = null;
    const again = await datasets.grpc.uploadDataset(stream(config('keyed'), data(file)), {
      headers,
      onHeader: (h) => {
        replayed = h.get('idempotent-replayed');
      },
    });
    expect(again.path).toBe(first.path);
    expect(replayed).toBe('true');
    const changed = await refusal(
      datasets.grpc.uploadDataset(stream(config('keyed'), data('{"input":"other"}\n')), {
        headers,
      }),
    );
    expect(changed.metadata.get('touchstone-error-code')).toBe('IDEMPOTENCY_KEY_REUSED');
  });

  it('deletes a finished run with DeleteRun, and refuses without runs.delete', async () => {
    const run = await t.app.runs.create(
      OPEN_PRINCIPAL,
      {
        name: 'to-delete',
        dataset: { records: [{ input: 'a', output: 'a', reference: 'a' }] },
        evaluators: [{ ref: 'exact-match' }],
      },
      { project: 'p1' },
    );
    const admin = createClient(RunService, transports(keys.admin).grpc);
    const editor = createClient(RunService, transports(keys.editor).connectJson);
    const denied = await refusal(editor.deleteRun({ id: run.id, project: 'p1' }));
    expect(denied.code).toBe(Code.PermissionDenied);
    // The executor finishes the run and releases its lease; until then deletion is refused.
    const deadline = Date.now() + 20_000;
    for (;;) {
      try {
        await admin.deleteRun({ id: run.id, project: 'p1' });
        break;
      } catch (err) {
        const e = ConnectError.from(err);
        expect(e.code).toBe(Code.FailedPrecondition);
        expect(e.metadata.get('touchstone-error-code')).toBe('RUN_NOT_FINISHED');
        if (Date.now() > deadline) throw e;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const gone = await refusal(admin.deleteRun({ id: run.id, project: 'p1' }));
    expect(gone.code).toBe(Code.NotFound);
    const empty = await refusal(admin.deleteRun({ id: '' }));
    expect(empty.code).toBe(Code.InvalidArgument);
  });

  it('still serves REST and OTLP on the same port over HTTP/1.1 and HTTP/2', async () => {
    const health = await fetch(`${baseUrl}/healthz`);
    expect(await health.json()).toEqual({ status: 'ok', service: 'touchstone' });
    const otlp = await fetch(`${baseUrl}/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${keys.editor}` },
      body: JSON.stringify({ resourceSpans: [] }),
    });
    expect(otlp.status).toBe(200);
    const session = connectHttp2(baseUrl);
    try {
      const get = (path: string, headers: Record<string, string> = {}) =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const req = session.request({ ':path': path, ...headers });
          let status = 0;
          let body = '';
          req.on('response', (h) => {
            status = Number(h[':status']);
          });
          req.setEncoding('utf8');
          req.on('data', (d: string) => {
            body += d;
          });
          req.on('end', () => resolve({ status, body }));
          req.on('error', reject);
          req.end();
        });
      expect(await get('/healthz')).toEqual({
        status: 200,
        body: '{"status":"ok","service":"touchstone"}',
      });
      const unauthenticated = await get('/v1alpha1/scores');
      expect(unauthenticated.status).toBe(401);
      expect(JSON.parse(unauthenticated.body).error.code).toBe('UNAUTHENTICATED');
      const scores = await get('/v1alpha1/scores?project=p1', {
        authorization: `Bearer ${keys.viewer}`,
      });
      expect(scores.status).toBe(200);
    } finally {
      session.close();
    }
  });
});
