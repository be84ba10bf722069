import { Code, ConnectError } from '@connectrpc/connect';
import { codeToHttpStatus, endStreamFlag, errorToJson } from '@connectrpc/connect/protocol-connect';
import { setTrailerStatus } from '@connectrpc/connect/protocol-grpc';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import { type ErrorKind, isTouchstoneError, type TouchstoneError } from '../../core/index.js';
import { isShed } from '../admission.js';
import { ApiErrors } from '../error-codes.js';
import { grpcCodeOf, KIND_WIRE } from '../errors.js';

/**
 * TouchstoneErrors in Connect/gRPC terms: the kind becomes the status code of api/errors.ts's one
 * table (`KIND_WIRE`), the message stays as is, and the stable `code` and the request id travel in
 * response metadata (`touchstone-error-code`, `x-request-id`), with `retry-after` on retryable
 * refusals, as REST sends them.
 */

function metadataOf(err: TouchstoneError, requestId: string): Headers {
  const headers = new Headers({ 'touchstone-error-code': err.code, 'x-request-id': requestId });
  if (err.retryAfterSeconds !== undefined) {
    headers.set('retry-after', String(Math.ceil(err.retryAfterSeconds)));
  } else if (err.retryable) {
    headers.set('retry-after', '1');
  }
  return headers;
}

/**
 * Any error a handler throws, as the ConnectError the caller gets. A ConnectError passes through
 * (Connect's own checks: malformed messages, unknown methods); anything that is neither is an
 * opaque INTERNAL_ERROR, logged with the request id.
 */
export function toConnectError(
  err: unknown,
  requestId: string,
  log: FastifyBaseLogger,
): ConnectError {
  if (err instanceof ConnectError) return err;
  let known: TouchstoneError;
  if (isTouchstoneError(err)) {
    known = err;
  } else {
    log.error({ err }, 'unhandled error in an RPC handler');
    known = ApiErrors.INTERNAL_ERROR(
      `internal error; the server log has details under request id ${requestId}`,
    );
  }
  if (
    grpcCodeOf(known.kind) === Code.Internal ||
    (known.kind === 'unavailable' && !isShed(known))
  ) {
    log.warn({ code: known.code }, known.message);
  }
  return new ConnectError(known.message, grpcCodeOf(known.kind), metadataOf(known, requestId));
}

/** A stored REST-style error body (`{"error": {code, kind, message}}`) as a ConnectError. */
export function connectErrorFromBody(
  status: number,
  body: unknown,
  requestId: string,
): ConnectError {
  const error = (body as { error?: { code?: unknown; kind?: unknown; message?: unknown } })?.error;
  const kind = typeof error?.kind === 'string' ? (error.kind as ErrorKind) : undefined;
  const code =
    kind !== undefined && Object.hasOwn(KIND_WIRE, kind) ? grpcCodeOf(kind) : Code.Unknown;
  const headers = new Headers({ 'x-request-id': requestId });
  if (typeof error?.code === 'string') headers.set('touchstone-error-code', error.code);
  return new ConnectError(
    typeof error?.message === 'string' ? error.message : `the stored outcome was HTTP ${status}`,
    code,
    headers,
  );
}

/**
 * Answers an RPC request that failed before its handler ran (the auth hook refused it) in the
 * caller's protocol, so gRPC, gRPC-Web and Connect clients all read the code and message:
 * gRPC and gRPC-Web as a trailers-only response (status in the headers), Connect unary as its
 * JSON error with the matching HTTP status, Connect streaming as an end-of-stream message.
 */
export function sendRpcError(request: FastifyRequest, reply: FastifyReply, raw: unknown): void {
  const requestId = String(request.id);
  const err = toConnectError(raw, requestId, request.log);
  const contentType = String(request.headers['content-type'] ?? '').toLowerCase();
  // Written straight to the response: Fastify must not send a reply of its own.
  reply.hijack();
  const res = reply.raw;
  const headers: Record<string, string> = {};
  err.metadata.forEach((value, key) => {
    headers[key] = value;
  });
  if (contentType.startsWith('application/grpc')) {
    const status = setTrailerStatus(new Headers(), err);
    status.forEach((value, key) => {
      headers[key] = value;
    });
    headers['content-type'] = contentType.startsWith('application/grpc-web')
      ? 'application/grpc-web+proto'
      : 'application/grpc+proto';
    res.writeHead(200, headers);
    res.end();
  } else if (contentType.startsWith('application/connect+')) {
    const json = Buffer.from(JSON.stringify({ error: errorToJson(err, undefined) }));
    const envelope = Buffer.alloc(5 + json.length);
    envelope.writeUInt8(endStreamFlag, 0);
    envelope.writeUInt32BE(json.length, 1);
    json.copy(envelope, 5);
    headers['content-type'] = contentType.startsWith('application/connect+json')
      ? 'application/connect+json'
      : 'application/connect+proto';
    res.writeHead(200, headers);
    res.end(envelope);
  } else {
    headers['content-type'] = 'application/json';
    res.writeHead(codeToHttpStatus(err.code), headers);
    res.end(JSON.stringify(errorToJson(err, undefined)));
  }
}
