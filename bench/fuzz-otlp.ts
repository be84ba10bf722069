/**
 * Fuzzes the OTLP decoders with hostile bodies: random bytes, random protobuf trees on the OTLP
 * field numbers, and mutations of valid payloads made by the OpenTelemetry JS SDK (bit flips,
 * truncations, length-field corruption, splices of two payloads, inserted and deleted bytes) for
 * protobuf; for JSON, text mutations and structural ones (a node replaced by a value of another
 * type, keys renamed or deleted, deep nesting).
 *
 * A failure is any exception that is not an OTLP_DECODE_FAILED TouchstoneError, a decode error
 * whose message does not have the fixed shape (so could echo content), a decoded span that breaks
 * the Span invariants, or an input that still takes > 100 ms when timed again. The reproducer is
 * printed as base64 and main() throws. Deterministic: iteration i of a seed is always the same body.
 */

import { isTouchstoneError, type Span } from '../src/core/index.js';
import { decodeOtlpJson, decodeOtlpProtobuf } from '../src/ingest/otlp/index.js';
import {
  genAiSpans,
  overrideSpan,
  sdkTrace,
  toJson,
  toProtobuf,
} from '../src/ingest/otlp/otel-spans.testkit.js';
import {
  any,
  cat,
  fixed32,
  fixed64,
  group,
  keyValue,
  ld,
  request,
  span,
  varint,
} from '../src/ingest/otlp/wire.testkit.js';

const HANG_MS = 100;
const MAX_SUSPECTS = 100;
const SEED = 0x5eed;

/** mulberry32: small, fast, deterministic. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Rand = () => number;
const int = (r: Rand, n: number): number => Math.floor(r() * n);
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[int(r, xs.length)]!;

// ---- protobuf mutations ---------------------------------------------------------------------

function encodeVarint(v: number): number[] {
  const out: number[] = [];
  let x = v;
  while (x >= 0x80) {
    out.push((x % 128) | 0x80);
    x = Math.floor(x / 128);
  }
  out.push(x);
  return out;
}

/** Offsets and values of every length prefix in a valid payload (nested messages included). */
function lengthFields(buf: Uint8Array): { at: number; size: number; value: number }[] {
  const found: { at: number; size: number; value: number }[] = [];
  const readVarint = (p: number): [number, number] | undefined => {
    let v = 0;
    let mul = 1;
    for (let i = 0; i < 10 && p + i < buf.length; i++) {
      const b = buf[p + i]!;
      v += (b & 0x7f) * mul;
      mul *= 128;
      if (b < 0x80) return [v, i + 1];
    }
    return undefined;
  };
  const walk = (start: number, end: number): boolean => {
    let p = start;
    const mine: { at: number; size: number; value: number }[] = [];
    while (p < end) {
      const tag = readVarint(p);
      if (tag === undefined || tag[0] >>> 3 === 0) return false;
      p += tag[1];
      switch (tag[0] & 7) {
        case 0: {
          const v = readVarint(p);
          if (v === undefined) return false;
          p += v[1];
          break;
        }
        case 1:
          p += 8;
          break;
        case 5:
          p += 4;
          break;
        case 2: {
          const len = readVarint(p);
          if (len === undefined || p + len[1] + len[0] > end) return false;
          mine.push({ at: p, size: len[1], value: len[0] });
          p += len[1];
          walk(p, p + len[0]);
          p += len[0];
          break;
        }
        default:
          return false;
      }
    }
    if (p !== end) return false;
    found.push(...mine);
    return true;
  };
  walk(0, buf.length);
  return found;
}

interface Seed {
  body: Uint8Array;
  lengths: { at: number; size: number; value: number }[];
}

function splice(a: Uint8Array, at: number, remove: number, insert: ArrayLike<number>): Uint8Array {
  const out = new Uint8Array(a.length - remove + insert.length);
  out.set(a.subarray(0, at), 0);
  out.set(insert, at);
  out.set(a.subarray(at + remove), at + insert.length);
  return out;
}

function randomBytes(r: Rand, n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = int(r, 256);
  return out;
}

/**
 * A random message tree on the OTLP field numbers, with any wire type anywhere. `budget.nodes`
 * bounds its size (an unbounded random tree grows exponentially); a thin chain reaches depth 40.
 */
