import type { FastifyInstance } from 'fastify';
import { authorize } from '../../auth/index.js';
import { decodeOtlpJson, decodeOtlpProtobuf, type IngestService } from '../../ingest/index.js';
import { one, type Query } from '../context.js';
import { ApiErrors } from '../error-codes.js';
import { decodedPayload, otlpBodyParsers } from '../otlp-body.js';
import {
  exportResponse,
  OTLP_CONTENT_TYPE,
  otlpEncodingOf,
  partialSuccessMessage,
} from '../otlp-wire.js';

export interface OtlpRouteDeps {
  ingest: IngestService;
  bodyLimit: number;
  maxAttributeBytes: number;
  /** Requests stored at once before new ones are told to retry (503 + Retry-After). */
  maxInFlight: number;
}

/**
 * OTLP/HTTP trace receiver (`POST /v1/traces`): protobuf or JSON, gzip/deflate, answered per the
 * OTLP/HTTP spec only after the spans are durably stored.
 */
export async function otlpRoutes(app: FastifyInstance, deps: OtlpRouteDeps): Promise<void> {
  otlpBodyParsers(app, deps.bodyLimit);

  let inFlight = 0;

  app.post(
    '/v1/traces',
    {
      config: { otlp: true },
      preParsing: async (request, _reply, payload) =>
        decodedPayload(request, payload, deps.bodyLimit),
    },
    async (request, reply) => {
      // `?project=` lets a caller without a key project (no auth on loopback) pick one; a key
      // naming another project than its own is refused by authorize.
      const asked = one(request.query as Query, 'project');
      const project = authorize(request.principal, 'traces.write', asked || undefined);
      const encoding = otlpEncodingOf(request.headers['content-type']);
      if (inFlight >= deps.maxInFlight) {
        throw ApiErrors.OVERLOADED('the server is busy storing other requests; retry shortly', {
          retryAfterSeconds: 1,
        });
      }
      inFlight++;
      try {
        const options = { maxAttributeBytes: deps.maxAttributeBytes, limits: deps.ingest.limits };
        const body = request.body as Buffer | string;
        const decoded =
          encoding === 'protobuf'
            ? decodeOtlpProtobuf(body as Buffer, options)
            : decodeOtlpJson(typeof body === 'string' ? body : body.toString('utf8'), options);
        const result = await deps.ingest.ingest(
          { project, labels: { ...request.principal.labels }, source: '' },
          decoded,
        );
        const message = partialSuccessMessage(
          result.rejected,
          result.rejectReasons,
          result.rejectedSpans,
        );
        return reply
          .type(OTLP_CONTENT_TYPE[encoding])
          .send(exportResponse(encoding, result.rejected, message));
      } finally {
        inFlight--;
      }
    },
  );
}
