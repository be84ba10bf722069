import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { isTouchstoneError, type Span, type TouchstoneError } from '../../../core/index.js';
import { createHttpClient, type HttpClient } from '../../../net/index.js';
import type { TraceHeader } from '../../connector.js';
import { exchangesOf, loadCassette, recordedBody } from './cassette.testkit.js';
import { createMlflowConnector, type MlflowConnectorOptions } from './connector.js';
import { parseLosslessJson } from './lossless-json.js';

/**
 * What a broken or hostile endpoint does to the connector, over a real socket and the product's
 * HTTP client (its size cap and Retry-After parsing included): every case ends in a clear
 * TouchstoneError that says whether a retry helps, a failed write-back outcome, or a
 * `{missing: reason}`, never a crash. Well-formed answers are the ones recorded from MLflow.
 */

const cassette = loadCassette();
const T = cassette.traces;
const body = (group: string, index = 0) =>
  recordedBody(exchangesOf(cassette, group)[index]!).toString('utf8');
const GET_BY_NAME = body('check');
/** MLflow's own 404 for a route it does not have (an HTML page). */
const ROUTE_MISSING = exchangesOf(cassette, 'route-missing')[0]!;
function routeMissing(res: ServerResponse): void {
  res.statusCode = ROUTE_MISSING.status;
  res.setHeader('content-type', ROUTE_MISSING.headers['content-type'] ?? '');
  res.end(recordedBody(ROUTE_MISSING));
}
const BATCH_GET = parseLosslessJson(
  recordedBody(exchangesOf(cassette, 'fetch').find((e) => e.url.includes('batchGet'))!).toString(
    'utf8',
  ),
) as { traces: { trace_info: { trace_id: string }; spans: Record<string, unknown>[] }[] };

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

let server: Server;
let base: string;
let handler: Handler;
const hits: { method: string; url: string; auth?: string }[] = [];
let http: HttpClient;