function randomMessage(r: Rand, depth: number, budget: { nodes: number }): Uint8Array {
  const parts: Uint8Array[] = [];
  const fields = 1 + int(r, 6);
  for (let i = 0; i < fields && budget.nodes > 0; i++) {
    budget.nodes--;
    const no = r() < 0.9 ? 1 + int(r, 16) : 1 + int(r, 2000);
    const kind = int(r, 10);
    if (kind < 5 && depth < 40) parts.push(ld(no, randomMessage(r, depth + 1, budget)));
    else if (kind === 5) parts.push(ld(no, randomBytes(r, pick(r, [0, 1, 8, 16, 3, 40]))));
    else if (kind === 6) {
      const big = BigInt.asIntN(64, BigInt(int(r, 2 ** 31)) << BigInt(int(r, 40)));
      parts.push(varint(no, r() < 0.5 ? int(r, 10) : big));
    } else if (kind === 7) {
      parts.push(fixed64(no, BigInt.asUintN(64, BigInt(int(r, 2 ** 31)) << BigInt(int(r, 34)))));
    } else if (kind === 8) parts.push(fixed32(no, int(r, 2 ** 32)));
    else {
      const inner = depth < 40 && r() < 0.5 ? [randomMessage(r, depth + 1, budget)] : [];
      parts.push(group(no, ...inner));
    }
  }
  return cat(...parts);
}

const STRINGS = [
  '',
  'a',
  'gen_ai.request.model',
  'é日🚀',
  'x'.repeat(40),
  '__proto__',
  'constructor',
];

function randomString(r: Rand): Uint8Array | string {
  const c = int(r, 10);
  if (c < 6) return pick(r, STRINGS);
  if (c < 8) return randomBytes(r, int(r, 70)); // often invalid UTF-8
  return 'y'.repeat(int(r, 200));
}

function randomAnyValue(r: Rand, depth: number): Uint8Array {
  const c = int(r, depth > 36 ? 5 : 10);
  switch (c) {
    case 0:
    case 1:
      return any.string(randomString(r));
    case 2:
      return any.bool(r() < 0.5);
    case 3:
      return any.int(
        pick(r, [0, -1, 2 ** 53 - 1, 2 ** 53, -(2n ** 63n), 2n ** 63n - 1n, int(r, 1e6)]),
      );
    case 4:
      return r() < 0.1
        ? new Uint8Array(0)
        : any.double(pick(r, [0.5, -0, Number.NaN, 1e308, -1e-308]));
    case 5:
    case 6: {
      const n = int(r, 4);
      return any.array(...Array.from({ length: n }, () => randomAnyValue(r, depth + 1)));
    }
    case 7:
    case 8: {
      const n = int(r, 4);
      return any.kvlist(
        ...Array.from({ length: n }, () =>
          ld(1, keyValue(randomString(r), randomAnyValue(r, depth + 1))),
        ),
      );
    }
    default:
      return any.bytes(randomBytes(r, int(r, 20)));
  }
}

function randomId(r: Rand, size: number): Uint8Array {
  const c = int(r, 20);
  if (c === 0) return new Uint8Array(size);
  if (c === 1) return randomBytes(r, int(r, size * 2));
  const id = randomBytes(r, size);
  id[0] = 1 + int(r, 255);
  return id;
}

/** A well-formed request with random content: ids (sometimes invalid), values, nesting, enums. */
function generatedRequest(r: Rand): Uint8Array {
  const spans: Uint8Array[] = [];
  const n = 1 + int(r, 5);
  for (let i = 0; i < n; i++) {
    const attributes = Array.from({ length: int(r, 6) }, () =>
      keyValue(randomString(r), randomAnyValue(r, r() < 0.05 ? 30 : 0)),
    );
    const extra: Uint8Array[] = [];
    if (r() < 0.3) {
      const event = cat(
        fixed64(1, BigInt(int(r, 2 ** 31)) << 32n),
        ld(2, randomString(r)),
        ...attributes.map((kv) => ld(3, kv)),
      );
      extra.push(ld(11, event));
    }
    if (r() < 0.2)
      extra.push(
        ld(
          13,
          cat(ld(1, randomId(r, 16)), ld(2, randomId(r, 8)), ...attributes.map((kv) => ld(4, kv))),
        ),
      );
    if (r() < 0.5) extra.push(ld(15, cat(ld(2, randomString(r)), varint(3, int(r, 5) - 1))));
    if (r() < 0.1) extra.push(group(1000 + int(r, 10), varint(1, 1)));
    spans.push(
      span({
        traceId: randomId(r, 16),
        spanId: randomId(r, 8),
        ...(r() < 0.5 ? { parentSpanId: randomId(r, 8) } : {}),
        name: pick(r, STRINGS),
        kind: int(r, 8) - 1,
        start: BigInt.asUintN(64, BigInt(int(r, 2 ** 31)) << BigInt(int(r, 34))),
        attributes,
        extra,
      }),
    );
  }
  return request(spans, [keyValue('service.name', any.string(randomString(r)))]);
}

