import { describe, expect, it } from 'vitest';
import { bound, RESULT_BUDGET_CHARS, RESULT_HARD_CAP_CHARS } from './bounds.js';

describe('bound: every tool result within its size budget', () => {
  it('leaves a small result as it is, without a truncated note', () => {
    const r = bound({ a: 'short', n: [1, 2, 3] }, { hint: 'h' });
    expect(JSON.parse(r.text)).toEqual({ a: 'short', n: [1, 2, 3] });
    expect(r.truncated).toBeUndefined();
  });

  it('cuts long strings to the field limit and marks them with their length', () => {
    const r = bound({ output: 'x'.repeat(5_000) }, { fieldChars: 100, hint: 'h' });
    const v = JSON.parse(r.text);
    expect(v.output).toBe(`${'x'.repeat(100)}…[cut: 5000 chars]`);
    expect(v.truncated).toEqual({ strings_cut: 1, hint: 'h' });
  });

  it('shortens the longest list, keeping its first items, and says how many were there', () => {
    const items = Array.from({ length: 500 }, (_, i) => ({ id: i, text: 't'.repeat(400) }));
    const r = bound({ items, next_page_token: 'tok' }, { hint: 'ask for fewer' });
    expect(r.text.length).toBeLessThanOrEqual(RESULT_BUDGET_CHARS);
    const v = JSON.parse(r.text);
    expect(v.items[0].id).toBe(0);
    expect(v.next_page_token).toBe('tok');
    expect(v.truncated.lists).toEqual([{ path: 'items', kept: v.items.length, total: 500 }]);
    expect(v.truncated.hint).toBe('ask for fewer');
  });

  it('never goes over the hard cap, whatever the budget asked for', () => {
    const wide = Object.fromEntries(
      Array.from({ length: 2_000 }, (_, i) => [`k${i}`, 'v'.repeat(2_000)]),
    );
    const r = bound(wide, { budget: 10 * RESULT_HARD_CAP_CHARS, hint: 'h' });
    expect(r.text.length).toBeLessThanOrEqual(RESULT_HARD_CAP_CHARS);
    expect(r.truncated?.strings_cut).toBeGreaterThan(0);
  });

  it('a map too wide to fit even with its strings cut is replaced by a note', () => {
    const keys = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`key-${i}`, i]));
    const r = bound(keys, { hint: 'narrow the request' });
    expect(JSON.parse(r.text)).toEqual({
      truncated: { strings_cut: 0, hint: 'narrow the request' },
      error: 'the result does not fit the size budget',
    });
  });
});
