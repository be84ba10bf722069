import type { Attributes, Span } from '../../../core/index.js';
import { decodeOtlpJson } from '../../../ingest/index.js';
import type { FetchedTrace, TraceHeader } from '../../connector.js';
import { isRecord } from '../json-rest.js';

/**
 * Phoenix spans (`GET /v1/projects/{project}/spans`) → our Span model, through the OTLP/JSON
 * decoder (ids, times, status, events and typed values are decoded in one place for every door),
 * with the OpenInference attributes restored to what the instrumentation sent:
 *
 * - `openinference.span.kind` is removed from `attributes` by Phoenix and answered as `span_kind`:
 *   put back (except Phoenix's default `UNKNOWN`, which the instrumentation did not send).
 * - `metadata`, `tool.parameters`, `llm.prompt_template.variables` and `*.document.metadata` are
 *   JSON text on the wire; Phoenix parses them on ingest and answers their members as flattened
 *   keys (`metadata.session_id`): put back as JSON text. Metadata keys are kept whole
 *   (`{"touchstone.label.team": "x"}` stays one key: metadata is a flat map by convention, and
 *   label keys contain dots); the others are re-nested (`tool.parameters.type`), with runs of
 *   indexes back to arrays.
 * - Times are ISO 8601 with microseconds and an offset: converted exactly to nanoseconds.
 */

export interface ConvertOptions {
  /** Longest string attribute kept (UTF-8 bytes), as for pushed traces. */
  maxAttributeBytes: number;
}

type Json = Record<string, unknown>;

const ISO =
  /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?(Z|[+-]\d{2}(?::?\d{2})?)?$/i;

/** An ISO 8601 time (`2026-11-22T01:07:33.161929+00:00`) as Unix nanoseconds; no zone is UTC. */
export function isoToNanos(v: unknown): bigint | undefined {
  if (typeof v !== 'string') return undefined;
  const m = ISO.exec(v.trim());
  if (m === null) return undefined;
  const [, y, mo, d, h, mi, s, frac = '', zone = 'Z'] = m;
  const ms = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s));
  if (!Number.isFinite(ms)) return undefined;
  let offsetMinutes = 0;
  if (zone.toUpperCase() !== 'Z') {
    const z = /^([+-])(\d{2}):?(\d{2})?$/.exec(zone);
    if (z === null) return undefined;
    offsetMinutes = (z[1] === '-' ? -1 : 1) * (Number(z[2]) * 60 + Number(z[3] ?? 0));
  }
  const seconds = BigInt(ms / 1000 - offsetMinutes * 60);
  return seconds * 1_000_000_000n + BigInt(frac.padEnd(9, '0'));
}

/** An ISO 8601 time as epoch milliseconds, sub-millisecond digits dropped (floor). */
export function isoToMs(v: unknown): number | undefined {
  const nanos = isoToNanos(v);
  if (nanos === undefined) return undefined;
  const ms = nanos / 1_000_000n - (nanos < 0n && nanos % 1_000_000n !== 0n ? 1n : 0n);
  return Number(ms);
}

/** Epoch milliseconds as the ISO form Phoenix's query parameters read (UTC, `Z`). */
export function msToIso(ms: number): string {
  return new Date(ms).toISOString();
}

// ---------------------------------------------------------------------------------------------
// Attribute restoration
// ---------------------------------------------------------------------------------------------

/** Attributes Phoenix parses as JSON on ingest (phoenix.trace.attributes.JSON_STRING_ATTRIBUTES). */
const JSON_TEXT_KEYS = [
  'metadata',
  'tool.parameters',
  'llm.prompt_template.variables',
  'document.metadata',
] as const;
/** Of those, the ones whose members are kept whole (flat maps whose keys may hold dots). */
const FLAT_KEYS = new Set<string>(['metadata', 'document.metadata']);

const LABEL_PREFIX = 'touchstone.label.';

