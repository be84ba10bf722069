import { BinaryWriter } from '@bufbuild/protobuf/wire';
import type { RejectedSpan } from '../ingest/index.js';

/**
 * OTLP/HTTP response bodies (Buffers: Fastify would serialize a bare Uint8Array as JSON), in the encoding of the request (protobuf or JSON):
 * ExportTraceServiceResponse or ExportLogsServiceResponse on success, google.rpc.Status on failure.
 */

export type OtlpEncoding = 'protobuf' | 'json';

export const OTLP_CONTENT_TYPE: Record<OtlpEncoding, string> = {
  protobuf: 'application/x-protobuf',
  json: 'application/json',
};

/** The OTLP/JSON name of a partial success's count, per signal (protobuf numbers it 1 in both). */
const REJECTED_FIELD = { traces: 'rejectedSpans', logs: 'rejectedLogRecords' } as const;

export function exportResponse(
  encoding: OtlpEncoding,
  rejected: number,
  message: string,
  signal: keyof typeof REJECTED_FIELD = 'traces',
): Buffer | string {
  const partial = rejected > 0 || message !== '';
  if (encoding === 'json') {
    return JSON.stringify(
      partial
        ? { partialSuccess: { [REJECTED_FIELD[signal]]: String(rejected), errorMessage: message } }
        : {},
    );
  }
  const w = new BinaryWriter();
  if (partial) {
    w.tag(1, 2).fork();
    if (rejected > 0) w.tag(1, 0).int64(rejected);
    if (message !== '') w.tag(2, 2).string(message);
    w.join();
  }
  return Buffer.from(w.finish());
}

/**
 * Where the machine-readable list of refused spans starts in a partial success's `error_message`:
 * a line `rejected_spans=` followed by a JSON array of `{index, traceId?, spanId?, reason}`, so a
 * client (the Python logging SDK) can fail exactly the records the server refused. Exporters that
 * only log the message still get a readable first line.
 */
export const REJECTED_SPANS_PREFIX = 'rejected_spans=';

/** The partial-success `error_message`: the reasons, then the refused spans one by one. */
export function partialSuccessMessage(
  rejected: number,
  reasons: readonly string[],
  spans: readonly RejectedSpan[],
): string {
  if (rejected === 0) return '';
  const summary = `${rejected} spans rejected: ${reasons.join('; ')}`;
  if (spans.length === 0) return summary;
  const listed = spans.map((s) => ({
    index: s.index,
    ...(s.traceId === undefined ? {} : { traceId: s.traceId }),
    ...(s.spanId === undefined ? {} : { spanId: s.spanId }),
    reason: s.reason,
  }));
  return `${summary}\n${REJECTED_SPANS_PREFIX}${JSON.stringify(listed)}`;
}

/**
 * The partial-success `error_message` of a logs request: the refused GenAI events and their
 * reasons, then how many records were accepted without being kept (not GenAI events).
 */
export function logsPartialSuccessMessage(
  rejected: number,
  reasons: readonly string[],
  ignored: number,
): string {
  const lines: string[] = [];
  if (rejected > 0) lines.push(`${rejected} log records rejected: ${reasons.join('; ')}`);
  if (ignored > 0) {
    lines.push(
      `${ignored} log records accepted but not stored: only GenAI events (event names gen_ai.*) are kept`,
    );
  }
  return lines.join('\n');
}

/** A google.rpc.Status with this gRPC status `code` (api/errors.ts picks it from the kind). */
export function statusBody(encoding: OtlpEncoding, code: number, message: string): Buffer | string {
  if (encoding === 'json') return JSON.stringify({ code, message });
  return Buffer.from(new BinaryWriter().tag(1, 0).int32(code).tag(2, 2).string(message).finish());
}

/** The OTLP encoding a request asked for (by Content-Type; JSON when unknown). */
export function otlpEncodingOf(contentType: string | undefined): OtlpEncoding {
  return (contentType ?? '').split(';')[0]?.trim().toLowerCase() === 'application/x-protobuf'
    ? 'protobuf'
    : 'json';
}
