/**
 * Format-blind mutations of valid inputs: bytes (bit flips, truncation, splices of two inputs,
 * inserted, deleted and garbage bytes), text (character flips, cuts, splices) and JSON trees
 * (a node replaced by a value of another type, keys added, renamed or deleted, deep nesting).
 * Targets add format-aware ones (protobuf length fields, Parquet page headers).
 */
import { int, pick, type Rand, randomBytes, randomText } from './random.js';

/** `a` with `remove` bytes at `at` replaced by `insert`. */
export function splice(a: Uint8Array, at: number, remove: number, insert: ArrayLike<number>) {
  return Buffer.concat([a.subarray(0, at), Uint8Array.from(insert), a.subarray(at + remove)]);
}

/** A mutation of one input; `others` are the rest of the corpus, for splices. */
export interface ByteOp {
  name: string;
  apply(r: Rand, body: Uint8Array, others: readonly Uint8Array[]): Uint8Array;
}

const BYTE_OPS: readonly ByteOp[] = [
  {
    name: 'flip',
    apply(r, body) {
      const out = new Uint8Array(body); // a copy: a seed is never changed
      const flips = 1 + int(r, 8);
      for (let i = 0; i < flips && out.length > 0; i++) out[int(r, out.length)]! ^= 1 << int(r, 8);
      return out;
    },
  },
  { name: 'truncate', apply: (r, body) => body.subarray(0, int(r, body.length + 1)) },
  {
    name: 'splice',
    apply(r, body, others) {
      const other = pick(r, others);
      const head = body.subarray(0, int(r, body.length + 1));
      return Buffer.concat([head, other.subarray(int(r, other.length + 1))]);
    },
  },
  {
    name: 'insert',
    apply(r, body, others) {
      const other = pick(r, others);
      const from = int(r, other.length + 1);
      return splice(body, int(r, body.length + 1), 0, other.subarray(from, from + int(r, 64)));
    },
  },
  {
    name: 'delete',
    apply(r, body) {
      if (body.length === 0) return body;
      const at = int(r, body.length);
      return splice(body, at, Math.min(body.length - at, 1 + int(r, 16)), []);
    },
  },
  {
    name: 'garbage',
    apply: (r, body) => splice(body, int(r, body.length + 1), 0, randomBytes(r, 1 + int(r, 8))),
  },
];

/**
 * One mutation (60%) or two or three in a row (`flip + truncate`). `aware` mutations know the
 * layout of `seed` (its offsets), so they may only come first, while the body is still the seed.
 */
export function mutateBytes(
  r: Rand,
  seed: Uint8Array,
  others: readonly Uint8Array[],
  aware: readonly ByteOp[] = [],
): { body: Uint8Array; how: string } {
  let body = seed;
  const how: string[] = [];
  const steps = r() < 0.6 ? 1 : 2 + int(r, 2);
  for (let s = 0; s < steps; s++) {
    const op = s === 0 && aware.length > 0 && r() < 0.2 ? pick(r, aware) : pick(r, BYTE_OPS);
    body = op.apply(r, body, others);
    how.push(op.name);
  }
  return { body, how: how.join(' + ') };
}

// ---- text ----------------------------------------------------------------------------------

export function flipChars(r: Rand, text: string, alphabet: string, flips: number): string {
  const chars = [...text];
  if (chars.length === 0) return text;
  const from = [...alphabet];
  for (let i = 0; i < flips; i++) chars[int(r, chars.length)] = pick(r, from);
  return chars.join('');
}

export const cutText = (r: Rand, text: string): string => text.slice(0, int(r, text.length + 1));

export const spliceText = (r: Rand, a: string, b: string): string =>
  a.slice(0, int(r, a.length + 1)) + b.slice(int(r, b.length + 1));

// ---- JSON ----------------------------------------------------------------------------------

/** What structural JSON mutations put in: the format's keys and values of every type. */
export interface JsonVocabulary {
  keys: readonly string[];
  values: readonly unknown[];
  /** A value nested `depth` levels deep, in the format's own shape. */
  deep(depth: number): unknown;
  /** Depths `deep` is asked for. */
  depths: readonly number[];
  /** Characters of text mutations. */
  alphabet: string;
}

type Container = Record<string, unknown> | unknown[];

/** Every container node of a JSON tree (objects and arrays). */
function containers(root: unknown, out: Container[] = []): Container[] {
  if (typeof root === 'object' && root !== null) {
    out.push(root as Container);
    for (const v of Object.values(root)) containers(v, out);
  }
  return out;
}

/** 1–4 edits of a parsed JSON tree, in place; says whether deep nesting went in. */
export function editTree(r: Rand, tree: unknown, vocab: JsonVocabulary): string {
  const nodes = containers(tree);
  if (nodes.length === 0) return 'structure';
  const edits = 1 + int(r, 4);
  let how = 'structure';
  for (let e = 0; e < edits; e++) {
    const node = pick(r, nodes);
    const keys = Object.keys(node);
    const op = int(r, 5);
    const set = (k: string, v: unknown) => {
      (node as Record<string, unknown>)[k] = v;
    };
    if (keys.length === 0 || op === 0) {
      set(Array.isArray(node) ? String(node.length) : pick(r, vocab.keys), pick(r, vocab.values));
    } else if (op === 1) {
      set(pick(r, keys), pick(r, vocab.values));
    } else if (op === 2 && !Array.isArray(node)) {
      delete node[pick(r, keys)];
    } else if (op === 3 && !Array.isArray(node)) {
      const k = pick(r, keys);
      node[pick(r, vocab.keys)] = node[k];
      delete node[k];
    } else {
      set(pick(r, keys), vocab.deep(pick(r, vocab.depths)));
      how = 'structure+deep';
    }
  }
  return how;
}

/**
 * A mutated JSON text: structural edits (35%), a cut (10%), a splice of two texts (10%), random
 * text of the format's characters (5%) or character flips (40%).
 */
export function mutateJson(
  r: Rand,
  seeds: readonly string[],
  vocab: JsonVocabulary,
): { text: string; how: string } {
  const choice = int(r, 100);
  const seed = pick(r, seeds);
  if (choice < 35) {
    const tree: unknown = JSON.parse(seed);
    const how = editTree(r, tree, vocab);
    return { text: JSON.stringify(tree), how };
  }
  if (choice < 45) return { text: cutText(r, seed), how: 'truncate' };
  if (choice < 55) return { text: spliceText(r, seed, pick(r, seeds)), how: 'splice' };
  if (choice < 60) return { text: randomText(r, vocab.alphabet, int(r, 200)), how: 'random text' };
  return { text: flipChars(r, seed, vocab.alphabet, 1 + int(r, 6)), how: 'char flips' };
}
