import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type {
  ConversionSlot,
  DatasetFormat,
  DatasetService,
  DatasetTarget,
} from '../../datasets/index.js';
import { DatasetErrors } from '../../datasets/index.js';
import { one, type Query } from '../context.js';
import { ApiErrors } from '../error-codes.js';
import { sendError } from '../errors.js';
import { pageOf, parseQuery } from '../validate.js';

export const DatasetUploadQuerySchema = z.strictObject({
  project: z.string().min(1).optional(),
  format: z.enum(['jsonl', 'parquet']).optional(),
});

/** Content types that say which format the body is in (when `format` is not given). */
const FORMAT_OF_TYPE: Readonly<Record<string, DatasetFormat>> = {
  'application/vnd.apache.parquet': 'parquet',
  'application/x-parquet': 'parquet',
  'application/parquet': 'parquet',
  'application/jsonl': 'jsonl',
  'application/x-jsonlines': 'jsonl',
  'application/jsonlines': 'jsonl',
  'application/json-lines': 'jsonl',
  'application/x-ndjson': 'jsonl',
  'application/ndjson': 'jsonl',
  'application/json': 'jsonl',
};

function mediaType(request: FastifyRequest): string {
  return String(request.headers['content-type'] ?? '')
    .split(';')[0]
    ?.trim()
    .toLowerCase() as string;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The dataset upload's checked target and conversion slot, taken before the body is read. */
    datasetUpload?: { target: DatasetTarget; slot: ConversionSlot };
  }
}

/**
 * `GET /v1alpha1/datasets?project=` lists a project's published datasets (paged).
 * `POST /v1alpha1/datasets/{name}/upload?project=&format=jsonl|parquet` with the file as the raw
 * body (any content type but multipart; curl's `--data-binary @file` works as is). The caller's
 * permission, the name and the format are checked and a conversion slot is taken before the body
 * is read, so a refused upload transfers nothing; the body limit here is the dataset limit
 * (64 MiB), not the server's JSON body limit.
 */
export async function datasetRoutes(
  app: FastifyInstance,
  { datasets }: { datasets: DatasetService },
): Promise<void> {
  const limit = datasets.limits.maxUploadBytes;
  // This plugin's own parsers (encapsulated): the body stays bytes whatever its type says.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: limit }, (_request, body, done) =>
    done(null, body),
  );

  app.get('/v1alpha1/datasets', async (request) => {
    const { project, page } = pageOf(request.query as Query);
    const result = await datasets.list(request.principal, project, page);
    return {
      datasets: result.items,
      ...(result.nextPageToken === undefined ? {} : { next_page_token: result.nextPageToken }),
    };
  });

  // One version's records (`sha256`; the newest version when absent), paged: a preview.
  app.get('/v1alpha1/datasets/:name/records', async (request) => {
    const query = request.query as Query;
    const { project, page } = pageOf(query);
    const result = await datasets.records(
      request.principal,
      {
        project,
        name: (request.params as { name: string }).name,
        sha256: one(query, 'sha256'),
      },
      page,
    );
    return {
      path: result.path,
      total: result.total,
      records: result.records,
      ...(result.nextPageToken === undefined ? {} : { next_page_token: result.nextPageToken }),
    };
  });

  app.post(
    '/v1alpha1/datasets/:name/upload',
    {
      bodyLimit: limit,
      config: { idempotency: 'datasets.upload' },
      errorHandler: (err, request, reply) =>
        sendError(
          request,
          reply,
          (err as FastifyError).code === 'FST_ERR_CTP_BODY_TOO_LARGE'
            ? DatasetErrors.DATASET_TOO_LARGE(
                `the upload exceeds ${limit} bytes; the dataset upload limit is 64 MiB`,
              )
            : err,
          limit,
        ),
      preParsing: async (request, _reply, payload) => {
        if (mediaType(request).startsWith('multipart/')) {
          throw ApiErrors.UNSUPPORTED_MEDIA_TYPE(
            'send the file itself as the request body, not a multipart form (curl --data-binary @FILE)',
          );
        }
        const { name } = request.params as { name: string };
        const query = parseQuery(DatasetUploadQuerySchema, request.query as Query);
        const target = datasets.target(request.principal, {
          project: query.project,
          name,
          format: query.format ?? FORMAT_OF_TYPE[mediaType(request)],
        });
        request.datasetUpload = { target, slot: datasets.reserve() };
        return payload;
      },
      onResponse: async (request) => request.datasetUpload?.slot.release(),
      onRequestAbort: async (request) => request.datasetUpload?.slot.release(),
    },
    async (request) => {
      const upload = request.datasetUpload;
      if (upload === undefined) throw new Error('dataset upload reached its handler unchecked');
      try {
        const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        return await datasets.publish(request.principal, upload.target, body);
      } finally {
        upload.slot.release();
      }
    },
  );
}