/** The JSON-text attribute a flattened key belongs to, and the member path under it. */
function jsonTextParent(key: string): { parent: string; flat: boolean; rest: string } | undefined {
  for (const name of JSON_TEXT_KEYS) {
    let from = 0;
    for (;;) {
      const at = key.indexOf(`${name}.`, from);
      if (at < 0) break;
      if (at === 0 || key[at - 1] === '.') {
        const parent = key.slice(0, at + name.length);
        // `llm.prompt_template.variables` must not be taken for a `metadata`-like key inside it.
        return { parent, flat: FLAT_KEYS.has(name), rest: key.slice(parent.length + 1) };
      }
      from = at + 1;
    }
  }
  return undefined;
}

type Tree = { [key: string]: Tree | unknown };

/** Objects whose keys are exactly 0..n-1 back to arrays (Phoenix flattens lists of objects). */
function arrays(v: unknown): unknown {
  if (!isRecord(v)) return v;
  const keys = Object.keys(v);
  const out: Tree = {};
  for (const k of keys) out[k] = arrays(v[k]);
  if (keys.length > 0 && keys.every((k, i) => k === String(i))) return keys.map((k) => out[k]);
  return out;
}

function nest(members: [string, unknown][]): unknown {
  const root: Tree = {};
  for (const [path, value] of members) {
    const parts = path.split('.');
    let node = root;
    for (const [i, part] of parts.entries()) {
      if (i === parts.length - 1) {
        node[part] = value;
        break;
      }
      const next = node[part];
      if (isRecord(next)) node = next as Tree;
      else {
        const fresh: Tree = {};
        node[part] = fresh;
        node = fresh;
      }
    }
  }
  return arrays(root);
}

/**
 * Phoenix's flattened attribute map with the JSON-text attributes put back as JSON text and the
 * span kind restored.
 */
export function restoreAttributes(attributes: unknown, spanKind: unknown): Json {
  const out: Json = {};
  const grouped = new Map<string, { flat: boolean; members: [string, unknown][] }>();
  if (isRecord(attributes)) {
    for (const [key, value] of Object.entries(attributes)) {
      if (value === null || value === undefined) continue;
      const owner = jsonTextParent(key);
      if (owner === undefined || owner.rest === '') {
        out[key] = value;
        continue;
      }
      let group = grouped.get(owner.parent);
      if (group === undefined) {
        group = { flat: owner.flat, members: [] };
        grouped.set(owner.parent, group);
      }
      group.members.push([owner.rest, value]);
    }
  }
  for (const [parent, { flat, members }] of grouped) {
    // A value Phoenix could not parse as JSON stayed text under the key itself: keep that one.
    if (parent in out) continue;
    const value = flat ? Object.fromEntries(members) : nest(members);
    out[parent] = JSON.stringify(value);
  }
  if (typeof spanKind === 'string' && spanKind !== '' && spanKind.toUpperCase() !== 'UNKNOWN') {
    out['openinference.span.kind'] = spanKind.toUpperCase();
  }
  return out;
}

/**
 * `touchstone.label.<key>` of a root span as resource attributes of the trace: the span's own
 * attribute, or the same key inside its `metadata` (the span attribute wins).
 */
export function rootLabels(span: unknown): Attributes {
  const out: Attributes = {};
  if (!isRecord(span) || !isRecord(span.attributes)) return out;
  const direct: Attributes = {};
  for (const [key, value] of Object.entries(span.attributes)) {
    const label = key.startsWith(LABEL_PREFIX)
      ? key
      : key.startsWith(`metadata.${LABEL_PREFIX}`)
        ? key.slice('metadata.'.length)
        : undefined;
    if (label === undefined || label === LABEL_PREFIX) continue;
    let text: string | undefined;
    if (typeof value === 'string') text = value;
    else if (typeof value === 'boolean') text = String(value);
    else if (typeof value === 'number' && Number.isFinite(value)) text = String(value);
    if (text === undefined) continue;
    if (key === label) direct[label] = text;
    else out[label] = text;
  }
  return Object.assign(out, direct);
}

// ---------------------------------------------------------------------------------------------
// Spans
// ---------------------------------------------------------------------------------------------

