import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { agentRun, sampleTrace } from '../../../../test/fakes/langfuse/samples.js';
import { LangfuseFake } from '../../../../test/fakes/langfuse/server.js';
import { FaultProxy } from '../../../../test/support/fault-proxy.js';
import { isTouchstoneError, type TouchstoneError } from '../../../core/index.js';
import { createHttpClient, type HttpClient } from '../../../net/index.js';
import type { TraceHeader, WriteBackItem } from '../../connector.js';
import { createLangfuseConnector, type LangfuseConnectorOptions } from './connector.js';
import { otelTraceId } from './ids.js';

/**
 * What a broken or hostile endpoint does to the connector: the contract fake behind a
 * fault-injecting proxy, over the product's HTTP client. Every case ends in a clear
 * TouchstoneError that says whether a retry helps, a failed write-back outcome, or a
 * `{missing: reason}` — and no error, outcome or reason ever holds the credential.
 */

const T0 = Date.parse('2025-06-15T14:07:40.000Z');
const SECRET = 'sk-lf-sentinel-secret-5b7e1c';
const PUBLIC = 'pk-lf-sentinel-public-0d2a';

let fake: LangfuseFake;
let proxy: FaultProxy;
let http: HttpClient;
/** Everything the connector reported, checked for the credential after each test. */
const reported: unknown[] = [];

beforeAll(async () => {
  fake = await LangfuseFake.start({ publicKey: PUBLIC, secretKey: SECRET });
  proxy = await FaultProxy.start(fake.url);
  http = createHttpClient({ timeoutMs: 10_000 });
});
afterAll(async () => {
  await http.close();
  await proxy.close();
  await fake.close();
});
beforeEach(() => {
  fake.observations.length = 0;
  fake.add(...sampleTrace(T0), ...agentRun(1, T0 + 60_000));
  fake.requests.length = 0;
  fake.violations.length = 0;
  fake.throttle = undefined;
  proxy.fault = undefined;
  proxy.seen.length = 0;
  reported.length = 0;
});
afterEach(() => {
  expect(fake.violations).toEqual([]);
  const basic = Buffer.from(`${PUBLIC}:${SECRET}`).toString('base64');
  for (const r of reported) {
    const text = [
      r instanceof Error ? `${r.message}\n${r.stack ?? ''}` : '',
      JSON.stringify(r),
      isTouchstoneError(r) ? JSON.stringify(r.details) : '',
    ].join('\n');
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(basic);
  }
});

function connector(extra: Partial<LangfuseConnectorOptions> = {}) {
  return createLangfuseConnector({
    endpoint: proxy.url,
    http,
    credential: () => `${PUBLIC}:${SECRET}`,
    ...extra,
  });
}

async function caught(p: Promise<unknown>): Promise<TouchstoneError> {
  try {
    reported.push(await p);
  } catch (err) {
    reported.push(err);
    if (isTouchstoneError(err)) return err;
    throw err;
  }
  throw new Error('expected a TouchstoneError');
}

async function written(items: WriteBackItem[]) {
  const out = await connector().writeBack(items);
  reported.push(out);
  return out;
}

const header: TraceHeader = {
  storeId: '6a1f0c3e9b2d4f5a8c7e1d2b3a4f5e6d',
  traceId: '6a1f0c3e9b2d4f5a8c7e1d2b3a4f5e6d',
  startMs: T0,
  inProgress: false,
  resource: {},
};
const item: WriteBackItem = {
  storeId: header.storeId,
  traceId: header.traceId,
  policy: 'quality',
  metric: 'helpfulness',
  judge: false,
  score: { name: 'helpfulness', value: 0.5 },
};
const LIST = { fromMs: T0, toMs: T0 + 3_600_000, pageSize: 10 };
const LOGIN_PAGE = '<!doctype html><html><body><form>Sign in to continue</form></body></html>';

function fault(status: number, body: string, headers: Record<string, string> = {}): void {
  proxy.fault = { status, body, headers: { 'content-type': 'application/json', ...headers } };
}

