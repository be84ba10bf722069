import { Transform } from 'node:stream';
import { createGunzip, createInflate } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { IngestErrors, type WriteTurn } from '../ingest/index.js';
import { type Turnstile, ticketOf, type WriteAdmission } from './admission.js';
import { ApiErrors } from './error-codes.js';

/**
 * Request bodies of the OTLP/HTTP routes (`/v1/traces`, `/v1/logs`): the two content types, kept
 * as raw bytes or text for the decoders (any other type is a 415), Content-Encoding counted
 * against the write budget (admission.ts), and the turn each request takes to decode and store.
 */

/** Replaces the plug-in's body parsers by the OTLP ones. */
export function otlpBodyParsers(app: FastifyInstance, bodyLimit: number): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    'application/x-protobuf',
    { parseAs: 'buffer', bodyLimit: bodyLimit },
    (_r, body, done) => done(null, body),
  );
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'string', bodyLimit: bodyLimit },
    (_r, body, done) => done(null, body),
  );
}

/**
 * The request body stream, inflated for gzip or deflate (a preParsing hook); compressed and
 * inflated bytes are both held against the write budget until the body is parsed.
 */
export async function decodedPayload(
  request: FastifyRequest,
  payload: NodeJS.ReadableStream,
  bodyLimit: number,
  admission: WriteAdmission,
): Promise<NodeJS.ReadableStream> {
  const encoding = (request.headers['content-encoding'] ?? 'identity').toLowerCase().trim();
  if (encoding === 'identity' || encoding === '') return payload;
  if (encoding !== 'gzip' && encoding !== 'deflate') {
    throw IngestErrors.OTLP_UNSUPPORTED_ENCODING(
      `Content-Encoding ${encoding} is not supported; use gzip, deflate or none`,
    );
  }
  const ticket = ticketOf(request);
  const budget = (inflated: number, encoded: number) =>
    ticket === undefined || ticket.ensure(encoded + inflated) ? undefined : admission.shed('bytes');
  return inflate(payload, encoding, bodyLimit, budget);
}

/**
 * Runs `work`, which takes the request's turn (`turn`) to store. The decoded body stays counted
 * against the byte budget until the work ends, even when the client hangs up meanwhile; a client
 * that hangs up while still waiting for its turn gives it up.
 */
export async function heldForTurn<T>(
  request: FastifyRequest,
  reply: FastifyReply,
  turns: Turnstile,
  work: (turn: WriteTurn) => Promise<T>,
): Promise<T> {
  const unhold = ticketOf(request)?.hold();
  const hungUp = new AbortController();
  const onClose = () => hungUp.abort();
  reply.raw.once('close', onClose);
  try {
    return await work(async (store) => {
      const endTurn = await turns.take(hungUp.signal);
      try {
        return await store();
      } finally {
        endTurn();
      }
    });
  } finally {
    reply.raw.removeListener('close', onClose);
    unhold?.();
  }
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
