import type { Span } from '../../../core/index.js';
import { decodeOtlpJson } from '../../../ingest/index.js';
import type { FetchedTrace, TraceHeader } from '../../connector.js';
import { isRecord } from '../json-rest.js';
import { parseLosslessJson } from './lossless-json.js';

/**
 * MLflow span data → our Span model, through the OTLP/JSON decoder (ids, times, status, events
 * and typed values are decoded in one place for every door).
 *
 * Two inputs:
 * - batchGet: OTLP `Span` messages in protobuf JSON (snake_case, base64 ids, typed AnyValues
 *   that the server decoded from MLflow's JSON-encoded attribute strings);
 * - the trace artifact (`traces.json`): MLflow span dicts, whose attribute values are JSON text,
 *   in the legacy v2 shape (`context`, `0x` ids), the v3 shape (base64 ids) or the newer one
 *   (hex ids, `otel_trace_id`).
 *
 * Both come out alike: `mlflow.*` attributes hold JSON text exactly as the MLflow SDK exports
 * them over OTLP (what ingest's MLflow reader expects; a string output "42" stays a string), other
 * attributes hold typed values, and every span carries the trace's tags and metadata as its
 * resource and the header's trace id.
 */

export interface ConvertOptions {
  /** Longest string attribute kept (UTF-8 bytes), as for pushed traces. */
  maxAttributeBytes: number;
}

type Json = Record<string, unknown>;

const MLFLOW_PREFIX = 'mlflow.';

/** Integer text of an int64 that the lossless parser kept as a string. */
const INTEGER = /^-?\d+$/;

// ---------------------------------------------------------------------------------------------
// Python's json.dumps(ensure_ascii=False) text, which MLflow stores attribute values as.
// ---------------------------------------------------------------------------------------------

/** A double as Python's `repr` writes it (`21.0`, `1.8e-06`, `1e+16`). */
function pythonFloat(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? 'Infinity' : '-Infinity';
  const [mantissa = '0', exp = '0'] = x.toExponential().split('e');
  const e = Number(exp);
  if (e >= -4 && e < 16) {
    const fixed = String(x);
    return fixed.includes('.') || fixed.includes('e') ? fixed : `${fixed}.0`;
  }
  const abs = Math.abs(e);
  return `${mantissa}e${e < 0 ? '-' : '+'}${abs < 10 ? '0' : ''}${abs}`;
}

/** A value decoded from an OTLP AnyValue, with its number type kept. */
type Plain =
  | { t: 'null' }
  | { t: 'string'; v: string }
  | { t: 'bool'; v: boolean }
  | { t: 'int'; v: string }
  | { t: 'double'; v: number }
  | { t: 'array'; v: Plain[] }
  | { t: 'object'; v: [string, Plain][] };

function pythonJson(p: Plain): string {
  switch (p.t) {
    case 'null':
      return 'null';
    case 'string':
      return JSON.stringify(p.v);
    case 'bool':
      return p.v ? 'true' : 'false';
    case 'int':
      return p.v;
    case 'double':
      return pythonFloat(p.v);
    case 'array':
      return `[${p.v.map(pythonJson).join(', ')}]`;
    case 'object':
      return `{${p.v.map(([k, v]) => `${JSON.stringify(k)}: ${pythonJson(v)}`).join(', ')}}`;
  }
}

const MAX_DEPTH = 64;