function mutateProtobuf(r: Rand, seeds: Seed[]): { body: Uint8Array; how: string } {
  const choice = int(r, 100);
  if (choice < 5) return { body: randomBytes(r, int(r, 300)), how: 'random bytes' };
  if (choice < 15) {
    return { body: ld(1, randomMessage(r, 0, { nodes: 5 + int(r, 150) })), how: 'random tree' };
  }
  if (choice < 30) {
    const body = generatedRequest(r);
    if (r() < 0.6) return { body, how: 'generated' };
    return { body: body.subarray(0, int(r, body.length + 1)), how: 'generated+truncate' };
  }
  const seed = pick(r, seeds);
  let body = seed.body;
  let how = '';
  const steps = r() < 0.6 ? 1 : 2 + int(r, 2);
  for (let s = 0; s < steps; s++) {
    const m = int(r, 7);
    if (m === 0) {
      body = body.slice();
      const flips = 1 + int(r, 8);
      for (let i = 0; i < flips && body.length > 0; i++)
        body[int(r, body.length)]! ^= 1 << int(r, 8);
      how += 'flip ';
    } else if (m === 1) {
      body = body.subarray(0, int(r, body.length + 1));
      how += 'truncate ';
    } else if (m === 2 && s === 0 && seed.lengths.length > 0) {
      const f = pick(r, seed.lengths);
      const value = pick(r, [
        0,
        f.value + 1,
        Math.max(0, f.value - 1),
        f.value * 2,
        f.value + 1 + int(r, 64),
        2 ** 31 - 1,
        2 ** 32 - 1,
        int(r, 1 << 20),
      ]);
      body = splice(body, f.at, f.size, encodeVarint(value));
      how += 'length ';
    } else if (m === 3) {
      const other = pick(r, seeds).body;
      const a = int(r, body.length + 1);
      const b = int(r, other.length + 1);
      body = cat(body.subarray(0, a), other.subarray(b));
      how += 'splice ';
    } else if (m === 4) {
      const other = pick(r, seeds).body;
      const from = int(r, other.length + 1);
      const chunk = other.subarray(from, from + int(r, 64));
      body = splice(body, int(r, body.length + 1), 0, chunk);
      how += 'insert ';
    } else if (m === 5 && body.length > 0) {
      const at = int(r, body.length);
      body = splice(body, at, Math.min(body.length - at, 1 + int(r, 16)), []);
      how += 'delete ';
    } else {
      body = splice(body, int(r, body.length + 1), 0, randomBytes(r, 1 + int(r, 8)));
      how += 'garbage ';
    }
  }
  return { body, how: how.trim() };
}

// ---- JSON mutations -------------------------------------------------------------------------

const JSON_CHARS = '{}[]",:-.0123456789eE abcdefnrtul\\\u00e9\u65e5\ud83d\ude80';
const ODD_VALUES: unknown[] = [
  null,
  0,
  -1,
  1.5,
  1e308,
  '',
  'x',
  '0',
  '-9223372036854775809',
  '18446744073709551616',
  'NaN',
  '4BF92F3577B34DA6A3CE929D0E0E4736',
  '0000000000000000',
  'AAAAAAAAAAAAAAAAAAAAAA==',
  true,
  [],
  {},
  [{}],
  { stringValue: 'v' },
  { intValue: '9007199254740993' },
  {
    arrayValue: {
      values: [{ kvlistValue: { values: [{ key: 'k', value: { boolValue: true } }] } }],
    },
  },
  { bytesValue: 'AAH+/w==' },
  { bytesValue: 'A' },
  { kind: 'SPAN_KIND_SERVER' },
  { __proto__: null, key: '__proto__', value: { stringValue: 'p' } },
];
const KEYS = [
  'resourceSpans',
  'scope_spans',
  'spans',
  'attributes',
  'value',
  'values',
  'traceId',
  'span_id',
  'intValue',
  'arrayValue',
  'kvlistValue',
  'status',
  'code',
  'kind',
  'events',
  'links',
  'key',
  '__proto__',
  'zz',
];

