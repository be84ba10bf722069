import type { FastifyInstance } from 'fastify';
import { authorize } from '../../auth/index.js';
import {
  decodeOtlpJsonInSlices,
  decodeOtlpProtobufInSlices,
  type IngestService,
  nextTurn,
} from '../../ingest/index.js';
import type { Turnstile, WriteAdmission } from '../admission.js';
import { one, type Query } from '../context.js';
import { decodedPayload, inTurn, otlpBodyParsers } from '../otlp-body.js';
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
  /** Counts the bytes of inflated bodies against the write budget. */
  admission: WriteAdmission;
  /** Turns to decode and store, shared by `/v1/traces` and `/v1/logs`. */
  turns: Turnstile;
}

/**
 * OTLP/HTTP trace receiver (`POST /v1/traces`): protobuf or JSON, gzip/deflate, answered per the
 * OTLP/HTTP spec only after the spans are durably stored. Admitted as a write (admission.ts)
 * before its body is read; decoded and stored in its turn.
 */
export async function otlpRoutes(app: FastifyInstance, deps: OtlpRouteDeps): Promise<void> {
  otlpBodyParsers(app, deps.bodyLimit);

  app.post(
    '/v1/traces',
    {
      config: { otlp: true },
      onRequest: async () => deps.turns.refuseIfBacklogged(),
      preParsing: async (request, _reply, payload) =>
        decodedPayload(request, payload, deps.bodyLimit, deps.admission),
    },
    async (request, reply) => {
      // `?project=` lets a caller without a key project (no auth on loopback) pick one; a key
      // naming another project than its own is refused by authorize.
      const asked = one(request.query as Query, 'project');
      const project = authorize(request.principal, 'traces.write', asked || undefined);
      const encoding = otlpEncodingOf(request.headers['content-type']);
      const result = await inTurn(request, reply, deps.turns, async () => {
        const options = { maxAttributeBytes: deps.maxAttributeBytes, limits: deps.ingest.limits };
        const body = request.body as Buffer | string;
        // In slices: a body of megabytes must not hold health checks and other requests while it
        // is read (but for JSON.parse, which cannot be cut).
        const decoded =
          encoding === 'protobuf'
            ? await decodeOtlpProtobufInSlices(body as Buffer, options, nextTurn)
            : await decodeOtlpJsonInSlices(
                typeof body === 'string' ? body : body.toString('utf8'),
                options,
                nextTurn,
              );
        return deps.ingest.ingest(
          { project, labels: { ...request.principal.labels }, source: '' },
          decoded,
        );
      });
      const message = partialSuccessMessage(
        result.rejected,
        result.rejectReasons,
        result.rejectedSpans,
      );
      return reply
        .type(OTLP_CONTENT_TYPE[encoding])
        .send(exportResponse(encoding, result.rejected, message));
    },
  );
}
