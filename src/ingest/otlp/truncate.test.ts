import { Buffer } from 'node:buffer';
import { describe, expect, it } from 'vitest';
import { capString, normaliseLimit, truncationMarker } from './truncate.js';

describe('capString', () => {
  it('keeps strings that fit, measured in UTF-8 bytes', () => {
    expect(capString('abc', 3)).toBe('abc');
    expect(capString('日本', 6)).toBe('日本');
    expect(capString('', 0)).toBe('');
  });

  it('cuts on a character boundary and names the bytes removed', () => {
    expect(capString('abcdef', 4)).toBe(`abcd${truncationMarker(2)}`);
    // '日' is 3 bytes: a 4-byte cap keeps one character.
    expect(capString('日本語', 4)).toBe(`日${truncationMarker(6)}`);
    // A surrogate pair (4 bytes) is never split.
    expect(capString('a🚀b', 4)).toBe(`a${truncationMarker(5)}`);
    expect(capString('abc', 0)).toBe(truncationMarker(3));
    expect(truncationMarker(12)).toBe('…[truncated 12 bytes]');
  });

  it('keeps the longest prefix that fits for every cut position', () => {
    const s = 'aé日🚀'.repeat(50);
    const total = Buffer.byteLength(s);
    for (let max = 0; max < total; max++) {
      const out = capString(s, max);
      const kept = out.slice(0, out.indexOf('…['));
      const keptBytes = Buffer.byteLength(kept);
      expect(keptBytes).toBeLessThanOrEqual(max);
      expect(s.startsWith(kept)).toBe(true);
      // The next character would not have fitted.
      const next = s.codePointAt(kept.length)!;
      expect(keptBytes + Buffer.byteLength(String.fromCodePoint(next))).toBeGreaterThan(max);
      expect(out.endsWith(truncationMarker(total - keptBytes))).toBe(true);
    }
  });

  it('normalises the limit', () => {
    expect(normaliseLimit(Number.NaN)).toBe(0);
    expect(normaliseLimit(-5)).toBe(0);
    expect(normaliseLimit(10.7)).toBe(10);
    expect(normaliseLimit(Number.POSITIVE_INFINITY)).toBe(Number.POSITIVE_INFINITY);
  });
});
