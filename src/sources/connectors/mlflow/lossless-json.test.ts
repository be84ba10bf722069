import { describe, expect, it } from 'vitest';
import { JsonSyntaxError, parseLosslessJson } from './lossless-json.js';

describe('parseLosslessJson', () => {
  it('keeps integers beyond 2^53 exact as decimal strings', () => {
    const nanos = '1795307353510362139'; // > 2^53: JSON.parse gives ...362100
    expect(String(JSON.parse(nanos))).not.toBe(nanos);
    expect(
      parseLosslessJson(`{"start_time_unix_nano": ${nanos}, "neg": -9007199254740993}`),
    ).toEqual({
      start_time_unix_nano: nanos,
      neg: '-9007199254740993',
    });
  });

  it('leaves safe integers, doubles and digits inside strings alone', () => {
    expect(
      parseLosslessJson(
        '[9007199254740991, 1e300, 12345678901234567890.5, 0.12345678901234567890, "12345678901234567890", "a\\"99999999999999999999"]',
      ),
    ).toEqual([
      9007199254740991,
      1e300,
      Number('12345678901234567890.5'),
      Number('0.12345678901234567890'),
      '12345678901234567890',
      'a"99999999999999999999',
    ]);
  });

  it('parses deep and pretty-printed bodies like JSON.parse', () => {
    const text = JSON.stringify({ a: [{ b: { c: [1, 2.5, null, true, 'x'] } }] }, null, 2);
    expect(parseLosslessJson(text)).toEqual(JSON.parse(text));
    expect(parseLosslessJson('\ufeff{}')).toEqual({});
  });

  it('reports a position, never the text, on malformed input', () => {
    let err: unknown;
    try {
      parseLosslessJson('{"secret": "hunter2", 12345678901234567890}');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(JsonSyntaxError);
    expect((err as Error).message).toMatch(/^invalid JSON/);
    expect((err as Error).message).not.toContain('hunter2');
    expect(() => parseLosslessJson('<!doctype html><html>')).toThrow(JsonSyntaxError);
  });

  it('stays linear on bodies of unterminated strings and escapes (a regex retried from each quote)', () => {
    const hostile = '"\\'.repeat(100_000);
    const started = process.cpuUsage();
    expect(() => parseLosslessJson(hostile)).toThrow(JsonSyntaxError);
    expect(parseLosslessJson(`[${'"\\\\", '.repeat(50_000)}12345678901234567890]`)).toHaveLength(
      50_001,
    );
    const used = process.cpuUsage(started);
    expect((used.user + used.system) / 1000).toBeLessThan(1_000);
  });
});
