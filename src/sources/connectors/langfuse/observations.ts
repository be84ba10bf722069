import type { Attributes } from '../../../core/index.js';
import { decodeOtlpJson } from '../../../ingest/index.js';
import type { FetchedTrace, TraceHeader } from '../../connector.js';
import { isRecord } from '../json-rest.js';
import { otelSpanId, otelTraceId } from './ids.js';

/**
 * Langfuse v2 observations (`ObservationV2`) → our model. Root observations (one listing page)
 * become TraceHeaders; all observations of a trace become spans carrying the `langfuse.*`
 * attributes the Langfuse SDKs write over OpenTelemetry (what ingest's Langfuse reader expects),
 * decoded through the OTLP/JSON decoder so ids, times and attribute caps are handled as for every
 * other door.
 *
 * Mapping (docs/sources-langfuse.md, "What a pulled trace looks like"):
 * - `type` → `langfuse.observation.type` (lower case: the step type), `name` → span name;
 * - `input`/`output` (raw text) → `langfuse.observation.input`/`output`;
 * - `providedModelName`, `modelParameters`, `usageDetails`, `costDetails` (`totalCost` as its
 *   `total` when missing), `completionStartTime`, `promptName`/`promptVersion` →
 *   `langfuse.observation.model.name`, `.model.parameters`, `.usage_details`, `.cost_details`,
 *   `.completion_start_time`, `.prompt.name`/`.prompt.version`;
 * - `level` and `statusMessage` → `langfuse.observation.level`/`.status_message`, and an ERROR
 *   level is an error status with that message;
 * - each `metadata` key → `langfuse.metadata.<key>`;
 * - `environment`, `version`, `userId`, `sessionId` → `langfuse.environment`, `langfuse.version`,
 *   `langfuse.user.id`, `langfuse.session.id`; on root observations also `traceName`, `tags`,
 *   `release` → `langfuse.trace.name`, `langfuse.trace.tags`, `langfuse.release`;
 * - the original id → `langfuse.observation.id` (ids: see ids.ts).
 */

export interface ConvertOptions {
  /** Longest string attribute kept (UTF-8 bytes), as for pushed traces. */
  maxAttributeBytes: number;
}

type Json = Record<string, unknown>;

const ISO = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:[.,](\d{1,9}))?(Z|[+-]\d{2}:?\d{2})$/i;

/** An ISO 8601 time as Unix nanoseconds (decimal text, exact to the digits given). */
export function isoNanos(v: unknown): string | undefined {
  if (typeof v !== 'string') return undefined;
  const m = ISO.exec(v.trim());
  if (m !== null) {
    const seconds = Date.parse(`${m[1]}${(m[3] ?? 'Z').toUpperCase()}`);
    if (Number.isNaN(seconds)) return undefined;
    const fraction = BigInt((m[2] ?? '').padEnd(9, '0'));
    const nanos = BigInt(seconds) * 1_000_000n + fraction;
    return nanos > 0n ? nanos.toString() : undefined;
  }
  const ms = Date.parse(v);
  return Number.isNaN(ms) || ms <= 0 ? undefined : (BigInt(ms) * 1_000_000n).toString();
}