describe('an endpoint that answers HTML (a login page, a proxy, the wrong base URL)', () => {
  it('a 200 HTML page: check, list and fetch fail, not retryable, naming the content type', async () => {
    fault(200, LOGIN_PAGE, { 'content-type': 'text/html; charset=utf-8' });
    for (const p of [connector().check(), connector().list(LIST), connector().fetch([header])]) {
      const err = await caught(p);
      expect(err).toMatchObject({ code: 'LANGFUSE_BAD_RESPONSE', retryable: false });
      expect(err.message).toContain('text/html instead of JSON');
      expect(err.message).not.toContain('Sign in');
    }
    const [out] = await written([item]);
    expect(out).toMatchObject({ status: 'failed', retryable: false });
    expect((out as { error: string }).error).toContain('text/html');
  });

  it('an HTML 404: the v2 observations route is missing here, said clearly', async () => {
    fault(404, LOGIN_PAGE, { 'content-type': 'text/html' });
    const err = await caught(connector().list(LIST));
    expect(err).toMatchObject({ code: 'LANGFUSE_OBSERVATIONS_API_MISSING', retryable: false });
    expect(err.message).toContain('check that the endpoint is the Langfuse base URL');
    const [out] = await written([item]);
    expect(out).toMatchObject({ status: 'failed', retryable: false });
  });

  it('a redirect (a login redirect, http → https) is not followed', async () => {
    fault(302, '', { location: 'https://login.example.com/' });
    const err = await caught(connector().list(LIST));
    expect(err).toMatchObject({ code: 'LANGFUSE_BAD_RESPONSE', retryable: false });
    expect(err.message).toContain('302 redirect');
  });

  it('invalid JSON and JSON of another shape are bad responses', async () => {
    fault(200, '{"data": [{"id": "trunc');
    let err = await caught(connector().list(LIST));
    expect(err).toMatchObject({ code: 'LANGFUSE_BAD_RESPONSE' });
    expect(err.message).toContain('invalid JSON');
    fault(200, '{"data": "nope", "meta": {}}');
    err = await caught(connector().fetch([header]));
    expect(err).toMatchObject({ code: 'LANGFUSE_BAD_RESPONSE' });
    expect(err.message).toContain('unexpected shape');
  });
});

