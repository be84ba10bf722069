import { describe, expect, it } from 'vitest';
import { createHttpClient, isRetryableStatus } from '../../net/index.js';
import { createLangfuseRest } from './langfuse/rest.js';
import { createMlflowRest } from './mlflow/rest.js';
import { createPhoenixRest } from './phoenix/rest.js';

/**
 * One retry classification: what an HTTP status means for a retry is decided where the error is
 * made, by `isRetryableStatus` (net), and every connector's errors carry that decision (Langfuse
 * adds its 422, a query over its resource limits). Workers only read `retryable`.
 */
const TABLE: [status: number, retryable: boolean][] = [
  [400, false],
  [401, false],
  [403, false],
  [404, false],
  [408, true],
  [409, false],
  [422, false],
  [429, true],
  [500, true],
  [501, false],
  [502, true],
  [503, true],
  [504, true],
  [505, false],
  [599, true],
];

const http = createHttpClient({ timeoutMs: 1_000 });
const endpoint = 'http://127.0.0.1:9';
const answer = (status: number) => ({
  status,
  mediaType: 'application/json',
  json: { error: 'injected' },
  bytes: 20,
});

const connectors = {
  mlflow: (status: number) => createMlflowRest({ endpoint, http }).failure(answer(status), 'test'),
  phoenix: (status: number) =>
    createPhoenixRest({ endpoint, http }).failure(answer(status), 'test'),
  langfuse: (status: number) =>
    createLangfuseRest({ endpoint, http }).failure(answer(status), 'test'),
};

describe('retry classification', () => {
  it.each(TABLE)('HTTP %i is retryable: %s', (status, retryable) => {
    expect(isRetryableStatus(status)).toBe(retryable);
    expect({
      mlflow: connectors.mlflow(status).retryable,
      phoenix: connectors.phoenix(status).retryable,
      langfuse: connectors.langfuse(status).retryable,
    }).toEqual({ mlflow: retryable, phoenix: retryable, langfuse: retryable || status === 422 });
  });

  it('501 and 505 are refusals, not outages, on every connector', () => {
    for (const status of [501, 505]) {
      expect(connectors.mlflow(status).code).toBe('MLFLOW_REQUEST_REFUSED');
      expect(connectors.phoenix(status).code).toBe('PHOENIX_REQUEST_REFUSED');
      expect(connectors.langfuse(status).code).toBe('LANGFUSE_REQUEST_REFUSED');
    }
  });
});
