import type { Span } from '../../core/index.js';
import { genAi } from './gen-ai.js';
import { genAiLegacy } from './gen-ai-legacy.js';
import { langfuse } from './langfuse.js';
import { logfire } from './logfire.js';
import { mlflow } from './mlflow.js';
import { openInference } from './openinference.js';
import { openLlmetry } from './openllmetry.js';
import type { ConventionReader } from './reader.js';
import { vercelAi } from './vercel-ai.js';

/**
 * Every convention reader, in one static list, in the order DESIGN §4 names them. This order is
 * the default; where conventions reference §10 orders a field differently, `precedence.ts` says
 * so by reader name.
 */
export const READERS: readonly ConventionReader[] = [
  genAi,
  genAiLegacy,
  openInference,
  mlflow,
  langfuse,
  openLlmetry,
  vercelAi,
  logfire,
];

export type ReaderName =
  | 'gen-ai'
  | 'gen-ai-legacy'
  | 'openinference'
  | 'mlflow'
  | 'langfuse'
  | 'openllmetry'
  | 'vercel-ai'
  | 'logfire';

const BY_NAME = new Map(READERS.map((r) => [r.name, r]));

/** A reader's bit in a span's mask of readers (`readersOf`). */
export function bitOf(reader: ConventionReader): number {
  return 1 << READERS.indexOf(reader);
}

/** Readers in a precedence order, each with its bit in a span's mask of readers. */
export interface Order {
  readonly readers: readonly ConventionReader[];
  readonly bits: readonly number[];
  /** All their bits: a span whose mask holds none of them is asked nothing. */
  readonly any: number;
}

function orderOf(readers: readonly ConventionReader[]): Order {
  const bits = readers.map(bitOf);
  return { readers, bits, any: bits.reduce((a, b) => a | b, 0) };
}

/** Readers in a precedence order given by name. */
export function inOrder(names: readonly ReaderName[]): Order {
  return orderOf(
    names.map((n) => BY_NAME.get(n)).filter((r): r is ConventionReader => r !== undefined),
  );
}

/** Every reader, in the default order. */
export const ALL: Order = orderOf(READERS);

/** The readers of an order that implement a method (the others would answer nothing). */
export function holding(order: Order, method: keyof ConventionReader): Order {
  return orderOf(order.readers.filter((r) => r[method] !== undefined));
}

/** Whether a reader declares an attribute key (`ConventionReader.reads`). */
export function declares(reader: ConventionReader, key: string): boolean {
  return reader.reads.keys.includes(key) || reader.reads.prefixes.some((p) => key.startsWith(p));
}

/**
 * The readers each attribute key concerns, by key: spans of one instrumentation repeat the same
 * few dozen keys, so each is matched against the declarations once. Bounded: flattened indexed
 * keys (`llm.input_messages.57.message.content`) are many; the map starts over when full.
 */
const KEY_MASKS = new Map<string, number>();
const KEY_MASKS_MAX = 8192;

function keyMask(key: string): number {
  let mask = KEY_MASKS.get(key);
  if (mask !== undefined) return mask;
  mask = 0;
  for (let i = 0; i < READERS.length; i++) {
    if (declares(READERS[i] as ConventionReader, key)) mask |= 1 << i;
  }
  if (KEY_MASKS.size >= KEY_MASKS_MAX) KEY_MASKS.clear();
  KEY_MASKS.set(key, mask);
  return mask;
}

const WITHOUT = READERS.flatMap((r) => {
  const without = r.reads.without;
  return without === undefined ? [] : [{ bit: bitOf(r), without }];
});

/**
 * The readers that may say anything about a span, as a bit mask over READERS: those that declare
 * one of its attribute keys, and those whose `without` holds. Every other reader would read only
 * absent keys and answer nothing, so precedence does not ask it.
 */
export function readersOf(span: Span): number {
  let mask = 0;
  for (const key in span.attributes) mask |= keyMask(key);
  for (const w of WITHOUT) if ((mask & w.bit) === 0 && w.without(span)) mask |= w.bit;
  return mask;
}