/** A plain JSON attribute value as an OTLP AnyValue; undefined for null. */
function toAnyValue(v: unknown, depth = 0): Json | undefined {
  if (v === null || v === undefined || depth > 32) return undefined;
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) return undefined;
    return Number.isSafeInteger(v) ? { intValue: String(v) } : { doubleValue: v };
  }
  if (Array.isArray(v)) {
    return {
      arrayValue: {
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
    return { kvlistValue: { values } };
  }
  return undefined;
}

function keyValues(attributes: Json): Json[] {
  const out: Json[] = [];
  for (const [key, raw] of Object.entries(attributes)) {
    const value = toAnyValue(raw);
    if (value !== undefined) out.push({ key, value });
  }
  return out;
}

const STATUS: Record<string, string> = {
  OK: 'STATUS_CODE_OK',
  ERROR: 'STATUS_CODE_ERROR',
  UNSET: 'STATUS_CODE_UNSET',
};

function nanosText(v: unknown): string | undefined {
  const n = isoToNanos(v);
  return n === undefined || n < 0n ? undefined : n.toString();
}

/** One Phoenix span as an OTLP/JSON span (hex ids, nanosecond strings). */
function otlpSpan(s: unknown, traceIdHex: string): unknown {
  if (!isRecord(s)) return s;
  const context = isRecord(s.context) ? s.context : {};
  const events = Array.isArray(s.events) ? s.events : [];
  const status =
    typeof s.status_code === 'string' ? STATUS[s.status_code.toUpperCase()] : undefined;
  const start = nanosText(s.start_time);
  return {
    // Every span of the trace is keyed to the header's id anyway (see spansFromPhoenix).
    traceId: traceIdHex,
    spanId: typeof context.span_id === 'string' ? context.span_id : '',
    parentSpanId: typeof s.parent_id === 'string' ? s.parent_id : '',
    name: typeof s.name === 'string' ? s.name : '',
    startTimeUnixNano: start,
    // Phoenix stores ended spans only; a missing end is read as the start.
    endTimeUnixNano: nanosText(s.end_time) ?? start,
    attributes: keyValues(restoreAttributes(s.attributes, s.span_kind)),
    events: events.filter(isRecord).map((e) => ({
      name: typeof e.name === 'string' ? e.name : '',
      timeUnixNano: nanosText(e.timestamp),
      attributes: keyValues(isRecord(e.attributes) ? e.attributes : {}),
    })),
    status: {
      code: status ?? 'STATUS_CODE_UNSET',
      ...(typeof s.status_message === 'string' && s.status_message !== ''
        ? { message: s.status_message }
        : {}),
    },
  };
}

/** The spans Phoenix answered for one trace, in our model, carrying the header's trace id. */
export function spansFromPhoenix(
  phoenixSpans: readonly unknown[],
  header: TraceHeader,
  options: ConvertOptions,
): FetchedTrace {
  if (phoenixSpans.length === 0) return { missing: 'Phoenix holds no spans for this trace' };
  const request = {
    resourceSpans: [
      {
        resource: { attributes: [] },
        scopeSpans: [{ spans: phoenixSpans.map((s) => otlpSpan(s, header.traceId)) }],
      },
    ],
  };
  let decoded: ReturnType<typeof decodeOtlpJson>;
  try {
    decoded = decodeOtlpJson(JSON.stringify(request), {
      maxAttributeBytes: options.maxAttributeBytes,
    });
  } catch (err) {
    const why = err instanceof Error ? err.message.replace(/^OTLP\/JSON body is not an /, '') : '';
    return { missing: `Phoenix span data is malformed (${why || 'unreadable'})` };
  }
  if (decoded.spans.length === 0) {
    return {
      missing: `no Phoenix span could be read (${decoded.rejectReasons.join('; ') || 'invalid ids'})`,
    };
  }
  const spans: Span[] = decoded.spans.map((s) => ({
    ...s,
    traceId: header.traceId,
    resource: header.resource,
  }));
  return { spans };
}