function deep(n: number): unknown {
  let v: unknown = { stringValue: 'leaf' };
  for (let i = 0; i < n; i++) v = { arrayValue: { values: [v] } };
  return v;
}

/** Every container node of a JSON tree (objects and arrays). */
function containers(root: unknown, out: (Record<string, unknown> | unknown[])[] = []) {
  if (typeof root === 'object' && root !== null) {
    out.push(root as Record<string, unknown>);
    for (const v of Object.values(root)) containers(v, out);
  }
  return out;
}

function mutateJson(r: Rand, seeds: string[]): { text: string; how: string } {
  const choice = int(r, 100);
  const seed = pick(r, seeds);
  if (choice < 35) {
    const tree: unknown = JSON.parse(seed);
    const nodes = containers(tree);
    const edits = 1 + int(r, 4);
    let how = 'structure';
    for (let e = 0; e < edits; e++) {
      const node = pick(r, nodes);
      const keys = Object.keys(node);
      const op = int(r, 5);
      if (keys.length === 0 || op === 0) {
        const key = Array.isArray(node) ? String(node.length) : pick(r, KEYS);
        (node as Record<string, unknown>)[key] = pick(r, ODD_VALUES);
      } else if (op === 1) {
        (node as Record<string, unknown>)[pick(r, keys)] = pick(r, ODD_VALUES);
      } else if (op === 2 && !Array.isArray(node)) {
        delete node[pick(r, keys)];
      } else if (op === 3 && !Array.isArray(node)) {
        const k = pick(r, keys);
        node[pick(r, KEYS)] = node[k];
        delete node[k];
      } else {
        (node as Record<string, unknown>)[pick(r, keys)] = deep(pick(r, [31, 32, 33, 200]));
        how = 'structure+deep';
      }
    }
    return { text: JSON.stringify(tree), how };
  }
  if (choice < 45) return { text: seed.slice(0, int(r, seed.length + 1)), how: 'truncate' };
  if (choice < 55) {
    const other = pick(r, seeds);
    return {
      text: seed.slice(0, int(r, seed.length + 1)) + other.slice(int(r, other.length + 1)),
      how: 'splice',
    };
  }
  if (choice < 60) {
    let s = '';
    const n = int(r, 200);
    for (let i = 0; i < n; i++) s += JSON_CHARS[int(r, JSON_CHARS.length)];
    return { text: s, how: 'random text' };
  }
  const chars = [...seed];
  const flips = 1 + int(r, 6);
  for (let i = 0; i < flips; i++)
    chars[int(r, chars.length)] = JSON_CHARS[int(r, JSON_CHARS.length)]!;
  return { text: chars.join(''), how: 'char flips' };
}

// ---- checks ---------------------------------------------------------------------------------

const PB_MESSAGE = /^OTLP protobuf body could not be decoded: [a-z0-9 ]+ at byte offset \d+$/;
const JSON_MESSAGE =
  /^OTLP\/JSON body (is not valid JSON( \(at position \d+\))?|is not an ExportTraceServiceRequest: ([A-Za-z_]+(\[\d+\])?(\.[A-Za-z_]+(\[\d+\])?)*: )?[A-Za-z0-9_. -]+)$/;
const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
const DIGITS = /^(0|[1-9][0-9]*)$/;

function checkSpans(spans: Span[]): string | undefined {
  for (const s of spans) {
    if (!HEX32.test(s.traceId) || /^0+$/.test(s.traceId)) return 'bad trace id';
    if (!HEX16.test(s.spanId) || /^0+$/.test(s.spanId)) return 'bad span id';
    if (s.parentSpanId !== '' && !HEX16.test(s.parentSpanId)) return 'bad parent span id';
    if (!DIGITS.test(s.startTimeUnixNano) || !DIGITS.test(s.endTimeUnixNano)) return 'bad time';
    if (!Number.isInteger(s.kind) || s.kind < 0 || s.kind > 5) return 'bad kind';
    if (s.status.code !== 0 && s.status.code !== 1 && s.status.code !== 2) return 'bad status';
    if (typeof s.name !== 'string' || typeof s.attributes !== 'object') return 'bad span';
    if (Object.getPrototypeOf(s.attributes) !== Object.prototype)
      return 'attributes prototype changed';
    for (const l of s.links) if (!HEX32.test(l.traceId) || !HEX16.test(l.spanId)) return 'bad link';
  }
  return undefined;
}