/** An OTLP AnyValue (snake_case or camelCase) as a Plain; `null` for an empty AnyValue. */
function anyValuePlain(v: unknown, depth = 0): Plain {
  if (!isRecord(v) || depth > MAX_DEPTH) return { t: 'null' };
  for (const [k, x] of Object.entries(v)) {
    if (x === null || x === undefined) continue;
    switch (k) {
      case 'string_value':
      case 'stringValue':
        return { t: 'string', v: String(x) };
      case 'bool_value':
      case 'boolValue':
        return { t: 'bool', v: x === true };
      case 'int_value':
      case 'intValue':
        if (
          (typeof x === 'number' && Number.isInteger(x)) ||
          (typeof x === 'string' && INTEGER.test(x))
        )
          return { t: 'int', v: String(x) };
        return { t: 'null' };
      case 'double_value':
      case 'doubleValue':
        return { t: 'double', v: Number(x) };
      case 'bytes_value':
      case 'bytesValue':
        return { t: 'string', v: String(x) };
      case 'array_value':
      case 'arrayValue': {
        const values = isRecord(x) && Array.isArray(x.values) ? x.values : [];
        return { t: 'array', v: values.map((i) => anyValuePlain(i, depth + 1)) };
      }
      case 'kvlist_value':
      case 'kvlistValue': {
        const values = isRecord(x) && Array.isArray(x.values) ? x.values : [];
        const entries: [string, Plain][] = [];
        for (const kv of values) {
          if (isRecord(kv) && typeof kv.key === 'string')
            entries.push([kv.key, anyValuePlain(kv.value, depth + 1)]);
        }
        return { t: 'object', v: entries };
      }
    }
  }
  return { t: 'null' };
}

/** A plain JSON value (from MLflow's JSON text) as an OTLP AnyValue; undefined for null. */
function toAnyValue(v: unknown, depth = 0): Json | undefined {
  if (v === null || v === undefined || depth > MAX_DEPTH) return undefined;
  if (typeof v === 'string') return { string_value: v };
  if (typeof v === 'boolean') return { bool_value: v };
  if (typeof v === 'number') {
    return Number.isInteger(v) ? { int_value: v } : { double_value: v };
  }
  if (Array.isArray(v)) {
    return {
      array_value: {
        values: v.map((x) => toAnyValue(x, depth + 1)).filter((x) => x !== undefined),
      },
    };
  }
  if (isRecord(v)) {
    const values: Json[] = [];
    for (const [key, x] of Object.entries(v)) {
      const value = toAnyValue(x, depth + 1);
      if (value !== undefined) values.push({ key, value });
    }
    return { kvlist_value: { values } };
  }
  return undefined;
}

/** MLflow's JSON-encoded attribute text decoded (big ints exact); non-JSON text stays text. */
function decodeAttributeText(text: string): unknown {
  const t = text.trim();
  if (t === '') return text;
  try {
    return parseLosslessJson(t);
  } catch {
    return text;
  }
}

// ---------------------------------------------------------------------------------------------
// batchGet spans
// ---------------------------------------------------------------------------------------------

/** `mlflow.*` values back to the JSON text MLflow's SDK writes; other keys keep typed values. */
function reencodeMlflowAttributes(list: unknown): unknown {
  if (!Array.isArray(list)) return list;
  const out: unknown[] = [];
  for (const kv of list) {
    if (!isRecord(kv) || typeof kv.key !== 'string' || !kv.key.startsWith(MLFLOW_PREFIX)) {
      out.push(kv);
      continue;
    }
    const plain = anyValuePlain(kv.value);
    if (plain.t === 'null') continue;
    out.push({ key: kv.key, value: { string_value: pythonJson(plain) } });
  }
  return out;
}

function batchGetSpan(span: unknown): unknown {
  if (!isRecord(span)) return span;
  return { ...span, attributes: reencodeMlflowAttributes(span.attributes) };
}

// ---------------------------------------------------------------------------------------------
// traces.json span dicts
// ---------------------------------------------------------------------------------------------

/** An id of a span dict in a form the OTLP decoder reads (hex or base64); `0x` hex unprefixed. */
function dictId(v: unknown): unknown {
  if (typeof v !== 'string') return v ?? undefined;
  return /^0x[0-9a-f]+$/i.test(v) ? v.slice(2) : v;
}

function statusName(v: unknown): string | undefined {
  if (typeof v !== 'string' || v === '') return undefined;
  return v.startsWith('STATUS_CODE_') ? v : `STATUS_CODE_${v.toUpperCase()}`;
}

function dictAttributes(v: unknown, encoded: boolean): Json[] {
  if (!isRecord(v)) return [];
  const out: Json[] = [];
  for (const [key, raw] of Object.entries(v)) {
    let value: Json | undefined;
    if (typeof raw === 'string' && key.startsWith(MLFLOW_PREFIX)) value = { string_value: raw };
    else if (typeof raw === 'string' && encoded) value = toAnyValue(decodeAttributeText(raw));
    else value = toAnyValue(raw);
    if (value !== undefined) out.push({ key, value });
  }
  return out;
}

