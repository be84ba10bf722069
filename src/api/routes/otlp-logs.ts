import type { FastifyInstance } from 'fastify';
import { decodeOtlpLogsJson, decodeOtlpLogsProtobuf } from '../../ingest/index.js';
import { otlpBodyParsers } from '../otlp-body.js';
import { logsPartialSuccessMessage } from '../otlp-wire.js';
import { type OtlpRouteDeps, postOtlp } from './otlp.js';

/**
 * OTLP/HTTP logs receiver (`POST /v1/logs`) for the GenAI events that instrumentations send as log
 * records (docs/ingest.md): the bodies, encodings, auth, admission, turns and answers of
 * `/v1/traces`; 200 only once the events are stored, with a partial success naming refused and
 * ignored records.
 */
export async function otlpLogRoutes(app: FastifyInstance, deps: OtlpRouteDeps): Promise<void> {
  otlpBodyParsers(app, deps.bodyLimit);
  postOtlp(
    app,
    '/v1/logs',
    deps,
    'logs',
    async ({ project, labels, encoding, body, options }, turn) => {
      const result = await turn(async () => {
        const decoded =
          encoding === 'protobuf'
            ? decodeOtlpLogsProtobuf(body as Buffer, options)
            : decodeOtlpLogsJson(body as string, options);
        return deps.ingest.ingestLogs({ project, labels, source: '' }, decoded);
      });
      return {
        rejected: result.rejected,
        message: logsPartialSuccessMessage(result.rejected, result.rejectReasons, result.ignored),
      };
    },
  );
}
