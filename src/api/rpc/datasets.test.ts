import { create } from '@bufbuild/protobuf';
import { createContextValues, createHandlerContext } from '@connectrpc/connect';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { OPEN_PRINCIPAL } from '../../auth/index.js';
import { type DatasetRoot, DatasetService } from '../../datasets/index.js';
import { CALLER } from './context.js';
import { datasetRpc } from './datasets.js';
import {
  DatasetService as DatasetServiceDesc,
  UploadDatasetRequestSchema,
} from './gen/touchstone/v1alpha1/datasets_pb.js';

/** The UploadDataset handler's stream rules, called directly (no transport, nothing stored). */

const puts: string[] = [];
const root: DatasetRoot = {
  location: 'memory',
  relativeKey: (uri) => uri,
  put: async (key) => {
    puts.push(key);
  },
  get: async () => undefined,
  list: async () => ({ objects: [], truncated: false }),
  close: async () => {},
};

function context() {
  return createHandlerContext({
    service: DatasetServiceDesc,
    method: DatasetServiceDesc.method.uploadDataset,
    protocolName: 'grpc',
    requestMethod: 'POST',
    url: 'http://127.0.0.1/touchstone.v1alpha1.DatasetService/UploadDataset',
    contextValues: createContextValues().set(CALLER, {
      principal: OPEN_PRINCIPAL,
      requestId: 'r1',
      log: pino({ level: 'silent' }),
    }),
  });
}

const config = create(UploadDatasetRequestSchema, {
  message: { case: 'config', value: { project: 'p', name: 'd', format: 'jsonl' } },
});
const data = (text: string) =>
  create(UploadDatasetRequestSchema, { message: { case: 'data', value: Buffer.from(text) } });

describe('UploadDataset stream rules', () => {
  const service = new DatasetService({ root, logger: pino({ level: 'silent' }) });
  const rpc = datasetRpc(service, undefined);

  it('accepts one config and then at most 100000 data messages', async () => {
    const blank = data('\n');
    async function* atLimit() {
      yield config;
      for (let i = 0; i < 99_999; i++) yield blank;
      yield data('{"input":"last"}');
    }
    const result = await rpc.uploadDataset(atLimit(), context());
    expect(result.records).toBe(1n);
    async function* overLimit() {
      yield config;
      for (let i = 0; i < 100_001; i++) yield blank;
    }
    await expect(rpc.uploadDataset(overLimit(), context())).rejects.toMatchObject({
      code: 'DATASET_STREAM_TOO_LONG',
    });
    // One dataset published (and its details beside it), none for the refused stream.
    expect(puts.filter((key) => key.startsWith('datasets/'))).toHaveLength(1);
  });

  it('gives the conversion slot back whatever happens', async () => {
    async function* broken() {
      yield config;
      yield data('{"input":');
    }
    for (let i = 0; i < 3; i++) {
      await expect(rpc.uploadDataset(broken(), context())).rejects.toMatchObject({
        code: 'DATASET_ROW_INVALID',
      });
    }
    async function* failing() {
      yield config;
      throw new Error('client went away');
    }
    await expect(rpc.uploadDataset(failing(), context())).rejects.toThrow('client went away');
    const slots = [service.reserve(), service.reserve()];
    for (const slot of slots) slot.release();
  });
});