interface Outcome {
  error?: string;
  spans: number;
  rejected: number;
  failed: boolean;
}

function runOnce(kind: 'protobuf' | 'json', body: Uint8Array | string, max: number): Outcome {
  try {
    const out =
      kind === 'protobuf'
        ? decodeOtlpProtobuf(body as Uint8Array, { maxAttributeBytes: max })
        : decodeOtlpJson(body as string, { maxAttributeBytes: max });
    const bad = checkSpans(out.spans);
    return {
      spans: out.spans.length,
      rejected: out.rejected,
      failed: false,
      ...(bad ? { error: bad } : {}),
    };
  } catch (err) {
    if (!isTouchstoneError(err) || err.code !== 'OTLP_DECODE_FAILED') {
      return {
        error: `unexpected ${err instanceof Error ? err.stack : String(err)}`,
        spans: 0,
        rejected: 0,
        failed: true,
      };
    }
    if (!(kind === 'protobuf' ? PB_MESSAGE : JSON_MESSAGE).test(err.message)) {
      return {
        error: `message of an unexpected shape: ${err.message}`,
        spans: 0,
        rejected: 0,
        failed: true,
      };
    }
    return { spans: 0, rejected: 0, failed: true };
  }
}

function reproducer(body: Uint8Array | string): string {
  return Buffer.from(typeof body === 'string' ? Buffer.from(body, 'utf8') : body).toString(
    'base64',
  );
}

async function seedCorpus(): Promise<{ protobuf: Seed[]; json: string[] }> {
  const { root, child, other } = await sdkTrace();
  const rich = overrideSpan(root, {
    attributes: {
      ...root.attributes,
      big: 2 ** 60,
      bytes: new Uint8Array([0, 1, 254, 255]),
      nested: { a: [1, 'two', { three: false, four: [2.5, 'é🚀'] }] },
      long: 'x'.repeat(300),
    },
  });
  const sdkSets = [[other, child, rich], await genAiSpans(10, 3)];
  const handmade = [
    request(
      [
        span({
          attributes: [
            keyValue('bad', any.string(new Uint8Array([0x61, 0xff, 0xc3]))),
            keyValue('deep', any.array(any.array(any.kvlist(ld(1, keyValue('k', any.int(-1n))))))),
            keyValue('bytes', any.bytes(new Uint8Array([1, 2, 3]))),
          ],
          extra: [group(99, varint(1, 1)), fixed32(100, 1), fixed64(101, 2n)],
        }),
        span({ spanId: new Uint8Array(8), parentSpanId: new Uint8Array(8) }),
      ],
      [keyValue('service.name', any.string('svc'))],
    ),
  ];
  const protobuf = [...sdkSets.map(toProtobuf), ...handmade].map((body) => ({
    body,
    lengths: lengthFields(body),
  }));
  const json = sdkSets.map(toJson);
  json.push(
    JSON.stringify({
      resource_spans: [
        {
          scope_spans: [
            {
              spans: [
                {
                  trace_id: '4BF92F3577B34DA6A3CE929D0E0E4736',
                  span_id: 'o86Snwi+Ryc=',
                  kind: 'SPAN_KIND_CLIENT',
                  start_time_unix_nano: 1767225600000000,
                  attributes: [{ key: 'i', value: { int_value: '-9007199254740993' } }],
                  status: { code: 'STATUS_CODE_ERROR', message: 'm' },
                },
              ],
            },
          ],
        },
      ],
    }),
  );
  return { protobuf, json };
}