function nanosMs(nanos: string): number {
  return Number(BigInt(nanos) / 1_000_000n);
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** A trace is running while one of its roots has no end time (events never have one). */
function isOpen(row: Json): boolean {
  if (row.endTime !== null && row.endTime !== undefined) return false;
  return String(row.type).toUpperCase() !== 'EVENT';
}

interface Root {
  id: string;
  traceId: string;
  startNanos: string;
  endNanos?: string;
  open: boolean;
  row: Json;
}

function rootOf(row: unknown): Root | undefined {
  if (!isRecord(row)) return undefined;
  const id = str(row.id);
  const traceId = str(row.traceId);
  const startNanos = isoNanos(row.startTime);
  if (id === undefined || traceId === undefined || startNanos === undefined) return undefined;
  const endNanos = isoNanos(row.endTime);
  return {
    id,
    traceId,
    startNanos,
    ...(endNanos === undefined ? {} : { endNanos }),
    open: isOpen(row),
    row,
  };
}

/** Trace-level attributes of a root row, for the header's resource. */
function traceResource(traceId: string, row: Json): Attributes {
  const resource: Attributes = { 'langfuse.trace.id': traceId };
  const env = str(row.environment);
  if (env !== undefined) resource['langfuse.environment'] = env;
  const name = str(row.traceName);
  if (name !== undefined) resource['langfuse.trace.name'] = name;
  if (Array.isArray(row.tags)) {
    const tags = row.tags.filter((t): t is string => typeof t === 'string');
    if (tags.length > 0) resource['langfuse.trace.tags'] = [...tags].sort();
  }
  return resource;
}

/**
 * Whether a listed row is a root observation. Langfuse v4 says so (`isRootObservation`); v3
 * servers (with the v4 preview opt-in) neither filter by it nor serve it, so there a root is an
 * observation without a parent.
 */
export function isRootRow(row: unknown): boolean {
  if (!isRecord(row)) return false;
  if (typeof row.isRootObservation === 'boolean') return row.isRootObservation;
  return row.parentObservationId === null || row.parentObservationId === undefined;
}

/** The earliest start time among rows, epoch ms; undefined when none is readable. */
export function oldestStartMs(rows: readonly unknown[]): number | undefined {
  let oldest: number | undefined;
  for (const row of rows) {
    const nanos = isRecord(row) ? isoNanos(row.startTime) : undefined;
    if (nanos === undefined) continue;
    const ms = nanosMs(nanos);
    if (oldest === undefined || ms < oldest) oldest = ms;
  }
  return oldest;
}

/**
 * The headers of one listing window's root observations: one per trace (a trace with several
 * roots starts at its earliest and ends at its latest; it is running while any root is),
 * ascending by start time. Rows that are not roots, or have no trace id or readable start time,
 * are left out.
 */
export function rootHeaders(rows: readonly unknown[]): TraceHeader[] {
  const byTrace = new Map<string, Root[]>();
  for (const row of rows) {
    if (!isRootRow(row)) continue;
    const root = rootOf(row);
    if (root === undefined) continue;
    const list = byTrace.get(root.traceId);
    if (list === undefined) byTrace.set(root.traceId, [root]);
    else if (!list.some((r) => r.id === root.id)) list.push(root);
  }
  const headers: TraceHeader[] = [];
  for (const [traceId, roots] of byTrace) {
    roots.sort((a, b) => (BigInt(a.startNanos) < BigInt(b.startNanos) ? -1 : 1));
    const first = roots[0] as Root;
    const open = roots.some((r) => r.open);
    const header: TraceHeader = {
      storeId: traceId,
      traceId: otelTraceId(traceId),
      startMs: nanosMs(first.startNanos),
      inProgress: open,
      resource: traceResource(traceId, first.row),
    };
    if (!open) {
      let end = 0n;
      for (const r of roots) {
        const e = BigInt(r.endNanos ?? r.startNanos);
        if (e > end) end = e;
      }
      header.endMs = Number(end / 1_000_000n);
    }
    headers.push(header);
  }
  return headers.sort((a, b) =>
    a.startMs === b.startMs ? (a.storeId < b.storeId ? -1 : 1) : a.startMs - b.startMs,
  );
}

// ---------------------------------------------------------------------------------------------
// Spans
// ---------------------------------------------------------------------------------------------

/** An attribute as an OTLP/JSON key-value; undefined for null and empty values. */
function kv(key: string, v: unknown): Json | undefined {
  if (v === null || v === undefined) return undefined;
  if (typeof v === 'string') return { key, value: { stringValue: v } };
  if (typeof v === 'boolean') return { key, value: { boolValue: v } };
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) return undefined;
    return {
      key,
      value: Number.isSafeInteger(v) ? { intValue: String(v) } : { doubleValue: v },
    };
  }
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) {
    return { key, value: { arrayValue: { values: v.map((x) => ({ stringValue: x })) } } };
  }
  return { key, value: { stringValue: JSON.stringify(v) } };
}

/** Text of a value the SDK writes as JSON text (objects) or as it is (strings). */
function jsonText(v: unknown): string | undefined {
  if (v === null || v === undefined) return undefined;
  if (typeof v === 'string') return v;
  if (isRecord(v) && Object.keys(v).length === 0) return undefined;
  return JSON.stringify(v);
}

function costDetails(row: Json): unknown {
  const details = isRecord(row.costDetails) ? { ...row.costDetails } : {};
  if (details.total === undefined && typeof row.totalCost === 'number') {
    details.total = row.totalCost;
  }
  return details;
}

