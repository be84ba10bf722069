import type { FastifyInstance } from 'fastify';
import { authorize } from '../../auth/index.js';
import { decodeOtlpLogsJson, decodeOtlpLogsProtobuf } from '../../ingest/index.js';
import { one, type Query } from '../context.js';
import { decodedPayload, inTurn, otlpBodyParsers } from '../otlp-body.js';
import {
  exportResponse,
  logsPartialSuccessMessage,
  OTLP_CONTENT_TYPE,
  otlpEncodingOf,
} from '../otlp-wire.js';
import type { OtlpRouteDeps } from './otlp.js';

/**
 * OTLP/HTTP logs receiver (`POST /v1/logs`) for the GenAI events that instrumentations send as log
 * records (docs/ingest.md): the bodies, encodings, auth, admission, turns and answers of
 * `/v1/traces`; 200 only once the events are stored, with a partial success naming refused and
 * ignored records.
 */
export async function otlpLogRoutes(app: FastifyInstance, deps: OtlpRouteDeps): Promise<void> {
  otlpBodyParsers(app, deps.bodyLimit);

  app.post(
    '/v1/logs',
    {
      config: { otlp: true },
      onRequest: async () => deps.turns.refuseIfBacklogged(),
      preParsing: async (request, _reply, payload) =>
        decodedPayload(request, payload, deps.bodyLimit, deps.admission),
    },
    async (request, reply) => {
      const asked = one(request.query as Query, 'project');
      const project = authorize(request.principal, 'traces.write', asked || undefined);
      const encoding = otlpEncodingOf(request.headers['content-type']);
      const result = await inTurn(request, reply, deps.turns, () => {
        const options = { maxAttributeBytes: deps.maxAttributeBytes, limits: deps.ingest.limits };
        const body = request.body as Buffer | string;
        const decoded =
          encoding === 'protobuf'
            ? decodeOtlpLogsProtobuf(body as Buffer, options)
            : decodeOtlpLogsJson(typeof body === 'string' ? body : body.toString('utf8'), options);
        return deps.ingest.ingestLogs(
          { project, labels: { ...request.principal.labels }, source: '' },
          decoded,
        );
      });
      const message = logsPartialSuccessMessage(
        result.rejected,
        result.rejectReasons,
        result.ignored,
      );
      return reply
        .type(OTLP_CONTENT_TYPE[encoding])
        .send(exportResponse(encoding, result.rejected, message, 'logs'));
    },
  );
}
