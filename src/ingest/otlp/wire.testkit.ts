/**
 * Test support: hand-built protobuf fields (on the @bufbuild/protobuf wire writer) for bodies no
 * SDK would send: wrong id lengths, unknown fields of every wire type, fields out of order,
 * invalid UTF-8, deep nesting. Not part of the build (`*.testkit.ts`).
 */
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';

export function cat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** A length-delimited field holding the concatenation of `parts` (a nested message, bytes). */
export function ld(fieldNo: number, ...parts: (Uint8Array | string)[]): Uint8Array {
  const content = cat(
    ...parts.map((p) => (typeof p === 'string' ? new TextEncoder().encode(p) : p)),
  );
  return new BinaryWriter().tag(fieldNo, WireType.LengthDelimited).bytes(content).finish();
}

export function varint(fieldNo: number, value: number | bigint): Uint8Array {
  return new BinaryWriter().tag(fieldNo, WireType.Varint).int64(value).finish();
}

export function fixed64(fieldNo: number, value: bigint | string): Uint8Array {
  return new BinaryWriter().tag(fieldNo, WireType.Bit64).fixed64(value).finish();
}

export function fixed32(fieldNo: number, value: number): Uint8Array {
  return new BinaryWriter().tag(fieldNo, WireType.Bit32).fixed32(value).finish();
}

export function double(fieldNo: number, value: number): Uint8Array {
  return new BinaryWriter().tag(fieldNo, WireType.Bit64).double(value).finish();
}

/** A group (deprecated wire types 3/4) holding `parts`. */
export function group(fieldNo: number, ...parts: Uint8Array[]): Uint8Array {
  return cat(
    new BinaryWriter().tag(fieldNo, WireType.StartGroup).finish(),
    ...parts,
    new BinaryWriter().tag(fieldNo, WireType.EndGroup).finish(),
  );
}

export function hexBytes(hex: string): Uint8Array {
  return Uint8Array.from(hex.match(/../g) ?? [], (b) => Number.parseInt(b, 16));
}

// OTLP messages (field numbers of opentelemetry-proto trace/v1, common/v1, resource/v1).

export const any = {
  string: (s: string | Uint8Array) => ld(1, s),
  bool: (b: boolean) => varint(2, b ? 1 : 0),
  int: (v: number | bigint) => varint(3, v),
  double: (v: number) => double(4, v),
  array: (...values: Uint8Array[]) => ld(5, ...values.map((v) => ld(1, v))),
  kvlist: (...kvs: Uint8Array[]) => ld(6, ...kvs),
  bytes: (b: Uint8Array) => ld(7, b),
};

/** A KeyValue's content (key, AnyValue content). */
export function keyValue(key: string | Uint8Array, value: Uint8Array): Uint8Array {
  return cat(ld(1, key), ld(2, value));
}

export interface RawSpan {
  traceId?: Uint8Array;
  spanId?: Uint8Array;
  parentSpanId?: Uint8Array;
  name?: string;
  kind?: number;
  start?: bigint;
  end?: bigint;
  /** KeyValue contents. */
  attributes?: Uint8Array[];
  /** Extra raw fields appended to the span. */
  extra?: Uint8Array[];
}

export const TRACE_ID = '5b8efff798038103d269b633813fc60c';
export const SPAN_ID = 'eee19b7ec3c1b174';

/** A Span message's content. */
export function span(s: RawSpan = {}): Uint8Array {
  return cat(
    ld(1, s.traceId ?? hexBytes(TRACE_ID)),
    ld(2, s.spanId ?? hexBytes(SPAN_ID)),
    ...(s.parentSpanId === undefined ? [] : [ld(4, s.parentSpanId)]),
    ld(5, s.name ?? 'span'),
    ...(s.kind === undefined ? [] : [varint(6, s.kind)]),
    fixed64(7, s.start ?? 1767225600000000000n),
    fixed64(8, s.end ?? 1767225601000000000n),
    ...(s.attributes ?? []).map((kv) => ld(9, kv)),
    ...(s.extra ?? []),
  );
}

/** A request with one resource and one scope holding `spans` (Span contents). */
export function request(spans: Uint8Array[], resource: Uint8Array[] = []): Uint8Array {
  return ld(
    1,
    ld(1, ...resource.map((kv) => ld(1, kv))),
    ld(2, ld(1, ld(1, 'scope'), ld(2, '1.0')), ...spans.map((s) => ld(2, s))),
  );
}
