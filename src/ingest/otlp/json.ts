/**
 * OTLP/JSON `ExportTraceServiceRequest` → spans, with the OTLP/JSON differences from protobuf JSON
 * (conventions §12.4): ids are hex (case-insensitive; base64 from generic protobuf-JSON encoders is
 * accepted too), enums are integers (names accepted), 64-bit integers are decimal strings or JSON
 * numbers, `bytesValue` is base64, keys are lowerCamelCase (snake_case accepted), unknown fields
 * are ignored, and `null` means absent. The result is the same `Span[]` the protobuf decoder makes
 * for the same trace.
 *
 * Invalid ids refuse one span; anything that is not OTLP/JSON (bad JSON, a wrong type, an int64
 * that is not one) fails the request with OTLP_DECODE_FAILED naming a position or a field path
 * made of schema names and indexes (never attribute keys or values).
 */
import { Buffer } from 'node:buffer';
import type {
  Attributes,
  AttributeValue,
  InstrumentationScope,
  Span,
  SpanEvent,
  SpanLink,
  StatusCode,
} from '../../core/index.js';
import type { DecodedSpans, DecodeOptions, SpanCountLimits } from '../types.js';
import { countLimitsOf, MAX_VALUE_DEPTH, setAttribute } from './attributes.js';
import { OtlpErrors } from './error-codes.js';
import { jsonInt64Value, jsonUint64Decimal } from './int64.js';
import { REJECT, Rejections, type RejectReason } from './rejections.js';
import { capString, normaliseLimit } from './truncate.js';

type JsonObject = { [key: string]: unknown };

/** A shape problem; `path` is collected innermost first while the error unwinds. */
export class ShapeError {
  readonly path: string[] = [];
  constructor(readonly problem: string) {}
}

export function within(err: unknown, field: string, index: number): unknown {
  if (err instanceof ShapeError) err.path.push(`${field}[${index}]`);
  return err;
}

const SPAN_KIND_NAMES: Record<string, number> = {
  SPAN_KIND_UNSPECIFIED: 0,
  SPAN_KIND_INTERNAL: 1,
  SPAN_KIND_SERVER: 2,
  SPAN_KIND_CLIENT: 3,
  SPAN_KIND_PRODUCER: 4,
  SPAN_KIND_CONSUMER: 5,
};

const STATUS_CODE_NAMES: Record<string, StatusCode> = {
  STATUS_CODE_UNSET: 0,
  STATUS_CODE_OK: 1,
  STATUS_CODE_ERROR: 2,
};

/**
 * Decodes an OTLP/JSON trace export request into spans. Spans with invalid ids are refused one by
 * one (`rejected`, `rejectReasons`); a body that is not OTLP/JSON throws OTLP_DECODE_FAILED.
 */
export function decodeOtlpJson(text: string, options: DecodeOptions): DecodedSpans {
  const root = parseOtlpJson(text);
  const decoder = newDecoder(options);
  walkOtlpJson(() => {
    for (const _slice of decoder.request(root));
  }, REQUEST);
  return resultOf(decoder);
}

/**
 * `decodeOtlpJson`, awaiting `pause()` after parsing and each time SLICE_SPANS spans were read,
 * so that a body of many megabytes holds the event loop only while `JSON.parse` runs (which
 * cannot be cut).
 */
export async function decodeOtlpJsonInSlices(
  text: string,
  options: DecodeOptions,
  pause: () => Promise<void>,
): Promise<DecodedSpans> {
  const root = parseOtlpJson(text);
  await pause();
  const decoder = newDecoder(options);
  const slices = decoder.request(root);
  while (!walkOtlpJson(() => slices.next().done === true, REQUEST)) await pause();
  return resultOf(decoder);
}

const REQUEST = 'ExportTraceServiceRequest';

/** Spans read between two pauses of `decodeOtlpJsonInSlices` (a few ms of work). */
const SLICE_SPANS = 1000;

function newDecoder(options: DecodeOptions): JsonDecoder {
  return new JsonDecoder(normaliseLimit(options.maxAttributeBytes), countLimitsOf(options));
}

