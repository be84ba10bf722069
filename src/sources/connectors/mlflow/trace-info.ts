import { createHash } from 'node:crypto';
import type { Attributes } from '../../../core/index.js';
import type { TraceHeader } from '../../connector.js';
import { isRecord } from '../json-rest.js';

/**
 * MLflow `TraceInfoV3` (a search hit, or `trace_info` of a batchGet entry) → TraceHeader. The
 * request/response previews are never read: they are cut to 1000 characters on OSS and must not
 * become a record's input or output.
 */

/** Tag naming where a trace's spans live: `TRACKING_STORE` (batchGet serves them) or elsewhere. */
export const SPANS_LOCATION_TAG = 'mlflow.trace.spansLocation';
export const TAG_PREFIX = 'mlflow.tag.';
const LABEL_PREFIX = 'touchstone.label.';
export const METADATA_PREFIX = 'mlflow.metadata.';

const HEX32 = /^[0-9a-f]{32}$/;

/**
 * The OpenTelemetry trace id of an MLflow trace id: the hex of `tr-<hex>` (OSS), of a bare
 * 32-hex v2 request id, or after the last `/` of `trace:/<location>/<hex>`; any other id gets a
 * stable id derived from it (its spans are then re-keyed to it).
 */
export function otelTraceId(storeId: string): string {
  const lower = storeId.toLowerCase();
  const candidate = lower.startsWith('tr-')
    ? lower.slice(3)
    : lower.includes('/')
      ? lower.slice(lower.lastIndexOf('/') + 1)
      : lower;
  if (HEX32.test(candidate) && !/^0+$/.test(candidate)) return candidate;
  return createHash('sha256').update(`mlflow:${storeId}`).digest('hex').slice(0, 32);
}

/** `"1.534s"` (protobuf Duration JSON) → milliseconds; undefined when malformed. */
export function durationMs(v: unknown): number | undefined {
  if (typeof v !== 'string') return undefined;
  const m = /^(-?\d+(?:\.\d+)?)s$/.exec(v.trim());
  return m === null ? undefined : Number(m[1]) * 1000;
}

/** `request_time`: RFC 3339 in v3; epoch ms (number or string) in older shapes. */
function startMsOf(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (typeof v !== 'string') return undefined;
  if (/^\d+$/.test(v)) return Number(v);
  const ms = Date.parse(v);
  return Number.isNaN(ms) ? undefined : ms;
}

function stringMap(v: unknown): [string, string][] {
  if (!isRecord(v)) return [];
  return Object.entries(v).filter((e): e is [string, string] => typeof e[1] === 'string');
}

/** The trace-level attributes: tags as `mlflow.tag.<key>`, metadata as `mlflow.metadata.<key>`. */
export function traceResource(info: Record<string, unknown>): Attributes {
  const resource: Attributes = {};
  for (const [k, v] of stringMap(info.trace_metadata)) resource[`${METADATA_PREFIX}${k}`] = v;
  for (const [k, v] of stringMap(info.tags)) {
    resource[`${TAG_PREFIX}${k}`] = v;
    // A tag named touchstone.label.<key> labels the trace, as the attribute does on pushed traces.
    if (k.startsWith(LABEL_PREFIX)) resource[k] = v;
  }
  return resource;
}

/** A header, or undefined when the entry has no usable id or start time. */
export function traceHeader(info: unknown): TraceHeader | undefined {
  if (!isRecord(info)) return undefined;
  const storeId = info.trace_id ?? info.request_id;
  if (typeof storeId !== 'string' || storeId === '') return undefined;
  const startMs = startMsOf(info.request_time ?? info.timestamp_ms);
  if (startMs === undefined) return undefined;
  const state = info.state ?? info.status;
  const inProgress = state === 'IN_PROGRESS';
  const header: TraceHeader = {
    storeId,
    traceId: otelTraceId(storeId),
    startMs,
    inProgress,
    resource: traceResource(info),
  };
  const duration = durationMs(info.execution_duration);
  if (!inProgress && duration !== undefined) header.endMs = startMs + duration;
  return header;
}

/** Where the header says the spans are; undefined when MLflow did not say. */
export function spansLocation(header: TraceHeader): string | undefined {
  const v = header.resource[`${TAG_PREFIX}${SPANS_LOCATION_TAG}`];
  return typeof v === 'string' ? v : undefined;
}
