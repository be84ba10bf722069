import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, type ServiceImpl } from '@connectrpc/connect';
import {
  DatasetErrors,
  type DatasetService,
  type DatasetUploadResult,
} from '../../datasets/index.js';
import { callerOf, type IdempotencyExecutor, keyed, requestDigest } from './context.js';
import {
  type DatasetConfig,
  type DatasetService as DatasetServiceDesc,
  type DatasetUploadResult as DatasetUploadResultMessage,
  DatasetUploadResultSchema,
} from './gen/touchstone/v1alpha1/datasets_pb.js';

function resultMessage(result: DatasetUploadResult): DatasetUploadResultMessage {
  return create(DatasetUploadResultSchema, {
    path: result.path,
    records: BigInt(result.records),
    sha256: result.sha256,
  });
}

function requestOf(config: DatasetConfig | undefined) {
  return { project: config?.project ?? '', name: config?.name ?? '', format: config?.format ?? '' };
}

/**
 * `touchstone.v1alpha1.DatasetService`: the same application calls as the REST upload. A stream
 * is checked on its config message (permission, name, format) and takes a conversion slot before
 * any data is read, so a refused or over-capacity upload costs no transfer.
 */
export function datasetRpc(
  datasets: DatasetService,
  idempotency: IdempotencyExecutor | undefined,
): ServiceImpl<typeof DatasetServiceDesc> {
  return {
    async uploadDataset(requests, ctx) {
      const { principal } = callerOf(ctx);
      const stream = requests[Symbol.asyncIterator]();
      const first = await stream.next();
      if (first.done === true || first.value.message.case !== 'config') {
        throw new ConnectError(
          'the first UploadDataset message must be a config (project, name, format)',
          Code.InvalidArgument,
        );
      }
      const request = requestOf(first.value.message.value);
      const target = datasets.target(principal, request);
      const slot = datasets.reserve();
      try {
        const chunks: Uint8Array[] = [];
        let bytes = 0;
        let messages = 1;
        for (let next = await stream.next(); next.done !== true; next = await stream.next()) {
          messages++;
          if (messages > datasets.limits.maxStreamMessages) {
            throw DatasetErrors.DATASET_STREAM_TOO_LONG(
              `the stream sent more than ${datasets.limits.maxStreamMessages} messages; send larger data chunks`,
            );
          }
          const message = next.value.message;
          if (message.case !== 'data') {
            throw new ConnectError(
              `message ${messages} is a config; only the first message may be one`,
              Code.InvalidArgument,
            );
          }
          bytes += message.value.length;
          if (bytes > datasets.limits.maxUploadBytes) {
            throw DatasetErrors.DATASET_TOO_LARGE(
              `the stream sent more than ${datasets.limits.maxUploadBytes} bytes of data; the upload limit is 64 MiB`,
            );
          }
          chunks.push(message.value);
        }
        const body = Buffer.concat(chunks, bytes);
        const result = await keyed(
          ctx,
          idempotency,
          'datasets.upload',
          () => requestDigest('UploadDataset', target.project, request.name, request.format, body),
          () => datasets.publish(principal, target, body),
        );
        return resultMessage(result);
      } finally {
        slot.release();
      }
    },

    async importDataset(request, ctx) {
      const { principal } = callerOf(ctx);
      if (request.config === undefined) {
        throw new ConnectError('config (project, name, format) is required', Code.InvalidArgument);
      }
      const config = requestOf(request.config);
      const result = await keyed(
        ctx,
        idempotency,
        'datasets.import',
        () =>
          requestDigest('ImportDataset', config.project, config.name, config.format, request.uri),
        () => datasets.import(principal, { ...config, uri: request.uri }),
      );
      return resultMessage(result);
    },
  };
}
