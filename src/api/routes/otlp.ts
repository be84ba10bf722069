import { Transform } from 'node:stream';
import { createGunzip, createInflate } from 'node:zlib';
import type { FastifyInstance } from 'fastify';
import { authorize } from '../../auth/index.js';
import {
  decodeOtlpJson,
  decodeOtlpProtobuf,
  IngestErrors,
  type IngestService,
} from '../../ingest/index.js';
import { type Turnstile, ticketOf, type WriteAdmission } from '../admission.js';
import { one, type Query } from '../context.js';
import { ApiErrors } from '../error-codes.js';
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
  /** Turns to decode and store. */
  turns: Turnstile;
}

/**
 * OTLP/HTTP trace receiver (`POST /v1/traces`): protobuf or JSON, gzip/deflate, answered per the
 * OTLP/HTTP spec only after the spans are durably stored. Admitted as a write (admission.ts)
 * before its body is read; decoded and stored in its turn.
 */
export async function otlpRoutes(app: FastifyInstance, deps: OtlpRouteDeps): Promise<void> {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    'application/x-protobuf',
    { parseAs: 'buffer', bodyLimit: deps.bodyLimit },
    (_r, body, done) => done(null, body),
  );
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'string', bodyLimit: deps.bodyLimit },
    (_r, body, done) => done(null, body),
  );

  app.post(
    '/v1/traces',
    {
      config: { otlp: true },
      onRequest: async () => deps.turns.refuseIfBacklogged(),
      preParsing: async (request, _reply, payload) => {
        const encoding = (request.headers['content-encoding'] ?? 'identity').toLowerCase().trim();
        if (encoding === 'identity' || encoding === '') return payload;
        if (encoding !== 'gzip' && encoding !== 'deflate') {
          throw IngestErrors.OTLP_UNSUPPORTED_ENCODING(
            `Content-Encoding ${encoding} is not supported; use gzip, deflate or none`,
          );
        }
        const ticket = ticketOf(request);
        // Compressed and inflated bytes are both held until the body is parsed.
        const budget = (inflated: number, encoded: number) =>
          ticket === undefined || ticket.ensure(encoded + inflated)
            ? undefined
            : deps.admission.shed('bytes');
        return inflate(payload, encoding, deps.bodyLimit, budget);
      },
    },
    async (request, reply) => {
      // `?project=` lets a caller without a key project (no auth on loopback) pick one; a key
      // naming another project than its own is refused by authorize.
      const asked = one(request.query as Query, 'project');
      const project = authorize(request.principal, 'traces.write', asked || undefined);
      const encoding = otlpEncodingOf(request.headers['content-type']);
      // The decoded spans stay counted until stored, even when the client hangs up meanwhile.
      const unhold = ticketOf(request)?.hold();
      const hungUp = new AbortController();
      const onClose = () => hungUp.abort();
      reply.raw.once('close', onClose);
      let endTurn: (() => void) | undefined;
      try {
        endTurn = await deps.turns.take(hungUp.signal);
        const options = { maxAttributeBytes: deps.maxAttributeBytes };
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
        endTurn?.();
        reply.raw.removeListener('close', onClose);
        unhold?.();
      }
    },
  );
}

/**
 * Inflates a request body, refusing it (413) once the inflated size passes the limit, or when
 * `budget` refuses the bytes held so far.
 */
function inflate(
  payload: NodeJS.ReadableStream,
  encoding: 'gzip' | 'deflate',
  limit: number,
  budget: (inflated: number, encoded: number) => Error | undefined,
) {
  const inflater = encoding === 'gzip' ? createGunzip() : createInflate();
  let encodedLength = 0;
  let inflated = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, callback) {
      inflated += chunk.length;
      if (inflated > limit) {
        callback(
          ApiErrors.BODY_TOO_LARGE(
            `request body exceeds the limit of ${limit} bytes after decompression`,
          ),
        );
        return;
      }
      callback(budget(inflated, encodedLength) ?? null, chunk);
    },
  });
  payload.on('data', (chunk: Buffer) => {
    encodedLength += chunk.length;
    (out as unknown as { receivedEncodedLength: number }).receivedEncodedLength = encodedLength;
  });
  inflater.on('error', () => {
    out.destroy(ApiErrors.BODY_INVALID(`request body is not valid ${encoding} data`));
  });
  const out = payload.pipe(inflater).pipe(counter);
  return out;
}