/** One span dict of any known traces.json shape as an OTLP/JSON span. */
function dictSpan(d: unknown, traceIdHex: string): unknown {
  if (!isRecord(d)) return d;
  const context = isRecord(d.context) ? d.context : undefined;
  const status = isRecord(d.status) ? d.status : undefined;
  const events = Array.isArray(d.events) ? d.events : [];
  return {
    // Every span of the trace is keyed to the header's id anyway (see convertSpans).
    trace_id: traceIdHex,
    span_id: dictId(context?.span_id ?? d.span_id),
    parent_span_id: dictId(d.parent_span_id ?? d.parent_id) ?? '',
    name: typeof d.name === 'string' ? d.name : '',
    start_time_unix_nano: d.start_time_unix_nano ?? d.start_time,
    end_time_unix_nano: d.end_time_unix_nano ?? d.end_time,
    // Span attributes are MLflow JSON text; event attributes are stored as they are.
    attributes: dictAttributes(d.attributes, true),
    events: events.filter(isRecord).map((e) => ({
      name: typeof e.name === 'string' ? e.name : '',
      time_unix_nano: e.time_unix_nano ?? e.timestamp,
      attributes: dictAttributes(e.attributes, false),
    })),
    status: {
      code: statusName(status?.code ?? d.status_code),
      message: status?.message ?? d.status_message ?? undefined,
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Both
// ---------------------------------------------------------------------------------------------

function convertSpans(
  otlpSpans: unknown[],
  header: TraceHeader,
  options: ConvertOptions,
): FetchedTrace {
  if (otlpSpans.length === 0) return { missing: 'MLflow holds no spans for this trace' };
  const request = { resourceSpans: [{ scopeSpans: [{ spans: otlpSpans }] }] };
  let decoded: ReturnType<typeof decodeOtlpJson>;
  try {
    decoded = decodeOtlpJson(JSON.stringify(request), {
      maxAttributeBytes: options.maxAttributeBytes,
    });
  } catch (err) {
    const why = err instanceof Error ? err.message.replace(/^OTLP\/JSON body is not an /, '') : '';
    return { missing: `MLflow span data is malformed (${why || 'unreadable'})` };
  }
  if (decoded.spans.length === 0) {
    return {
      missing: `no MLflow span could be read (${decoded.rejectReasons.join('; ') || 'invalid ids'})`,
    };
  }
  const spans: Span[] = decoded.spans.map((s) => ({
    ...s,
    traceId: header.traceId,
    resource: header.resource,
  }));
  return { spans };
}

/** The `traces[]` entries of a batchGet answer, by trace id. */
export function batchGetEntries(answer: Json): Map<string, Json> {
  const entries = new Map<string, Json>();
  for (const t of Array.isArray(answer.traces) ? answer.traces : []) {
    const info = isRecord(t) && isRecord(t.trace_info) ? t.trace_info : undefined;
    if (info !== undefined && typeof info.trace_id === 'string' && isRecord(t)) {
      entries.set(info.trace_id, t);
    }
  }
  return entries;
}

/** The spans of one batchGet `traces[]` entry. */
export function spansFromBatchGet(
  entry: Json,
  header: TraceHeader,
  options: ConvertOptions,
): FetchedTrace {
  const spans = Array.isArray(entry.spans) ? entry.spans : [];
  return convertSpans(spans.map(batchGetSpan), header, options);
}

/** The spans of a parsed `traces.json` trace artifact. */
export function spansFromArtifact(
  artifact: unknown,
  header: TraceHeader,
  options: ConvertOptions,
): FetchedTrace {
  if (!isRecord(artifact) || !Array.isArray(artifact.spans)) {
    return { missing: 'the MLflow trace artifact holds no span list' };
  }
  return convertSpans(
    artifact.spans.map((d) => dictSpan(d, header.traceId)),
    header,
    options,
  );
}
