/**
 * Protobuf-aware mutations: length prefixes of a valid message rewritten (the decoder must check
 * every length against what is left), and random message trees with any wire type anywhere.
 */
import { cat, fixed32, fixed64, group, ld, varint } from '../../../src/ingest/otlp/wire.testkit.js';
import { type ByteOp, splice } from './mutate.js';
import { int, pick, type Rand, randomBytes } from './random.js';

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

interface LengthField {
  /** Offset of the varint. */
  at: number;
  /** Its size in bytes. */
  size: number;
  value: number;
}

/** Offsets and values of every length prefix in a valid message (nested messages included). */
function lengthFields(buf: Uint8Array): LengthField[] {
  const found: LengthField[] = [];
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
    const mine: LengthField[] = [];
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
          // Bytes and strings are not messages: their walk fails and adds nothing.
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

/** Rewrites one length prefix of `seed` (off by one, doubled, huge, zero). */
export function lengthOp(seed: Uint8Array): ByteOp[] {
  const lengths = lengthFields(seed);
  if (lengths.length === 0) return [];
  return [
    {
      name: 'length',
      apply(r, body) {
        const f = pick(r, lengths);
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
        return splice(body, f.at, f.size, encodeVarint(value));
      },
    },
  ];
}

/**
 * A random message tree on small field numbers, with any wire type anywhere. `budget.nodes`
 * bounds its size (an unbounded random tree grows exponentially); a thin chain reaches depth 40.
 */
export function randomMessage(r: Rand, depth: number, budget: { nodes: number }): Uint8Array {
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
