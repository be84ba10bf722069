import { createHash } from 'node:crypto';

/**
 * Ids between Langfuse and Touchstone (docs/sources-langfuse.md, "Ids"):
 *
 * - A Langfuse trace id that is already an OpenTelemetry trace id (32 lowercase hex, not all
 *   zeros: everything the Langfuse SDKs v3+ and OTLP exporters send) is kept. Any other id (a
 *   UUID from the ingestion API, a custom string, upper-case hex) becomes the first 32 hex digits
 *   of SHA-256(`langfuse-trace:` + id).
 * - An observation id that is a span id (16 lowercase hex, not all zeros) is kept; any other (a
 *   UUID, Langfuse's `t-<trace id>` trace row) becomes the first 16 hex digits of
 *   SHA-256(`langfuse-observation:` + id).
 * - Write-back score ids are UUIDv5 (RFC 9562) in the namespace SCORE_NAMESPACE of the JSON text
 *   `["<Langfuse trace id>", "<observation id>" or null, "<policy>", "<metric>"]`: the same score
 *   always has the same id, so re-sending it updates it in place (Langfuse upserts scores by id).
 *
 * The original ids stay on the spans: `langfuse.trace.id` (resource) and `langfuse.observation.id`.
 */

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;

function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** Never all zeros: an all-zero hash prefix (2^-128) is nudged to a valid id. */
function nonZero(hex: string): string {
  return /^0+$/.test(hex) ? `${hex.slice(0, -1)}1` : hex;
}

export function otelTraceId(langfuseTraceId: string): string {
  if (HEX32.test(langfuseTraceId) && !/^0+$/.test(langfuseTraceId)) return langfuseTraceId;
  return nonZero(sha256Hex(`langfuse-trace:${langfuseTraceId}`).slice(0, 32));
}

export function otelSpanId(observationId: string): string {
  if (HEX16.test(observationId) && !/^0+$/.test(observationId)) return observationId;
  return nonZero(sha256Hex(`langfuse-observation:${observationId}`).slice(0, 16));
}

/** The UUID namespace of Touchstone's Langfuse scores (a fixed random UUID). */
export const SCORE_NAMESPACE = '5f0c6a1e-3b7d-4c2a-9e18-7d4b2f6a9c31';

function uuidBytes(uuid: string): Buffer {
  return Buffer.from(uuid.replaceAll('-', ''), 'hex');
}

/** RFC 9562 UUIDv5 (SHA-1, name-based) of `name` in `namespace`. */
export function uuidV5(name: string, namespace: string): string {
  const hash = createHash('sha1')
    .update(uuidBytes(namespace))
    .update(Buffer.from(name, 'utf8'))
    .digest();
  const b = Buffer.from(hash.subarray(0, 16));
  b[6] = ((b[6] as number) & 0x0f) | 0x50;
  b[8] = ((b[8] as number) & 0x3f) | 0x80;
  const hex = b.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The id of the score a policy's metric writes on a trace (or one of its observations). */
export function scoreId(target: {
  traceId: string;
  observationId?: string;
  policy: string;
  metric: string;
}): string {
  const name = JSON.stringify([
    target.traceId,
    target.observationId ?? null,
    target.policy,
    target.metric,
  ]);
  return uuidV5(name, SCORE_NAMESPACE);
}
