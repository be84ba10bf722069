import { Code } from '@connectrpc/connect';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import {
  type ErrorDetail,
  type ErrorKind,
  isTouchstoneError,
  type TouchstoneError,
} from '../core/index.js';
import { isShed } from './admission.js';
import { ApiErrors } from './error-codes.js';
import { OTLP_CONTENT_TYPE, otlpEncodingOf, statusBody } from './otlp-wire.js';

/**
 * The only place a domain error becomes an HTTP status, and the one JSON error body:
 * `{"error": {"code", "kind", "message", "requestId", "details"?}}`.
 */

/**
 * Each error kind on the wire, the one table REST, OTLP and Connect RPC answer from: its HTTP
 * status and its gRPC status code (kinds are named after the gRPC codes; the two HTTP-only kinds
 * take the code gRPC itself uses for them).
 */
export const KIND_WIRE: Readonly<
  Record<ErrorKind, { readonly http: number; readonly grpc: Code }>
> = {
  invalid_argument: { http: 400, grpc: Code.InvalidArgument },
  failed_precondition: { http: 400, grpc: Code.FailedPrecondition },
  unauthenticated: { http: 401, grpc: Code.Unauthenticated },
  permission_denied: { http: 403, grpc: Code.PermissionDenied },
  not_found: { http: 404, grpc: Code.NotFound },
  already_exists: { http: 409, grpc: Code.AlreadyExists },
  aborted: { http: 409, grpc: Code.Aborted },
  // gRPC says RESOURCE_EXHAUSTED for a message over a size limit.
  payload_too_large: { http: 413, grpc: Code.ResourceExhausted },
  unsupported_media_type: { http: 415, grpc: Code.InvalidArgument },
  resource_exhausted: { http: 429, grpc: Code.ResourceExhausted },
  internal: { http: 500, grpc: Code.Internal },
  unimplemented: { http: 501, grpc: Code.Unimplemented },
  unavailable: { http: 503, grpc: Code.Unavailable },
  deadline_exceeded: { http: 504, grpc: Code.DeadlineExceeded },
};

export function httpStatusOf(kind: ErrorKind): number {
  return KIND_WIRE[kind].http;
}

export function grpcCodeOf(kind: ErrorKind): Code {
  return KIND_WIRE[kind].grpc;
}

export interface ErrorBody {
  error: {
    code: string;
    kind: ErrorKind;
    message: string;
    requestId: string;
    details?: ErrorDetail[];
  };
}

/** Fastify's own errors (body parsing, limits, routing) in our catalogue's terms. */
function fromFastify(err: FastifyError, limit: number): TouchstoneError | undefined {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return ApiErrors.BODY_TOO_LARGE(`request body exceeds the limit of ${limit} bytes`);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return ApiErrors.UNSUPPORTED_MEDIA_TYPE('unsupported Content-Type; send application/json');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return ApiErrors.BODY_INVALID('request body is empty; send a JSON object');
    default:
      if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
        return ApiErrors.BODY_INVALID(`request rejected: ${err.code ?? 'bad request'}`);
      }
      return undefined;
  }
}

export function toErrorBody(err: TouchstoneError, requestId: string): ErrorBody {
  return {
    error: {
      code: err.code,
      kind: err.kind,
      message: err.message,
      requestId,
      ...(err.details.length > 0 ? { details: err.details } : {}),
    },
  };
}

export function sendError(
  request: FastifyRequest,
  reply: FastifyReply,
  raw: unknown,
  bodyLimit: number,
): FastifyReply {
  let err: TouchstoneError;
  if (isTouchstoneError(raw)) {
    err = raw;
  } else {
    // A route's own limit (a small body) is the one the message names.
    const mapped = fromFastify(raw as FastifyError, request.routeOptions.bodyLimit ?? bodyLimit);
    if (mapped === undefined) {
      request.log.error({ err: raw }, 'unhandled error');
      err = ApiErrors.INTERNAL_ERROR(
        `internal error; the server log has details under request id ${request.id}`,
      );
    } else {
      err = mapped;
    }
  }
  const status = httpStatusOf(err.kind);
  const otlp = (request.routeOptions.config as { otlp?: boolean } | undefined)?.otlp === true;
  if (status >= 500 && isTouchstoneError(raw) && !isShed(raw)) {
    request.log.warn({ code: err.code }, err.message);
  }
  if (err.retryAfterSeconds !== undefined)
    reply.header('retry-after', String(Math.ceil(err.retryAfterSeconds)));
  else if (err.retryable && (status === 429 || status === 503)) reply.header('retry-after', '1');
  if (otlp) {
    // OTLP/HTTP: a google.rpc.Status in the request's encoding, so exporters can read it.
    const encoding = otlpEncodingOf(request.headers['content-type']);
    return reply
      .code(status)
      .type(OTLP_CONTENT_TYPE[encoding])
      .send(statusBody(encoding, grpcCodeOf(err.kind), err.message));
  }
  return reply
    .code(status)
    .type('application/json')
    .send(toErrorBody(err, String(request.id)));
}