export async function main(iterations = 1_000_000): Promise<void> {
  const corpus = await seedCorpus();
  const r = rng(SEED);
  const counts = {
    protobuf: { ok: 0, failed: 0, spans: 0, rejected: 0 },
    json: { ok: 0, failed: 0, spans: 0, rejected: 0 },
  };
  const byMutation = new Map<string, number>();
  let maxMs = 0;
  type Input = { kind: 'protobuf' | 'json'; body: Uint8Array | string; max: number };
  // Inputs over HANG_MS (at most MAX_SUSPECTS), re-timed alone at the end.
  const suspects: Input[] = [];
  let slow = 0;
  // With --expose-gc the heap figures are after a full collection, so growth means retention.
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const heapStart = process.memoryUsage().heapUsed;
  const started = performance.now();
  let lastReport = started;

  for (let i = 0; i < iterations; i++) {
    const kind = i % 2 === 0 ? 'protobuf' : 'json';
    const max = i % 3 === 0 ? 16 : 64 * 1024;
    let body: Uint8Array | string;
    let how: string;
    if (kind === 'protobuf') ({ body, how } = mutateProtobuf(r, corpus.protobuf));
    else ({ text: body, how } = mutateJson(r, corpus.json));
    const key = `${kind}: ${how.split(' ')[0]}`;
    byMutation.set(key, (byMutation.get(key) ?? 0) + 1);

    const t = performance.now();
    const outcome = runOnce(kind, body, max);
    const ms = performance.now() - t;

    if (outcome.error !== undefined) {
      console.log(
        `FAIL at iteration ${i} (${kind}, ${how}, maxAttributeBytes ${max}): ${outcome.error}`,
      );
      console.log(
        `reproducer (base64${kind === 'json' ? ' of the UTF-8 text' : ''}): ${reproducer(body)}`,
      );
      throw new Error(`fuzz-otlp: ${kind} decoder failed at iteration ${i}`);
    }
    const c = counts[kind];
    if (outcome.failed) c.failed++;
    else {
      c.ok++;
      c.spans += outcome.spans;
      c.rejected += outcome.rejected;
    }
    if (ms > maxMs) maxMs = ms;
    if (ms > HANG_MS) {
      slow++;
      if (suspects.length < MAX_SUSPECTS) suspects.push({ kind, body, max });
    }
    const now = performance.now();
    if (now - lastReport > 30_000) {
      lastReport = now;
      console.log(`  … ${i + 1} iterations, ${(((i + 1) * 1000) / (now - started)).toFixed(0)}/s`);
    }
  }
  const seconds = (performance.now() - started) / 1000;
  gc?.();
  const heapEnd = process.memoryUsage().heapUsed;

  // A slow iteration on a busy machine may be a GC pause or the scheduler: time each again alone
  // (best of 3); one that is still slow is a hang.
  let retimedMs = 0;
  let hang: Input | undefined;
  for (const input of suspects) {
    let best = Number.POSITIVE_INFINITY;
    for (let k = 0; k < 3; k++) {
      const t = performance.now();
      runOnce(input.kind, input.body, input.max);
      best = Math.min(best, performance.now() - t);
    }
    retimedMs = Math.max(retimedMs, best);
    if (best > HANG_MS) hang ??= input;
  }

  const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
  console.log(
    `iterations: ${iterations} in ${seconds.toFixed(1)} s (${(iterations / seconds).toFixed(0)}/s), seed ${SEED}`,
  );
  for (const kind of ['protobuf', 'json'] as const) {
    const c = counts[kind];
    console.log(
      `${kind.padEnd(8)} decoded ${c.ok} (${c.spans} spans kept, ${c.rejected} refused), OTLP_DECODE_FAILED ${c.failed}, other errors 0`,
    );
  }
  console.log(
    `mutations: ${[...byMutation]
      .sort()
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
  );
  console.log(
    `max time per iteration: ${maxMs.toFixed(1)} ms; ${slow} over ${HANG_MS} ms, ` +
      `slowest of ${suspects.length} re-timed alone: ${retimedMs.toFixed(1)} ms`,
  );
  console.log(
    `heap used: start ${mb(heapStart)}, end ${mb(heapEnd)}` +
      (gc === undefined ? ' (no --expose-gc: figures include garbage)' : ' (after full GC)'),
  );
  if (hang !== undefined) {
    console.log(`reproducer of the hang (${hang.kind}, base64): ${reproducer(hang.body)}`);
    throw new Error(`fuzz-otlp: an input takes over ${HANG_MS} ms every time (hang)`);
  }
}
