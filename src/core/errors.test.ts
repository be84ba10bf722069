import { describe, expect, it } from 'vitest';
import { CoreErrors, defineErrors, isError, isTouchstoneError, TouchstoneError } from './errors.js';

/** What an error thrown by a second copy of this module looks like here: same brand, other class. */
function fromAnotherCopy(code: string): Error {
  class OtherTouchstoneError extends Error {
    readonly kind = 'not_found';
    readonly code = code;
    readonly retryable = false;
    readonly details = [];
    get [Symbol.for('touchstone.error')](): true {
      return true;
    }
  }
  return new OtherTouchstoneError('from the other copy');
}

describe('isTouchstoneError', () => {
  it('recognizes an error of this module', () => {
    expect(isTouchstoneError(CoreErrors.NOT_FOUND('gone'))).toBe(true);
  });

  it('recognizes an error built by another copy of the module, which instanceof does not', () => {
    const err = fromAnotherCopy('NOT_FOUND');
    expect(err instanceof TouchstoneError).toBe(false);
    expect(isTouchstoneError(err)).toBe(true);
    expect(isError(err, CoreErrors.NOT_FOUND)).toBe(true);
  });

  it('refuses look-alikes without the brand and values that are not objects', () => {
    const lookAlike = Object.assign(new Error('x'), { kind: 'not_found', code: 'NOT_FOUND' });
    expect(isTouchstoneError(lookAlike)).toBe(false);
    expect(isTouchstoneError({ [Symbol('touchstone.error')]: true })).toBe(false);
    for (const value of [undefined, null, 'NOT_FOUND', 42]) {
      expect(isTouchstoneError(value)).toBe(false);
    }
  });

  it('keeps the brand off the enumerable fields (logged and compared errors are unchanged)', () => {
    const err = CoreErrors.NOT_FOUND('gone');
    expect(Object.getOwnPropertySymbols(err)).toEqual([]);
  });
});

describe('isError', () => {
  const Local = defineErrors({
    ERRORS_TEST_ONE: { kind: 'aborted', doc: 'test' },
    ERRORS_TEST_TWO: { kind: 'aborted', doc: 'test' },
  });

  it('matches the catalogue entry the error was built from, and no other', () => {
    const err = Local.ERRORS_TEST_ONE('one');
    expect(isError(err, Local.ERRORS_TEST_ONE)).toBe(true);
    expect(isError(err, Local.ERRORS_TEST_TWO)).toBe(false);
    expect(isError(new Error('ERRORS_TEST_ONE'), Local.ERRORS_TEST_ONE)).toBe(false);
  });
});
