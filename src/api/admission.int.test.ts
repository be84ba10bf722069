import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { create } from '@bufbuild/protobuf';
import { BinaryReader } from '@bufbuild/protobuf/wire';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { type TestApp, testApp } from '../../test/support/app.js';
import { agentTrace, protobufBody, recordSpans } from '../../test/support/otel.js';
import { SQLITE_FILE_NAME } from '../store/index.js';
import {
  DatasetService,
  UploadDatasetRequestSchema,
} from './rpc/gen/touchstone/v1alpha1/datasets_pb.js';

const PB = { 'content-type': 'application/x-protobuf' };

/** google.rpc.Status (protobuf) → {code, message}. */
function rpcStatus(body: Buffer): { code: number; message: string } {
  const out = { code: 0, message: '' };
  const r = new BinaryReader(body);
  while (r.pos < r.len) {
    const [field, wireType] = r.tag();
    if (field === 1) out.code = r.int32();
    else if (field === 2) out.message = r.string();
    else r.skip(wireType);
  }
  return out;
}

function batch(traces = 1): Buffer {
  return protobufBody(
    recordSpans({ 'service.name': 'admission' }, (tracer) => {
      for (let i = 0; i < traces; i++) agentTrace(tracer);
    }),
  );
}

describe('write admission', () => {
  let t: TestApp;
  const stalled: PassThrough[] = [];
  afterEach(async () => {
    for (const s of stalled.splice(0)) s.destroy();
    await t.close();
  });

  /** An OTLP request admitted and held: its body never ends until `stream.end()`. */
  function stalledPost(headers: Record<string, string> = {}) {
    const stream = new PassThrough();
    stalled.push(stream);
    stream.write(Buffer.alloc(10));
    const answer = t.app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: stream,
      headers: { ...PB, ...headers },
    });
    return { stream, answer };
  }

  const post = (payload: Buffer | string, headers: Record<string, string> = PB) =>
    t.app.server.inject({ method: 'POST', url: '/v1/traces', payload, headers });

  /** Lets the server take in what was written so far. */
  const settle = () => new Promise((r) => setTimeout(r, 20));

  it('sheds writes past the request limit before reading them, each in its own error format, while reads answer', async () => {
    t = await testApp({ limits: { max_inflight_write_requests: 2 } });
    stalledPost();
    stalledPost();
    await settle();

    const pb = await post(batch());
    expect(pb.statusCode).toBe(503);
    expect(pb.headers['retry-after']).toBe('1');
    expect(pb.headers['content-type']).toBe('application/x-protobuf');
    expect(rpcStatus(pb.rawPayload)).toEqual({
      code: 14,
      message: expect.stringMatching(/limit of 2 write requests in flight/),
    });

    const json = await post('{"resourceSpans":[]}', { 'content-type': 'application/json' });
    expect(json.statusCode).toBe(503);
    expect(json.headers['retry-after']).toBe('1');
    expect(json.json()).toEqual({ code: 14, message: expect.any(String) });

    const rest = await t.app.server.inject({
      method: 'DELETE',
      url: '/v1alpha1/policies/nightly',
    });
    expect(rest.statusCode).toBe(503);
    expect(rest.headers['retry-after']).toBe('1');
    expect(rest.json().error).toMatchObject({ code: 'OVERLOADED', kind: 'unavailable' });

    const rpc = await t.app.server.inject({
      method: 'POST',
      url: '/touchstone.v1alpha1.RunService/DeleteRun',
      payload: '{"id":"run_1"}',
      headers: { 'content-type': 'application/json' },
    });
    expect(rpc.statusCode).toBe(503);
    expect(rpc.headers['retry-after']).toBe('1');
    expect(rpc.json()).toMatchObject({ code: 'unavailable' });

    for (const url of ['/v1alpha1/traces', '/v1alpha1/scores', '/healthz']) {
      expect((await t.app.server.inject({ url })).statusCode).toBe(200);
    }
    const metrics = (await t.app.server.inject({ url: '/metrics' })).body;
    expect(metrics).toContain('touchstone_requests_shed_total{reason="requests"} 4');
    expect(metrics).toContain('touchstone_write_requests_in_flight 2');
  });

  it('frees the place of a write once it is answered', async () => {
    t = await testApp({ limits: { max_inflight_write_requests: 1 } });
    const body = batch();
    const held = stalledPost();
    await settle();
    expect((await post(body)).statusCode).toBe(503);
    held.stream.end();
    expect((await held.answer).statusCode).toBe(400);
    expect((await post(body)).statusCode).toBe(200);
    expect((await post(body)).statusCode).toBe(200);
  });

  it('sheds a write whose declared length does not fit the bytes budget, but lets a large one in alone', async () => {
    const body = batch(40);
    t = await testApp({ limits: { max_inflight_write_bytes: body.length - 1 } });
    expect((await post(body)).statusCode).toBe(200);
    stalledPost({ 'content-length': '100' });
    await settle();
    const res = await post(body);
    expect(res.statusCode).toBe(503);
    expect(rpcStatus(res.rawPayload).message).toMatch(/bytes of write bodies in flight/);
    expect((await post(batch())).statusCode).toBe(200);
  });

  it('counts bodies without a length, and inflated bodies, as their bytes arrive', async () => {
    const body = batch(40);
    t = await testApp({ limits: { max_inflight_write_bytes: body.length } });
    stalledPost({ 'content-length': '100' });
    await settle();

    const chunked = new PassThrough();
    const answer = t.app.server.inject({
      method: 'POST',
      url: '/v1/traces',
      payload: chunked,
      headers: PB,
    });
    chunked.end(body);
    const res = await answer;
    expect(res.statusCode).toBe(503);
    expect(rpcStatus(res.rawPayload).message).toMatch(/bytes of write bodies in flight/);

    const gzipped = gzipSync(body);
    expect(gzipped.length).toBeLessThan(body.length / 2);
    const inflated = await post(gzipped, { ...PB, 'content-encoding': 'gzip' });
    expect(inflated.statusCode).toBe(503);
    const metrics = (await t.app.server.inject({ url: '/metrics' })).body;
    expect(metrics).toContain('touchstone_requests_shed_total{reason="bytes"} 2');
  });

  it('leaves a streamed RPC body to its handler: a gRPC upload larger than the budget is stored whole', async () => {
    t = await testApp({ listen: '127.0.0.1:0', limits: { max_inflight_write_bytes: 64 * 1024 } });
    const baseUrl = `http://${await t.app.listen()}`;
    stalledPost({ 'content-length': '100' });
    await settle();
    const rows = Array.from({ length: 4000 }, (_, i) =>
      JSON.stringify({ id: `r${i}`, input: 'x'.repeat(60) }),
    );
    const file = Buffer.from(rows.join('\n'));
    async function* upload() {
      yield create(UploadDatasetRequestSchema, {
        message: { case: 'config', value: { project: 'default', name: 'big', format: 'jsonl' } },
      });
      for (let at = 0; at < file.length; at += 16 * 1024) {
        yield create(UploadDatasetRequestSchema, {
          message: { case: 'data', value: file.subarray(at, at + 16 * 1024) },
        });
      }
    }
    const client = createClient(DatasetService, createGrpcTransport({ baseUrl }));
    expect(file.length).toBeGreaterThan(4 * 64 * 1024);
    expect((await client.uploadDataset(upload())).records).toBe(4000n);
    const metrics = (await t.app.server.inject({ url: '/metrics' })).body;
    expect(metrics).toContain('touchstone_requests_shed_total{reason="bytes"} 0');
  });

  it('reports how long a write waited for the SQLite write lock another connection held', async () => {
    t = await testApp();
    const other = new BetterSqlite3(join(t.dataDir, SQLITE_FILE_NAME));
    try {
      other.exec('begin immediate');
      setTimeout(() => other.exec('commit'), 300);
      expect((await post(batch())).statusCode).toBe(200);
    } finally {
      other.close();
    }
    const metrics = (await t.app.server.inject({ url: '/metrics' })).body;
    const waited = /^touchstone_store_lock_wait_seconds_total (\S+)$/m.exec(metrics)?.[1];
    expect(Number(waited)).toBeGreaterThan(0.25);
    expect(Number(waited)).toBeLessThan(5);
  });
});
