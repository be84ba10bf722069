import { describe, expect, it } from 'vitest';
import { isTouchstoneError } from '../core/index.js';
import { jsonErrorOffset, parseJsonBody } from './json.js';

describe('JSON body errors', () => {
  it('finds the offset of the first syntax error', () => {
    expect(jsonErrorOffset('{"a": 1,}')).toBe(8);
    expect(jsonErrorOffset('[1, 2')).toBe(5);
    expect(jsonErrorOffset('{"a": tru}')).toBe(6);
    expect(jsonErrorOffset('{"a": "x\u0001"}')).toBe(8);
    expect(jsonErrorOffset('{"a": 1} x')).toBe(9);
    expect(jsonErrorOffset('"\\q"')).toBe(2);
  });

  it('reports line and column without quoting the body', () => {
    try {
      parseJsonBody('{\n  "password": "hunter2",\n  oops\n}');
      expect.unreachable();
    } catch (err) {
      expect(isTouchstoneError(err) && err.message).toMatch(/line 3, column 3/);
      expect((err as Error).message).not.toContain('hunter2');
    }
  });

  it('parses valid JSON', () => {
    expect(parseJsonBody('{"a":[1,{"b":null}]}')).toEqual({ a: [1, { b: null }] });
  });
});
