import { Transform } from 'node:stream';
import { createGunzip, createInflate } from 'node:zlib';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { IngestErrors } from '../ingest/index.js';
import { ApiErrors } from './error-codes.js';

/**
 * Request bodies of the OTLP/HTTP routes (`/v1/traces`, `/v1/logs`): the two content types, kept
 * as raw bytes or text for the decoders (any other type is a 415), and Content-Encoding.
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

/** The request body stream, inflated for gzip or deflate (a preParsing hook). */
export async function decodedPayload(
  request: FastifyRequest,
  payload: NodeJS.ReadableStream,
  bodyLimit: number,
): Promise<NodeJS.ReadableStream> {
  const encoding = (request.headers['content-encoding'] ?? 'identity').toLowerCase().trim();
  if (encoding === 'identity' || encoding === '') return payload;
  if (encoding !== 'gzip' && encoding !== 'deflate') {
    throw IngestErrors.OTLP_UNSUPPORTED_ENCODING(
      `Content-Encoding ${encoding} is not supported; use gzip, deflate or none`,
    );
  }
  return inflate(payload, encoding, bodyLimit);
}

/** Inflates a request body, refusing it (413) once the inflated size passes the limit. */
function inflate(payload: NodeJS.ReadableStream, encoding: 'gzip' | 'deflate', limit: number) {
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
      callback(null, chunk);
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