function attributesOf(row: Json, root: boolean): Json[] {
  const OBS = 'langfuse.observation.';
  const type = str(row.type)?.toLowerCase();
  const prompt = str(row.promptName);
  const out: (Json | undefined)[] = [
    kv(`${OBS}id`, row.id),
    kv(`${OBS}type`, type),
    kv(`${OBS}level`, str(row.level)),
    kv(`${OBS}status_message`, str(row.statusMessage)),
    kv(`${OBS}input`, jsonText(row.input)),
    kv(`${OBS}output`, jsonText(row.output)),
    kv(`${OBS}model.name`, str(row.providedModelName)),
    kv(`${OBS}model.parameters`, jsonText(row.modelParameters)),
    kv(`${OBS}usage_details`, jsonText(row.usageDetails)),
    kv(`${OBS}cost_details`, jsonText(costDetails(row))),
    kv(`${OBS}completion_start_time`, str(row.completionStartTime)),
    kv(`${OBS}prompt.name`, prompt),
    prompt === undefined ? undefined : kv(`${OBS}prompt.version`, row.promptVersion),
    kv('langfuse.environment', str(row.environment)),
    kv('langfuse.version', str(row.version)),
    kv('langfuse.user.id', str(row.userId)),
    kv('langfuse.session.id', str(row.sessionId)),
  ];
  if (root) {
    out.push(
      kv('langfuse.trace.name', str(row.traceName)),
      kv('langfuse.release', str(row.release)),
    );
    if (Array.isArray(row.tags) && row.tags.length > 0)
      out.push(kv('langfuse.trace.tags', row.tags));
  }
  if (isRecord(row.metadata)) {
    for (const [key, value] of Object.entries(row.metadata)) {
      out.push(kv(`langfuse.metadata.${key}`, value));
    }
  }
  return out.filter((a): a is Json => a !== undefined);
}

/** One observation as an OTLP/JSON span of the header's trace. */
function otlpSpan(row: Json, traceIdHex: string, ids: ReadonlySet<string>): Json | undefined {
  const id = str(row.id);
  const start = isoNanos(row.startTime);
  if (id === undefined || start === undefined) return undefined;
  const end = isoNanos(row.endTime) ?? start;
  const parent = str(row.parentObservationId);
  // An app root (the SDK's `as_root`) whose parent is not in this trace is a root here.
  const root = parent === undefined || (row.isRootObservation === true && !ids.has(parent));
  const error = String(row.level).toUpperCase() === 'ERROR';
  return {
    traceId: traceIdHex,
    spanId: otelSpanId(id),
    parentSpanId: root ? '' : otelSpanId(parent),
    name: str(row.name) ?? str(row.type)?.toLowerCase() ?? 'observation',
    kind: 0,
    startTimeUnixNano: start,
    endTimeUnixNano: BigInt(end) < BigInt(start) ? start : end,
    attributes: attributesOf(row, root),
    status: error ? { code: 2, message: str(row.statusMessage) ?? '' } : {},
  };
}

/** The spans of one trace from all its observations (any order, duplicates allowed). */
export function spansOf(
  rows: readonly unknown[],
  header: TraceHeader,
  options: ConvertOptions,
): FetchedTrace {
  const unique = new Map<string, Json>();
  for (const row of rows) {
    if (isRecord(row) && typeof row.id === 'string' && !unique.has(row.id)) {
      unique.set(row.id, row);
    }
  }
  if (unique.size === 0) return { missing: 'Langfuse holds no observations for this trace' };
  const ids = new Set(unique.keys());
  const spans: Json[] = [];
  for (const row of unique.values()) {
    const span = otlpSpan(row, header.traceId, ids);
    if (span !== undefined) spans.push(span);
  }
  if (spans.length === 0) {
    return { missing: 'no Langfuse observation of this trace has an id and a start time' };
  }
  const request = {
    resourceSpans: [{ scopeSpans: [{ scope: { name: 'touchstone.sources.langfuse' }, spans }] }],
  };
  let decoded: ReturnType<typeof decodeOtlpJson>;
  try {
    decoded = decodeOtlpJson(JSON.stringify(request), {
      maxAttributeBytes: options.maxAttributeBytes,
    });
  } catch {
    return { missing: 'the Langfuse observations of this trace could not be read' };
  }
  if (decoded.spans.length === 0) {
    return { missing: 'no Langfuse observation of this trace could be read' };
  }
  return { spans: decoded.spans.map((s) => ({ ...s, resource: header.resource })) };
}

/**
 * Metadata keys whose values may have been cut by Langfuse (values are served at most 200
 * characters long unless named in `expandMetadata`); keys with a comma cannot be named there.
 */
export const METADATA_PREVIEW_CHARS = 200;

export function truncatedMetadataKeys(rows: readonly unknown[]): string[] {
  const keys = new Set<string>();
  for (const row of rows) {
    if (!isRecord(row) || !isRecord(row.metadata)) continue;
    for (const [key, value] of Object.entries(row.metadata)) {
      if (typeof value !== 'string' || key.includes(',') || key === '') continue;
      if ([...value].length >= METADATA_PREVIEW_CHARS) keys.add(key);
    }
  }
  return [...keys].sort();
}
