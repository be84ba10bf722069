import { describe, expect, it } from 'vitest';
import {
  decodeToken,
  encodeToken,
  firstWindow,
  HOUR_MS,
  MIN_WINDOW_MS,
  shrunkWidth,
  WEEK_MS,
  widthAfter,
  windowEnd,
} from './windows.js';

const Q = { fromMs: 1_000_000, toMs: 1_000_000 + 30 * 24 * HOUR_MS };

describe('listing windows', () => {
  it('start at one hour and double across empty windows up to one week', () => {
    let width = firstWindow(Q.fromMs).width;
    const widths = [width];
    for (let i = 0; i < 10; i++) {
      width = widthAfter(width, 0, 100);
      widths.push(width);
    }
    expect(widths.map((w) => w / HOUR_MS)).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 168, 168, 168]);
  });

  it('after a window with traces the next is at most an hour; a sparse one grows back to it', () => {
    expect(widthAfter(WEEK_MS, 3, 100)).toBe(HOUR_MS);
    expect(widthAfter(HOUR_MS, 90, 100)).toBe(HOUR_MS);
    expect(widthAfter(60_000, 90, 100)).toBe(60_000);
    expect(widthAfter(60_000, 10, 100)).toBe(120_000);
    expect(widthAfter(HOUR_MS / 2 + 1, 10, 100)).toBe(HOUR_MS);
  });

  it('an overflowing window shrinks to the span its newest page covered (at most half, at least 1 ms)', () => {
    // The newest page covered the last 10 minutes of an hour.
    expect(shrunkWidth(0, HOUR_MS, HOUR_MS - 600_000)).toBe(480_000);
    // A page spread over most of the window: halve.
    expect(shrunkWidth(0, HOUR_MS, 60_000)).toBe(HOUR_MS / 2);
    // Everything in the last millisecond.
    expect(shrunkWidth(0, HOUR_MS, HOUR_MS - 1)).toBe(MIN_WINDOW_MS);
    expect(shrunkWidth(0, 1, 0)).toBe(MIN_WINDOW_MS);
  });

  it('end at the query end', () => {
    expect(windowEnd({ start: Q.toMs - 10, width: HOUR_MS }, Q.toMs)).toBe(Q.toMs);
  });

  it('travel in the page token, which belongs to its query only', () => {
    const state = { start: Q.fromMs + 5, width: 4 * HOUR_MS };
    const token = encodeToken(Q, state);
    expect(decodeToken(token, Q)).toEqual(state);
    const dense = { start: Q.fromMs + 5, width: 1, cursor: 'eyJsYXN0In0=' };
    expect(decodeToken(encodeToken(Q, dense), Q)).toEqual(dense);
    expect(decodeToken(token, { ...Q, toMs: Q.toMs + 1 })).toBeUndefined();
    expect(decodeToken('not a token', Q)).toBeUndefined();
    expect(decodeToken(encodeToken(Q, { start: Q.toMs, width: 1 }), Q)).toBeUndefined();
    expect(decodeToken(encodeToken(Q, { start: Q.fromMs, width: 0 }), Q)).toBeUndefined();
  });
});
