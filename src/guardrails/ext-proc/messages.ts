import type { MessageInitShape } from '@bufbuild/protobuf';
import {
  type HeaderValue,
  HeaderValueOption_HeaderAppendAction,
} from './gen/envoy/config/core/v3/base_pb.js';
import type {
  HttpHeaders,
  ProcessingResponseSchema,
} from './gen/envoy/service/ext_proc/v3/external_processor_pb.js';
import type { StatusCode } from './gen/envoy/type/v3/http_status_pb.js';

/** A ProcessingResponse as the handler yields it (connect-node encodes the init shape). */
export type Reply = MessageInitShape<typeof ProcessingResponseSchema>;

export type Phase = 'request' | 'response';

const decoder = new TextDecoder('utf-8', { fatal: false });

/** A header's value: `raw_value` when set (Envoy, and agentgateway for normal headers), else `value`. */
export function headerValue(header: HeaderValue): string {
  return header.rawValue.length > 0 ? decoder.decode(header.rawValue) : header.value;
}

/** The headers by lowercase name; repeated names joined with ", " as HTTP allows. */
export function headersOf(headers: HttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const header of headers.headers?.headers ?? []) {
    const key = header.key.toLowerCase();
    const value = headerValue(header);
    out[key] = key in out ? `${out[key]}, ${value}` : value;
  }
  return out;
}

/** A header to set, in `raw_value` only (Envoy refuses a header with both) and overwriting. */
function setHeader(key: string, value: string) {
  return {
    header: { key, rawValue: Buffer.from(value, 'utf8') },
    appendAction: HeaderValueOption_HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD,
  };
}

/**
 * A reply that never varies, shared and frozen: the server encodes a frozen reply once.
 */
function constant(response: Reply['response']): Reply {
  return Object.freeze({ response });
}

const CONTINUE = {
  requestHeaders: constant({ case: 'requestHeaders', value: {} }),
  responseHeaders: constant({ case: 'responseHeaders', value: {} }),
  requestBody: constant({ case: 'requestBody', value: {} }),
  responseBody: constant({ case: 'responseBody', value: {} }),
  requestTrailers: constant({ case: 'requestTrailers', value: {} }),
  responseTrailers: constant({ case: 'responseTrailers', value: {} }),
};

/** Carry on unchanged: the answer to headers of either phase. */
export function continueHeaders(phase: Phase): Reply {
  return phase === 'request' ? CONTINUE.requestHeaders : CONTINUE.responseHeaders;
}

/** Carry on with the body unchanged (buffered mode), or with `body` in its place. */
export function continueBody(phase: Phase, body?: Uint8Array): Reply {
  if (body === undefined) return phase === 'request' ? CONTINUE.requestBody : CONTINUE.responseBody;
  const response = {
    response: {
      // The new length no longer matches the client's; the gateway recomputes it.
      headerMutation: { removeHeaders: ['content-length'] },
      bodyMutation: { mutation: { case: 'body' as const, value: body } },
    },
  };
  return {
    response: { case: phase === 'request' ? 'requestBody' : 'responseBody', value: response },
  };
}

export function continueTrailers(phase: Phase): Reply {
  return phase === 'request' ? CONTINUE.requestTrailers : CONTINUE.responseTrailers;
}

/**
 * The gateway answers the client itself with this status, content type and body instead of
 * forwarding the request. `details` goes to the gateway's logs.
 */
export function immediate(
  status: number,
  contentType: string,
  body: string,
  details: string,
): Reply {
  return {
    response: {
      case: 'immediateResponse',
      value: {
        status: { code: status as StatusCode },
        headers: { setHeaders: [setHeader('content-type', contentType)] },
        body: Buffer.from(body, 'utf8'),
        details,
      },
    },
  };
}
