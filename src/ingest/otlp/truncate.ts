/**
 * The attribute size cap shared by both decoders: a string over the limit keeps its longest prefix
 * that fits (whole characters) and ends with a marker saying how many bytes were removed.
 */
import { Buffer } from 'node:buffer';

/** The marker appended to a cut string. */
export function truncationMarker(removedBytes: number): string {
  return `…[truncated ${removedBytes} bytes]`;
}

/** Normalises `maxAttributeBytes`: a non-negative integer, or Infinity for "no cap". */
export function normaliseLimit(max: number): number {
  if (Number.isNaN(max) || max <= 0) return 0;
  return max === Number.POSITIVE_INFINITY ? max : Math.floor(max);
}

const encoder = new TextEncoder();
/** Reused for cuts up to 1 MiB; a larger cap gets a buffer per cut (cuts are rare). */
const SCRATCH_MAX = 1 << 20;
let scratch = new Uint8Array(0);

/**
 * The longest prefix of `s` that is at most `max` UTF-8 bytes, without splitting a character, and
 * the number of UTF-8 bytes it holds.
 */
export function utf8Prefix(s: string, max: number): { text: string; bytes: number } {
  let dest: Uint8Array;
  if (max > SCRATCH_MAX) dest = new Uint8Array(max);
  else {
    if (scratch.length < max) scratch = new Uint8Array(max);
    dest = scratch.subarray(0, max);
  }
  const { read, written } = encoder.encodeInto(s, dest);
  return { text: s.slice(0, read), bytes: written };
}

/** `s` itself when it fits in `max` UTF-8 bytes, else its cut prefix plus the marker. */
export function capString(s: string, max: number): string {
  // A UTF-16 unit encodes to at most 3 UTF-8 bytes: short strings need no measuring.
  if (s.length * 3 <= max) return s;
  const total = Buffer.byteLength(s, 'utf8');
  if (total <= max) return s;
  const kept = utf8Prefix(s, max);
  return kept.text + truncationMarker(total - kept.bytes);
}