function resultOf(decoder: JsonDecoder): DecodedSpans {
  return {
    spans: decoder.spans,
    rejected: decoder.rejections.count,
    rejectReasons: decoder.rejections.reasons,
    ...(decoder.rejections.count > 0 ? { rejectedSpans: decoder.rejections.spans } : {}),
  };
}

/** Parses an OTLP/JSON body; OTLP_DECODE_FAILED naming only a position when it is not JSON. */
export function parseOtlpJson(text: string): unknown {
  try {
    // A byte order mark is not JSON, but some clients send one.
    return JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch (err) {
    // V8's message may quote the body: keep only the position.
    const message = err instanceof Error ? err.message : '';
    const at = /at position (\d+)/.exec(message)?.[1];
    const position =
      at ?? (message.includes('end of JSON input') ? String(text.length) : undefined);
    throw OtlpErrors.OTLP_DECODE_FAILED(
      position === undefined
        ? 'OTLP/JSON body is not valid JSON'
        : `OTLP/JSON body is not valid JSON (at position ${position})`,
    );
  }
}

/** Runs a decoder's walk of a parsed body; a shape problem becomes OTLP_DECODE_FAILED with its path. */
export function walkOtlpJson<T>(walk: () => T, message: string): T {
  try {
    return walk();
  } catch (err) {
    if (err instanceof ShapeError) {
      const path = err.path.reverse().join('.');
      throw OtlpErrors.OTLP_DECODE_FAILED(
        `OTLP/JSON body is not an ${message}: ${path === '' ? '' : `${path}: `}${err.problem}`,
        { details: [{ path, message: err.problem }] },
      );
    }
    throw err;
  }
}

export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function nullToAbsent(v: unknown): unknown {
  return v === null ? undefined : v;
}

export function objectOrAbsent(v: unknown, what: string): JsonObject | undefined {
  if (v === undefined || isObject(v)) return v;
  throw new ShapeError(`${what} must be an object`);
}

export function arrayOrAbsent(v: unknown, what: string): unknown[] {
  if (v === undefined) return [];
  if (Array.isArray(v)) return v;
  throw new ShapeError(`${what} must be an array`);
}

export function stringOrAbsent(v: unknown, what: string): string {
  if (v === undefined) return '';
  if (typeof v === 'string') return v;
  throw new ShapeError(`${what} must be a string`);
}

export function time(v: unknown, what: string): string {
  if (v === undefined) return '0';
  const t = jsonUint64Decimal(v);
  if (t === undefined) throw new ShapeError(`${what} must be an unsigned 64-bit integer`);
  return t;
}

function enumValue(v: unknown, names: Record<string, number>, count: number, what: string): number {
  if (v === undefined) return 0;
  if (typeof v === 'number') return Number.isInteger(v) && v >= 0 && v < count ? v : 0;
  if (typeof v === 'string') {
    const named = names[v];
    if (named !== undefined && Object.hasOwn(names, v)) return named;
    const n = /^[0-9]{1,3}$/.test(v) ? Number(v) : -1;
    return n >= 0 && n < count ? n : 0;
  }
  throw new ShapeError(`${what} must be an enum number or name`);
}

/** A uint32 field (`droppedAttributesCount`): a JSON number, or its decimal string. */
export function uint32(v: unknown, what: string): number {
  if (v === undefined) return 0;
  const n = typeof v === 'string' && /^[0-9]{1,10}$/.test(v) ? Number(v) : v;
  if (typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= 0xffffffff) return n;
  throw new ShapeError(`${what} must be an unsigned 32-bit integer`);
}

const HEX_DIGITS = /^[0-9a-fA-F]*$/;
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

/**
 * An id from OTLP/JSON as lowercase hex: '' when absent or empty, undefined when it is neither
 * `2 * bytes` hex digits nor base64 of exactly `bytes` bytes.
 */
export function jsonId(v: unknown, bytes: number): string | undefined {
  if (v === undefined || v === '') return '';
  if (typeof v !== 'string') return undefined;
  if (v.length === bytes * 2) return HEX_DIGITS.test(v) ? v.toLowerCase() : undefined;
  // base64 of 16 bytes is 22 characters (24 padded), of 8 bytes 11 (12 padded).
  const b64 = Math.ceil((bytes * 4) / 3);
  if ((v.length === b64 || v.length === Math.ceil(bytes / 3) * 4) && BASE64.test(v)) {
    const raw = Buffer.from(v, 'base64');
    return raw.length === bytes ? raw.toString('hex') : undefined;
  }
  return undefined;
}

export function isZeroHex(hex: string): boolean {
  for (let i = 0; i < hex.length; i++) if (hex.charCodeAt(i) !== 48) return false;
  return true;
}

export class JsonDecoder {
  readonly spans: Span[] = [];
  readonly rejections = new Rejections();
  /** Spans read since `request()` last yielded. */
  private sliceSpans = 0;

  constructor(
    private readonly maxBytes: number,
    protected readonly counts: SpanCountLimits,
  ) {}

  // Each message walks its own keys once (a switch per key): unknown fields cost nothing, both
  // spellings are one case, and no lookup probes for absent keys. lowerCamelCase wins over
  // snake_case when a body has both.

  /**
   * ExportTraceServiceRequest. Yields (nothing) after every SLICE_SPANS spans; run it to its end
   * to decode the whole body.
   */
  *request(root: unknown): Generator<void, void, void> {
    if (!isObject(root)) throw new ShapeError('the body must be a JSON object');
    let list: unknown;
    for (const k in root) {
      if (k === 'resourceSpans' || (k === 'resource_spans' && list === undefined)) list = root[k];
    }
    const items = arrayOrAbsent(nullToAbsent(list), 'resourceSpans');
    for (let i = 0; i < items.length; i++) {
      try {
        yield* this.resourceSpans(items[i]);
      } catch (err) {
        throw within(err, 'resourceSpans', i);
      }
    }
  }

  private *resourceSpans(v: unknown): Generator<void, void, void> {
    if (!isObject(v)) throw new ShapeError('must be an object');
    const resource: Attributes = {};
    let res: unknown;
    let list: unknown;
    for (const k in v) {
      if (k === 'resource') res = v[k];
      else if (k === 'scopeSpans' || (k === 'scope_spans' && list === undefined)) list = v[k];
    }
    const r = objectOrAbsent(nullToAbsent(res), 'resource');
    if (r !== undefined) {
      for (const k in r) {
        if (k === 'attributes') {
          this.attributes(r[k], resource, 'resource.attributes', Number.POSITIVE_INFINITY);
        }
      }
    }
    const items = arrayOrAbsent(nullToAbsent(list), 'scopeSpans');
    for (let i = 0; i < items.length; i++) {
      try {
        yield* this.scopeSpans(items[i], resource);
      } catch (err) {
        throw within(err, 'scopeSpans', i);
      }
    }
  }

  private *scopeSpans(v: unknown, resource: Attributes): Generator<void, void, void> {
    if (!isObject(v)) throw new ShapeError('must be an object');
    const scope: InstrumentationScope = { name: '', version: '' };
    let sc: unknown;
    let list: unknown;
    for (const k in v) {
      if (k === 'scope') sc = v[k];
      else if (k === 'spans') list = v[k];
    }
    const s = objectOrAbsent(nullToAbsent(sc), 'scope');
    if (s !== undefined) {
      for (const k in s) {
        if (k === 'name') scope.name = stringOrAbsent(nullToAbsent(s[k]), 'scope.name');
        else if (k === 'version')
          scope.version = stringOrAbsent(nullToAbsent(s[k]), 'scope.version');
      }
    }
    const items = arrayOrAbsent(nullToAbsent(list), 'spans');
    for (let i = 0; i < items.length; i++) {
      try {
        this.span(items[i], resource, scope);
      } catch (err) {
        throw within(err, 'spans', i);
      }
      if (++this.sliceSpans === SLICE_SPANS) {
        this.sliceSpans = 0;
        yield;
      }
    }
  }

  private span(v: unknown, resource: Attributes, scope: InstrumentationScope): void {
    if (!isObject(v)) throw new ShapeError('must be an object');
    let traceIdRaw: unknown;
    let spanIdRaw: unknown;
    let parentRaw: unknown;
    let name = '';
    let kind = 0;
    let startRaw: unknown;
    let endRaw: unknown;
    let attributeList: unknown;
    let eventList: unknown;
    let linkList: unknown;
    let statusRaw: unknown;
    let droppedAttributesRaw: unknown;
    let droppedEventsRaw: unknown;
    let droppedLinksRaw: unknown;
    for (const k in v) {
      const x = v[k];
      if (x === null) continue;
      switch (k) {
        case 'traceId':
          traceIdRaw = x;
          break;
        case 'trace_id':
          traceIdRaw ??= x;
          break;
        case 'spanId':
          spanIdRaw = x;
          break;
        case 'span_id':
          spanIdRaw ??= x;
          break;
        case 'parentSpanId':
          parentRaw = x;
          break;
        case 'parent_span_id':
          parentRaw ??= x;
          break;
        case 'name':
          name = stringOrAbsent(x, 'name');
          break;
        case 'kind':
          kind = enumValue(x, SPAN_KIND_NAMES, 6, 'kind');
          break;
        case 'startTimeUnixNano':
          startRaw = x;
          break;
        case 'start_time_unix_nano':
          startRaw ??= x;
          break;
        case 'endTimeUnixNano':
          endRaw = x;
          break;
        case 'end_time_unix_nano':
          endRaw ??= x;
          break;
        case 'attributes':
          attributeList = x;
          break;
        case 'events':
          eventList = x;
          break;
        case 'links':
          linkList = x;
          break;
        case 'status':
          statusRaw = x;
          break;
        case 'droppedAttributesCount':
          droppedAttributesRaw = x;
          break;
        case 'dropped_attributes_count':
          droppedAttributesRaw ??= x;
          break;
        case 'droppedEventsCount':
          droppedEventsRaw = x;
          break;
        case 'dropped_events_count':
          droppedEventsRaw ??= x;
          break;
        case 'droppedLinksCount':
          droppedLinksRaw = x;
          break;
        case 'dropped_links_count':
          droppedLinksRaw ??= x;
          break;
      }
    }
    const startTime = time(startRaw, 'startTimeUnixNano');
    const endTime = time(endRaw, 'endTimeUnixNano');
    const attributes: Attributes = {};
    const { counts } = this;
    const droppedAttributes =
      uint32(droppedAttributesRaw, 'droppedAttributesCount') +
      this.attributes(attributeList, attributes, 'attributes', counts.maxAttributesPerSpan);

    // Events and links past the count limits are not read; they count as dropped.
    const events: SpanEvent[] = [];
    const eventItems = arrayOrAbsent(eventList, 'events');
    const eventCount = Math.min(eventItems.length, counts.maxEventsPerSpan);
    const droppedEvents =
      uint32(droppedEventsRaw, 'droppedEventsCount') + eventItems.length - eventCount;
    for (let i = 0; i < eventCount; i++) {
      try {
        events.push(this.event(eventItems[i]));
      } catch (err) {
        throw within(err, 'events', i);
      }
    }

    const links: SpanLink[] = [];
    let linkProblem: RejectReason | undefined;
    const linkItems = arrayOrAbsent(linkList, 'links');
    const linkCount = Math.min(linkItems.length, counts.maxLinksPerSpan);
    const droppedLinks =
      uint32(droppedLinksRaw, 'droppedLinksCount') + linkItems.length - linkCount;
    for (let i = 0; i < linkCount; i++) {
      try {
        const link = this.link(linkItems[i]);
        if (typeof link === 'string') linkProblem ??= link;
        else links.push(link);
      } catch (err) {
        throw within(err, 'links', i);
      }
    }

    const status: { code: StatusCode; message: string } = { code: 0, message: '' };
    const st = objectOrAbsent(statusRaw, 'status');
    if (st !== undefined) {
      for (const k in st) {
        const x = st[k];
        if (x === null) continue;
        if (k === 'code') {
          status.code = enumValue(x, STATUS_CODE_NAMES, 3, 'status.code') as StatusCode;
        } else if (k === 'message') {
          status.message = capString(stringOrAbsent(x, 'status.message'), this.maxBytes);
        }
      }
    }

    const traceId = jsonId(traceIdRaw, 16);
    const spanId = jsonId(spanIdRaw, 8);
    const parent = jsonId(parentRaw, 8);
    let problem: RejectReason | undefined = linkProblem;
    if (traceId === undefined || traceId === '') problem = REJECT.traceIdInvalid;
    else if (isZeroHex(traceId)) problem = REJECT.traceIdZero;
    else if (spanId === undefined || spanId === '') problem = REJECT.spanIdInvalid;
    else if (isZeroHex(spanId)) problem = REJECT.spanIdZero;
    else if (parent === undefined) problem = REJECT.parentSpanIdInvalid;
    if (
      problem !== undefined ||
      traceId === undefined ||
      spanId === undefined ||
      parent === undefined
    ) {
      this.rejections.add(problem ?? REJECT.traceIdInvalid, {
        index: this.spans.length + this.rejections.count,
        ...(traceId ? { traceId } : {}),
        ...(spanId ? { spanId } : {}),
      });
      return;
    }

    const span: Span = {
      traceId,
      spanId,
      // Some exporters send zeros for "no parent".
      parentSpanId: isZeroHex(parent) ? '' : parent,
      name,
      kind,
      startTimeUnixNano: startTime,
      endTimeUnixNano: endTime,
      attributes,
      events,
      links,
      status,
      resource,
      scope,
    };
    if (droppedAttributes > 0) span.droppedAttributesCount = droppedAttributes;
    if (droppedEvents > 0) span.droppedEventsCount = droppedEvents;
    if (droppedLinks > 0) span.droppedLinksCount = droppedLinks;
    this.spans.push(span);
  }

  private event(v: unknown): SpanEvent {
    if (!isObject(v)) throw new ShapeError('must be an object');
    const event: SpanEvent = { name: '', timeUnixNano: '0', attributes: {} };
    let timeRaw: unknown;
    let droppedRaw: unknown;
    let skipped = 0;
    for (const k in v) {
      const x = v[k];
      if (x === null) continue;
      switch (k) {
        case 'name':
          event.name = stringOrAbsent(x, 'name');
          break;
        case 'timeUnixNano':
          timeRaw = x;
          break;
        case 'time_unix_nano':
          timeRaw ??= x;
          break;
        case 'attributes':
          skipped = this.attributes(
            x,
            event.attributes,
            'attributes',
            this.counts.maxAttributesPerEvent,
          );
          break;
        case 'droppedAttributesCount':
          droppedRaw = x;
          break;
        case 'dropped_attributes_count':
          droppedRaw ??= x;
          break;
      }
    }
    event.timeUnixNano = time(timeRaw, 'timeUnixNano');
    const dropped = uint32(droppedRaw, 'droppedAttributesCount') + skipped;
    if (dropped > 0) event.droppedAttributesCount = dropped;
    return event;
  }

  private link(v: unknown): SpanLink | RejectReason {
    if (!isObject(v)) throw new ShapeError('must be an object');
    const attributes: Attributes = {};
    let traceIdRaw: unknown;
    let spanIdRaw: unknown;
    let droppedRaw: unknown;
    let skipped = 0;
    for (const k in v) {
      const x = v[k];
      if (x === null) continue;
      switch (k) {
        case 'traceId':
          traceIdRaw = x;
          break;
        case 'trace_id':
          traceIdRaw ??= x;
          break;
        case 'spanId':
          spanIdRaw = x;
          break;
        case 'span_id':
          spanIdRaw ??= x;
          break;
        case 'attributes':
          skipped = this.attributes(x, attributes, 'attributes', this.counts.maxAttributesPerLink);
          break;
        case 'droppedAttributesCount':
          droppedRaw = x;
          break;
        case 'dropped_attributes_count':
          droppedRaw ??= x;
          break;
      }
    }
    const dropped = uint32(droppedRaw, 'droppedAttributesCount') + skipped;
    const traceId = jsonId(traceIdRaw, 16);
    if (traceId === undefined || traceId === '' || isZeroHex(traceId))
      return REJECT.linkTraceIdInvalid;
    const spanId = jsonId(spanIdRaw, 8);
    if (spanId === undefined || spanId === '' || isZeroHex(spanId)) return REJECT.linkSpanIdInvalid;
    const link: SpanLink = { traceId, spanId, attributes };
    if (dropped > 0) link.droppedAttributesCount = dropped;
    return link;
  }

  /**
   * A KeyValue array set on `into`; `what` names the field for errors. Entries past `max` are not
   * read; returns how many there were.
   */
  protected attributes(v: unknown, into: Attributes, what: string, max: number): number {
    const list = arrayOrAbsent(nullToAbsent(v), what);
    const count = Math.min(list.length, max);
    for (let i = 0; i < count; i++) {
      try {
        this.keyValue(list[i], into, 0);
      } catch (err) {
        throw within(err, what, i);
      }
    }
    return list.length - count;
  }

  private keyValue(v: unknown, into: Attributes, depth: number): void {
    if (!isObject(v)) throw new ShapeError('must be an object');
    // Both spellings are the same here, so plain reads (every KeyValue has one shape) beat for-in.
    const key = stringOrAbsent(nullToAbsent(v.key), 'key');
    const obj = objectOrAbsent(nullToAbsent(v.value), 'value');
    if (obj === undefined) return;
    const decoded = this.anyValue(obj, depth);
    if (decoded !== undefined) setAttribute(into, key, decoded);
  }

  /** An AnyValue object; undefined when it holds no value. The first value field present wins. */
  protected anyValue(v: JsonObject, depth: number): AttributeValue | undefined {
    if (depth >= MAX_VALUE_DEPTH) throw new ShapeError('attribute values nested too deeply');
    for (const k in v) {
      const x = v[k];
      if (x === null || x === undefined) continue;
      switch (k) {
        case 'stringValue':
        case 'string_value':
          if (typeof x !== 'string') throw new ShapeError('stringValue must be a string');
          return capString(x, this.maxBytes);
        case 'boolValue':
        case 'bool_value':
          if (typeof x !== 'boolean') throw new ShapeError('boolValue must be a boolean');
          return x;
        case 'intValue':
        case 'int_value': {
          const n = jsonInt64Value(x);
          if (n === undefined) throw new ShapeError('intValue must be a 64-bit integer');
          return n;
        }
        case 'doubleValue':
        case 'double_value':
          return jsonDouble(x);
        case 'arrayValue':
        case 'array_value':
          return this.arrayValue(x, depth);
        case 'kvlistValue':
        case 'kvlist_value':
          return this.kvlistValue(x, depth);
        case 'bytesValue':
        case 'bytes_value':
          if (typeof x !== 'string' || x.length % 4 === 1 || !BASE64.test(x)) {
            throw new ShapeError('bytesValue must be base64');
          }
          // A copy that owns its memory (Buffer.from may hand out a slice of a shared pool).
          return new Uint8Array(Buffer.from(x, 'base64'));
      }
    }
    return undefined;
  }

  private arrayValue(x: unknown, depth: number): AttributeValue[] {
    if (!isObject(x)) throw new ShapeError('arrayValue must be an object');
    const list = arrayOrAbsent(nullToAbsent(x.values), 'arrayValue.values');
    const out: AttributeValue[] = [];
    for (let i = 0; i < list.length; i++) {
      const item = list[i];
      if (item === null) continue;
      try {
        if (!isObject(item)) throw new ShapeError('must be an object');
        const decoded = this.anyValue(item, depth + 1);
        if (decoded !== undefined) out.push(decoded);
      } catch (err) {
        throw within(err, 'arrayValue.values', i);
      }
    }
    return out;
  }

  private kvlistValue(x: unknown, depth: number): { [key: string]: AttributeValue } {
    if (!isObject(x)) throw new ShapeError('kvlistValue must be an object');
    const list = arrayOrAbsent(nullToAbsent(x.values), 'kvlistValue.values');
    const out: { [key: string]: AttributeValue } = {};
    for (let i = 0; i < list.length; i++) {
      try {
        this.keyValue(list[i], out, depth + 1);
      } catch (err) {
        throw within(err, 'kvlistValue.values', i);
      }
    }
    return out;
  }
}

function jsonDouble(x: unknown): number {
  if (typeof x === 'number') return x;
  if (typeof x === 'string') {
    if (x === 'NaN') return Number.NaN;
    if (x === 'Infinity') return Number.POSITIVE_INFINITY;
    if (x === '-Infinity') return Number.NEGATIVE_INFINITY;
    const n = x.trim() === '' ? Number.NaN : Number(x);
    if (!Number.isNaN(n)) return n;
  }
  throw new ShapeError('doubleValue must be a number');
}