describe('statuses', () => {
  it('401 and 403 are access denied, not retryable', async () => {
    for (const status of [401, 403]) {
      fault(status, '{"message": "Invalid public key pk-lf-sentinel-public-0d2a"}');
      const err = await caught(connector().check());
      expect(err).toMatchObject({ code: 'LANGFUSE_ACCESS_DENIED', kind: 'permission_denied' });
      expect(err.retryable).toBe(false);
      expect(err.message).not.toContain('Invalid public key');
      const [out] = await written([item]);
      expect(out).toMatchObject({ status: 'failed', retryable: false });
    }
  });

  it("Langfuse's 401 for wrong keys", async () => {
    const err = await caught(connector({ credential: () => `${PUBLIC}:sk-lf-not-it` }).list(LIST));
    expect(err).toMatchObject({ code: 'LANGFUSE_ACCESS_DENIED' });
    expect(err.message).toMatch(
      /^Langfuse at 127\.0\.0\.1:\d+ \(GET v2\/observations\) answered 401/,
    );
  });

  it('a 400 is a refused request naming only the status and Langfuse error class', async () => {
    fault(
      400,
      '{"message": "Invalid request data", "error": [{"path": ["limit"], "message": "limit 5000"}]}',
    );
    const err = await caught(connector().list(LIST));
    expect(err).toMatchObject({ code: 'LANGFUSE_REQUEST_REFUSED', retryable: false });
    expect(err.message).toContain('answered 400');
    expect(err.message).not.toContain('limit 5000');
  });

  it("Langfuse's 429: retryable, with Retry-After, for list, fetch and write-back", async () => {
    fake.throttle = { after: 0, retryAfterSeconds: 7 };
    for (const p of [connector().list(LIST), connector().fetch([header])]) {
      const err = await caught(p);
      expect(err).toMatchObject({
        code: 'LANGFUSE_RATE_LIMITED',
        kind: 'resource_exhausted',
        retryable: true,
        retryAfterSeconds: 7,
      });
      expect(err.message).toContain('429 rate_limited');
    }
    expect(await written([item])).toEqual([
      {
        status: 'failed',
        retryable: true,
        code: 'LANGFUSE_RATE_LIMITED',
        retryAfterSeconds: 7,
        error: expect.any(String),
      },
    ]);
  });

  it('a 429 in the middle of a listing loses nothing: the same page is asked again', async () => {
    fake.add(...agentRun(5, T0 + 5 * 3_600_000));
    fake.throttle = { after: 1, retryAfterSeconds: 3 };
    const query = { ...LIST, toMs: T0 + 30 * 3_600_000 };
    const c = connector();
    const first = await c.list(query);
    expect(first.traces).toHaveLength(2);
    const token = first.nextPageToken as string;
    const err = await caught(c.list({ ...query, pageToken: token }));
    expect(err).toMatchObject({ retryable: true, retryAfterSeconds: 3 });
    fake.throttle = undefined;
    const second = await c.list({ ...query, pageToken: token });
    expect(second.traces.map((h) => h.storeId)).toEqual(['00000005abababababababababababab']);
  });

  it('a 503 with an HTTP-date Retry-After and a 422 query timeout are retryable', async () => {
    fault(503, '', { 'retry-after': new Date(Date.now() + 30_000).toUTCString() });
    let err = await caught(connector().list(LIST));
    expect(err).toMatchObject({ code: 'LANGFUSE_UNAVAILABLE', retryable: true });
    expect(err.retryAfterSeconds).toBeGreaterThan(20);
    fault(422, '{"message": "query hit a limit", "error": "Request timed out"}');
    err = await caught(connector().list(LIST));
    expect(err).toMatchObject({ code: 'LANGFUSE_UNAVAILABLE', retryable: true });
  });

  it('a 500 storm: list and check retryable; fetch stops at the first failure; each write fails', async () => {
    fault(500, '{"message": "Internal Server Error", "error": "connection to clickhouse lost"}');
    for (const p of [connector().check(), connector().list(LIST)]) {
      const err = await caught(p);
      expect(err).toMatchObject({ code: 'LANGFUSE_UNAVAILABLE', retryable: true });
      expect(err.message).not.toContain('clickhouse');
    }
    proxy.seen.length = 0;
    const err = await caught(
      connector().fetch([header, { ...header, storeId: 'other', traceId: otelTraceId('other') }]),
    );
    expect(err).toMatchObject({ code: 'LANGFUSE_UNAVAILABLE', retryable: true });
    expect(proxy.seen).toHaveLength(1);
    expect(await written([item, { ...item, metric: 'other' }])).toEqual([
      {
        status: 'failed',
        retryable: true,
        code: 'LANGFUSE_UNAVAILABLE',
        error: expect.stringContaining('500'),
      },
      {
        status: 'failed',
        retryable: true,
        code: 'LANGFUSE_UNAVAILABLE',
        error: expect.stringContaining('500'),
      },
    ]);
  });

  it('a bare 502 from a proxy is an outage', async () => {
    proxy.fault = { status: 502, headers: { 'content-type': 'text/plain' }, body: 'Bad Gateway' };
    const err = await caught(connector().list(LIST));
    expect(err).toMatchObject({ code: 'LANGFUSE_UNAVAILABLE', retryable: true });
  });
});

describe('large answers and aborts', () => {
  it('a page too large is asked again smaller; one observation too large makes the trace missing', async () => {
    const big = agentRun(2, T0 + 120_000);
    for (const o of big) o.input = 'y'.repeat(40_000);
    const huge = agentRun(3, T0 + 180_000);
    (huge[1] as { output?: string | null }).output = 'z'.repeat(200_000);
    fake.add(...big, ...huge);
    const c = connector({ maxResponseBytes: 100_000 });
    const listed = (await c.list({ ...LIST, pageSize: 100 })).traces;
    const fetched = await c.fetch(listed);
    reported.push(fetched);
    expect(fetched.get('00000002abababababababababababab')).toHaveProperty('spans');
    expect(fetched.get('00000003abababababababababababab')).toEqual({
      missing: 'an observation of this trace is larger than the response size cap',
    });
    const limits = fake
      .requestsTo('/api/public/v2/observations')
      .filter((r) => r.query.get('traceId') === '00000002abababababababababababab')
      .map((r) => r.query.get('limit'));
    // 3 observations of 80 kB: a page of 100 or 10 is too large, pages of 1 fit.
    expect(limits).toEqual(['1000', '100', '10', '1', '1', '1']);
  });

  it('stops when the caller aborts', async () => {
    proxy.fault = { hang: true };
    const ac = new AbortController();
    const pending = connector().fetch([header], ac.signal);
    setTimeout(() => ac.abort(new Error('shutting down')), 50);
    await expect(pending).rejects.toThrow('shutting down');
  });
});