beforeAll(async () => {
  server = createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => {
      text += c;
    });
    req.on('end', () => {
      hits.push({
        method: req.method ?? '',
        url: req.url ?? '',
        ...(req.headers.authorization ? { auth: req.headers.authorization } : {}),
      });
      handler(req, res, text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  http = createHttpClient({ timeoutMs: 10_000 });
});

afterAll(async () => {
  await http.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  hits.length = 0;
  handler = (_req, res) => {
    res.statusCode = 500;
    res.end();
  };
});

function json(res: ServerResponse, status: number, value: unknown | string): void {
  res.statusCode = status;
  res.setHeader('content-type', 'application/json');
  res.end(typeof value === 'string' ? value : JSON.stringify(value));
}

/** MLflow's own answers for experiment lookup and an empty search; `rest` for everything else. */
function mlflow(rest: Handler): Handler {
  return (req, res, text) => {
    const path = (req.url ?? '').split('?')[0] ?? '';
    if (path.endsWith('/experiments/get-by-name')) return json(res, 200, GET_BY_NAME);
    return rest(req, res, text);
  };
}

function connector(extra: Partial<MlflowConnectorOptions> = {}) {
  return createMlflowConnector({
    endpoint: base,
    locations: [cassette.experiment],
    http,
    ...extra,
  });
}

async function caught(p: Promise<unknown>): Promise<TouchstoneError> {
  try {
    await p;
  } catch (err) {
    if (isTouchstoneError(err)) return err;
    throw err;
  }
  throw new Error('expected a TouchstoneError');
}

function header(storeId: string, location = 'TRACKING_STORE'): TraceHeader {
  return {
    storeId,
    traceId: storeId.slice(3),
    startMs: 1,
    inProgress: false,
    resource: { 'mlflow.tag.mlflow.trace.spansLocation': location },
  };
}

const item = {
  storeId: T.agent,
  traceId: T.agent.slice(3),
  policy: 'quality',
  metric: 'tool-errors',
  judge: false,
  score: { name: 'tool-errors', value: 0.5 },
};

const LOGIN_PAGE = '<!doctype html><html><body><form>Sign in</form></body></html>';

describe('an endpoint that answers HTML (a login page, a proxy, the wrong base URL)', () => {
  beforeEach(() => {
    handler = (_req, res) => {
      res.setHeader('content-type', 'text/html; charset=utf-8');
      res.end(LOGIN_PAGE);
    };
  });

  it('check, list and fetch fail with a non-retryable error naming the content type', async () => {
    for (const p of [
      connector().check(),
      connector().list({ fromMs: 0, toMs: 10, pageSize: 5 }),
      connector().fetch([header(T.agent)]),
    ]) {
      const err = await caught(p);
      expect(err).toMatchObject({ code: 'MLFLOW_BAD_RESPONSE', retryable: false });
      expect(err.message).toContain('text/html instead of JSON');
      expect(err.message).not.toContain('Sign in');
    }
  });

  it('write-back reports the item failed, not retryable', async () => {
    const [out] = await connector().writeBack([item]);
    expect(out).toMatchObject({ status: 'failed', retryable: false });
    expect((out as { error: string }).error).toContain('text/html');
  });

  it('an HTML 404 on the search route means no v3 trace API', async () => {
    handler = mlflow((_req, res) => routeMissing(res));
    const err = await caught(connector().list({ fromMs: 0, toMs: 10, pageSize: 5 }));
    expect(err).toMatchObject({ code: 'MLFLOW_TRACE_API_MISSING', kind: 'unimplemented' });
  });

  it("MLflow's 400 for a request it refuses is not retryable and names MLflow's error code", async () => {
    const refused = exchangesOf(cassette, 'search-page-too-large')[0]!;
    handler = mlflow((_req, res) =>
      json(res, refused.status, recordedBody(refused).toString('utf8')),
    );
    const err = await caught(connector().list({ fromMs: 0, toMs: 10, pageSize: 5 }));
    expect(err).toMatchObject({ code: 'MLFLOW_REQUEST_REFUSED', retryable: false });
    expect(err.message).toContain('400 INVALID_PARAMETER_VALUE');
  });
});

describe('a 500 storm', () => {
  const errorBody = '{"error_code": "INTERNAL_ERROR", "message": "database is locked"}';

  it('list and check fail retryable', async () => {
    handler = mlflow((_req, res) => json(res, 500, errorBody));
    for (const p of [connector().check(), connector().list({ fromMs: 0, toMs: 10, pageSize: 5 })]) {
      const err = await caught(p);
      expect(err).toMatchObject({
        code: 'MLFLOW_UNAVAILABLE',
        kind: 'unavailable',
        retryable: true,
      });
      expect(err.message).toContain('500 INTERNAL_ERROR');
      expect(err.message).not.toContain('database is locked');
    }
  });

  it('fetch fails retryable after a bounded number of requests', async () => {
    handler = (_req, res) => json(res, 500, errorBody);
    const headers = [T.agent, ...T.questions].map((id) => header(id));
    const err = await caught(connector().fetch(headers));
    expect(err).toMatchObject({ code: 'MLFLOW_UNAVAILABLE', retryable: true });
    // The batch, the first trace alone, its artifact: then it stops.
    expect(hits.length).toBeLessThanOrEqual(3);
  });

  it('a bare 502 from a proxy is an outage at once', async () => {
    handler = (_req, res) => {
      res.statusCode = 502;
      res.end('Bad Gateway');
    };
    const err = await caught(connector().fetch([header(T.agent), header(T.questions[0]!)]));
    expect(err).toMatchObject({ code: 'MLFLOW_UNAVAILABLE', retryable: true });
    expect(hits).toHaveLength(1);
  });

  it('write-back reports each item failed and retryable', async () => {
    handler = (_req, res) => json(res, 500, errorBody);
    const out = await connector().writeBack([item, { ...item, metric: 'other' }]);
    expect(out).toEqual([
      {
        status: 'failed',
        retryable: true,
        code: 'MLFLOW_UNAVAILABLE',
        error: expect.stringContaining('500'),
      },
      {
        status: 'failed',
        retryable: true,
        code: 'MLFLOW_UNAVAILABLE',
        error: expect.stringContaining('500'),
      },
    ]);
  });
});

describe('429 with Retry-After', () => {
  beforeEach(() => {
    handler = mlflow((_req, res) => {
      res.statusCode = 429;
      res.setHeader('retry-after', '7');
      res.end('slow down');
    });
  });

  it('list fails retryable with retryAfterSeconds', async () => {
    const err = await caught(connector().list({ fromMs: 0, toMs: 10, pageSize: 5 }));
    expect(err).toMatchObject({
      code: 'MLFLOW_RATE_LIMITED',
      kind: 'resource_exhausted',
      retryable: true,
      retryAfterSeconds: 7,
    });
  });

  it('fetch and write-back carry the wait too', async () => {
    const err = await caught(connector().fetch([header(T.agent)]));
    expect(err).toMatchObject({ retryable: true, retryAfterSeconds: 7 });
    expect(await connector().writeBack([item])).toEqual([
      {
        status: 'failed',
        retryable: true,
        code: 'MLFLOW_RATE_LIMITED',
        retryAfterSeconds: 7,
        error: expect.any(String),
      },
    ]);
  });

  it('a 503 with an HTTP-date Retry-After is retryable with the wait', async () => {
    handler = mlflow((_req, res) => {
      res.statusCode = 503;
      res.setHeader('retry-after', new Date(Date.now() + 30_000).toUTCString());
      res.end();
    });
    const err = await caught(connector().list({ fromMs: 0, toMs: 10, pageSize: 5 }));
    expect(err).toMatchObject({ code: 'MLFLOW_UNAVAILABLE', retryable: true });
    expect(err.retryAfterSeconds).toBeGreaterThan(20);
  });
});

describe('traces whose spans are missing or malformed', () => {
  const entry = (id: string) => BATCH_GET.traces.find((t) => t.trace_info.trace_id === id)!;

  it('no spans, unreadable spans, a broken artifact: each a {missing} reason, the rest read', async () => {
    const agent = entry(T.agent);
    handler = (req, res) => {
      const url = new URL(req.url ?? '', base);
      if (url.pathname.endsWith('/batchGet')) {
        return json(res, 200, {
          traces: [
            agent,
            { trace_info: { trace_id: T.questions[0] }, spans: [] },
            {
              trace_info: { trace_id: T.questions[1] },
              spans: [{ trace_id: 'not-an-id', span_id: '???', name: 'x' }],
            },
            { trace_info: { trace_id: T.questions[2] }, spans: 'nope' },
          ],
        });
      }
      if (url.searchParams.get('request_id') === T.artifact_only) {
        res.setHeader('content-type', 'text/plain');
        return res.end('{"spans": [{"name": "trunc');
      }
      return json(res, 200, '{"spans": {"not": "a list"}}');
    };
    const fetched = await connector().fetch([
      header(T.agent),
      ...T.questions.map((id) => header(id)),
      header(T.artifact_only, 'ARTIFACT_REPO'),
      header(T.no_spans, 'ARTIFACT_REPO'),
    ]);
    expect((fetched.get(T.agent) as { spans: Span[] }).spans).toHaveLength(5);
    expect(fetched.get(T.questions[0]!)).toEqual({
      missing: 'MLflow holds no spans for this trace',
    });
    expect(fetched.get(T.questions[1]!)).toEqual({
      missing: expect.stringMatching(/^no MLflow span could be read/),
    });
    expect(fetched.get(T.questions[2]!)).toEqual({
      missing: 'MLflow holds no spans for this trace',
    });
    expect(fetched.get(T.artifact_only)).toEqual({
      missing: 'the MLflow trace artifact is not valid JSON',
    });
    expect(fetched.get(T.no_spans)).toEqual({
      missing: 'the MLflow trace artifact holds no span list',
    });
  });

  it('a server without batchGet (HTML 404) is read through the artifact route only', async () => {
    const artifact = body('fetch', 0); // traces.json of the artifact-only trace
    handler = (req, res) => {
      if ((req.url ?? '').includes('/batchGet')) return routeMissing(res);
      res.setHeader('content-type', 'text/plain');
      res.end(artifact);
    };
    const c = connector();
    const first = await c.fetch([header(T.questions[0]!)]);
    const second = await c.fetch([header(T.questions[1]!)]);
    expect((first.get(T.questions[0]!) as { spans: Span[] }).spans).toHaveLength(2);
    expect((second.get(T.questions[1]!) as { spans: Span[] }).spans).toHaveLength(2);
    expect(hits.filter((h) => h.url.includes('batchGet'))).toHaveLength(1);
  });
});

describe('a 20 MB trace', () => {
  it('is reported missing; the traces batched with it are still read', async () => {
    const agent = BATCH_GET.traces.find((t) => t.trace_info.trace_id === T.agent)!;
    const q1 = BATCH_GET.traces.find((t) => t.trace_info.trace_id === T.questions[0])!;
    const huge = {
      ...agent,
      spans: agent.spans.map((s, i) =>
        i === 0
          ? {
              ...s,
              attributes: [
                {
                  key: 'mlflow.spanOutputs',
                  value: { string_value: 'x'.repeat(20 * 1024 * 1024) },
                },
              ],
            }
          : s,
      ),
    };
    handler = (req, res) => {
      const ids = new URL(req.url ?? '', base).searchParams.getAll('trace_ids');
      const traces = [huge, q1].filter((t) => ids.includes(t.trace_info.trace_id));
      json(res, 200, { traces });
    };
    const fetched = await connector().fetch([header(T.agent), header(T.questions[0]!)]);
    expect(fetched.get(T.agent)).toEqual({
      missing: 'the trace is larger than the response size cap',
    });
    expect((fetched.get(T.questions[0]!) as { spans: Span[] }).spans).toHaveLength(2);
    expect(hits.map((h) => new URL(h.url, base).searchParams.getAll('trace_ids').length)).toEqual([
      2, 1, 1,
    ]);
  });
});

describe('big integers', () => {
  it('a nanosecond time and an int64 attribute above 2^53 survive exactly', async () => {
    const nanos = '1795307353510362139';
    const big = '9007199254740993'; // 2^53 + 1: a double cannot hold it
    const text =
      `{"traces":[{"trace_info":{"trace_id":"${T.agent}"},"spans":[{"trace_id":"BaicVOwSXriy602y8NLAOg==",` +
      `"span_id":"nRVFeP3/J5I=","name":"root","start_time_unix_nano":${nanos},"end_time_unix_nano":${nanos}1,` +
      `"attributes":[{"key":"retries","value":{"int_value":${big}}},` +
      `{"key":"mlflow.spanOutputs","value":{"kvlist_value":{"values":[{"key":"n","value":{"int_value":${big}}},` +
      `{"key":"x","value":{"double_value":21.0}}]}}}]}]}]}`;
    handler = (_req, res) => json(res, 200, text);
    const fetched = await connector().fetch([header(T.agent)]);
    const [span] = (fetched.get(T.agent) as { spans: Span[] }).spans;
    expect(span?.startTimeUnixNano).toBe(nanos);
    expect(span?.endTimeUnixNano).toBe(`${nanos}1`);
    expect(span?.attributes.retries).toBe(big);
    expect(span?.attributes['mlflow.spanOutputs']).toBe(`{"n": ${big}, "x": 21.0}`);
  });
});

describe('requests', () => {
  it('send the bearer token on every call and keep an endpoint path prefix', async () => {
    handler = (req, res) => {
      if ((req.url ?? '').endsWith('/experiments/get-by-name?experiment_name=touchstone-fixtures'))
        return json(res, 200, GET_BY_NAME);
      json(res, 200, '{}');
    };
    let n = 0;
    const c = connector({ endpoint: `${base}/mlflow/`, token: () => `t${++n}` });
    await c.list({ fromMs: 0, toMs: 10, pageSize: 999 });
    expect(hits).toEqual([
      {
        method: 'GET',
        url: '/mlflow/api/2.0/mlflow/experiments/get-by-name?experiment_name=touchstone-fixtures',
        auth: 'Bearer t1',
      },
      { method: 'POST', url: '/mlflow/api/3.0/mlflow/traces/search', auth: 'Bearer t2' },
    ]);
  });

  it('clamp the page size to 500 and resolve a numeric location as an experiment id', async () => {
    let sent: Record<string, unknown> = {};
    handler = (req, res, text) => {
      if ((req.url ?? '').startsWith('/api/2.0/mlflow/experiments/get?experiment_id=7')) {
        return json(res, 200, { experiment: { experiment_id: '7', lifecycle_stage: 'active' } });
      }
      sent = JSON.parse(text);
      json(res, 200, '{}');
    };
    await connector({ locations: ['7'] }).list({ fromMs: 0, toMs: 10, pageSize: 10_000 });
    expect(sent).toMatchObject({
      max_results: 500,
      locations: [{ mlflow_experiment: { experiment_id: '7' } }],
    });
  });

  it('a refused credential is not retryable', async () => {
    handler = (_req, res) =>
      json(res, 401, '{"error_code": "UNAUTHENTICATED", "message": "bad token"}');
    const err = await caught(connector({ token: () => 'wrong' }).check());
    expect(err).toMatchObject({
      code: 'MLFLOW_ACCESS_DENIED',
      kind: 'permission_denied',
      retryable: false,
    });
    expect(err.message).not.toContain('wrong');
  });

  it('refuse a deleted experiment', async () => {
    handler = (_req, res) =>
      json(res, 200, {
        experiment: { experiment_id: '3', name: 'old', lifecycle_stage: 'deleted' },
      });
    const err = await caught(connector({ locations: ['old'] }).check());
    expect(err).toMatchObject({ code: 'MLFLOW_EXPERIMENT_NOT_FOUND', kind: 'not_found' });
  });

  it('stop when the caller aborts', async () => {
    handler = () => {
      // never answers
    };
    const ac = new AbortController();
    const pending = connector().fetch([header(T.agent)], ac.signal);
    setTimeout(() => ac.abort(new Error('shutting down')), 50);
    await expect(pending).rejects.toThrow('shutting down');
  });
});

describe('write-back outcomes the writer acts on', () => {
  // Permanent: dead-lettered after this one attempt. Transient: retried with backoff.
  it.each([
    [401, 'UNAUTHENTICATED', 'MLFLOW_ACCESS_DENIED', false],
    [403, 'PERMISSION_DENIED', 'MLFLOW_ACCESS_DENIED', false],
    // MLflow's own 404 on the trace: it does not hold it.
    [404, 'RESOURCE_DOES_NOT_EXIST', 'MLFLOW_REQUEST_REFUSED', false, true],
    [422, 'INVALID_PARAMETER_VALUE', 'MLFLOW_REQUEST_REFUSED', false],
    [429, 'REQUEST_LIMIT_EXCEEDED', 'MLFLOW_RATE_LIMITED', true],
    [503, 'TEMPORARILY_UNAVAILABLE', 'MLFLOW_UNAVAILABLE', true],
  ])('%i %s is %s, retryable %s', async (status, errorCode, code, retryable, missing?) => {
    handler = (_req, res) => json(res, status, { error_code: errorCode, message: 'no' });
    const out = await connector().writeBack([item]);
    expect(out).toEqual([
      {
        status: 'failed',
        retryable,
        code,
        error: expect.any(String),
        ...(missing === true ? { traceMissing: true } : {}),
      },
    ]);
  });

  it.each([
    [
      'an HTML page',
      (res: ServerResponse) => {
        res.writeHead(404, { 'content-type': 'text/html' });
        res.end('<html>not found</html>');
      },
    ],
    [
      'ENDPOINT_NOT_FOUND',
      (res: ServerResponse) =>
        json(res, 404, { error_code: 'ENDPOINT_NOT_FOUND', message: 'No API found' }),
    ],
  ])('a 404 of a route the server lacks (%s) is no missing trace', async (_what, answer) => {
    handler = (_req, res) => answer(res);
    const out = await connector().writeBack([item]);
    expect(out).toEqual([
      {
        status: 'failed',
        retryable: false,
        code: 'MLFLOW_REQUEST_REFUSED',
        error: expect.any(String),
      },
    ]);
  });
});
