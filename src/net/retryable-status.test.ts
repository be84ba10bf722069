import { describe, expect, it } from 'vitest';
import { isRetryableStatus } from './retryable-status.js';

describe('isRetryableStatus', () => {
  it('retries timeouts, rate limits and passing server failures only', () => {
    for (const s of [408, 429, 500, 502, 503, 504, 599]) expect(isRetryableStatus(s)).toBe(true);
    for (const s of [200, 301, 400, 401, 403, 404, 409, 422, 501, 505]) {
      expect(isRetryableStatus(s)).toBe(false);
    }
  });
});
