import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { isTouchstoneError, type Span, type TouchstoneError } from '../../../core/index.js';
import { createHttpClient, type HttpClient } from '../../../net/index.js';
import type { TraceHeader, WriteBackItem } from '../../connector.js';
import { exchangesOf, loadCassette, recordedBody } from './cassette.testkit.js';
import { createPhoenixConnector, type PhoenixConnectorOptions } from './connector.js';

/**
 * What a broken or hostile endpoint does to the connector, over a real socket and the product's
 * HTTP client (its size cap and Retry-After parsing included): every case ends in a clear
 * TouchstoneError that says whether a retry helps, a failed write-back outcome, or a
 * `{missing: reason}`, never a crash, and never with the API key in it. Phoenix's own error
 * answers are the ones recorded from Phoenix.
 */

const cassette = loadCassette();
const T = cassette.traces;
const KEY = 'phx-secret-key-7f3a9c';
const recorded = (group: string, index = 0) => exchangesOf(cassette, group)[index]!;
const FETCHED = JSON.parse(recordedBody(recorded('fetch')).toString()) as {
  data: { context: { trace_id: string; span_id: string }; name: string }[];
};

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

function send(res: ServerResponse, status: number, type: string, body: string | Buffer): void {
  res.statusCode = status;
  res.setHeader('content-type', type);
  res.setHeader('x-phoenix-server-version', cassette.phoenixVersion);
  res.end(body);
}

function json(res: ServerResponse, status: number, value: unknown): void {
  send(res, status, 'application/json', typeof value === 'string' ? value : JSON.stringify(value));
}

/** Answers a recorded exchange as Phoenix did. */
function replay(res: ServerResponse, group: string, index = 0): void {
  const e = recorded(group, index);
  send(res, e.status, e.headers['content-type'] ?? '', recordedBody(e));
}

function connector(extra: Partial<PhoenixConnectorOptions> = {}) {
  return createPhoenixConnector({
    endpoint: base,
    project: cassette.project,
    http,
    apiKey: () => KEY,
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

function noKey(value: unknown): void {
  const text = isTouchstoneError(value)
    ? `${value.message} ${JSON.stringify(value.details)}`
    : JSON.stringify(value);
  expect(text).not.toContain(KEY);
}

function header(storeId: string): TraceHeader {
  return { storeId, traceId: storeId, startMs: 1, inProgress: false, resource: {} };
}

const item: WriteBackItem = {
  storeId: T.agent,
  traceId: T.agent,
  policy: 'quality',
  metric: 'tool-errors',
  judge: false,
  score: { name: 'tool-errors', value: 0.5 },
};

const window = { fromMs: 0, toMs: 10, pageSize: 5 };

const LOGIN_PAGE = '<!doctype html><html><body><form>Sign in</form></body></html>';

describe('an endpoint that answers HTML (a login page, a proxy, the wrong base URL)', () => {
  beforeEach(() => {
    handler = (_req, res) => {
      res.setHeader('content-type', 'text/html; charset=utf-8');
      res.end(LOGIN_PAGE);
    };
  });

  it('check, list and fetch fail with a non-retryable error naming the content type', async () => {
    for (const run of [
      () => connector().check(),
      () => connector().list(window),
      () => connector().fetch([header(T.agent)]),
    ]) {
      const err = await caught(run());
      expect(err).toMatchObject({ code: 'PHOENIX_BAD_RESPONSE', retryable: false });
      expect(err.message).toContain('text/html instead of JSON');
      expect(err.message).not.toContain('Sign in');
    }
  });

  it('write-back reports the item failed, not retryable', async () => {
    const [out] = await connector().writeBack([item]);
    expect(out).toMatchObject({ status: 'failed', retryable: false });
    expect((out as { error: string }).error).toContain('text/html');
  });

  it("Phoenix's own UI page on the trace route (an older server) means no trace list", async () => {
    handler = (req, res) => {
      if ((req.url ?? '').includes('/traces')) return replay(res, 'route-missing');
      replay(res, 'check', 0);
    };
    for (const run of [() => connector().check(), () => connector().list(window)]) {
      const err = await caught(run());
      expect(err).toMatchObject({ code: 'PHOENIX_TRACE_API_MISSING', kind: 'unimplemented' });
      expect(err.message).toContain(`Phoenix ${cassette.phoenixVersion}`);
    }
  });
});

describe('a 500 storm', () => {
  const body = 'Internal Server Error: database is locked at /srv/phoenix.db';

  it('check, list and fetch fail retryable, without the body', async () => {
    handler = (_req, res) => send(res, 500, 'text/plain; charset=utf-8', body);
    for (const run of [
      () => connector().check(),
      () => connector().list(window),
      () => connector().fetch([header(T.agent), header(T.langgraph)]),
    ]) {
      const err = await caught(run());
      expect(err).toMatchObject({
        code: 'PHOENIX_UNAVAILABLE',
        kind: 'unavailable',
        retryable: true,
      });
      expect(err.message).toContain('answered 500');
      expect(err.message).not.toContain('database is locked');
    }
    // A fetch stops at the first failure: no request per trace.
    expect(hits.filter((h) => h.url.includes('/spans?'))).toHaveLength(1);
  });

  it('write-back reports each item failed and retryable, after one request', async () => {
    handler = (_req, res) => send(res, 502, 'text/plain', 'Bad Gateway');
    const out = await connector().writeBack([item, { ...item, metric: 'other' }]);
    expect(out).toEqual([
      {
        status: 'failed',
        retryable: true,
        code: 'PHOENIX_UNAVAILABLE',
        error: expect.stringContaining('502'),
      },
      {
        status: 'failed',
        retryable: true,
        code: 'PHOENIX_UNAVAILABLE',
        error: expect.stringContaining('502'),
      },
    ]);
    expect(hits).toHaveLength(1);
  });

  it('a 500 on the annotation post itself fails the batch retryable, nothing one by one', async () => {
    handler = (req, res) => {
      if (req.method === 'GET') return json(res, 200, { data: [], next_cursor: null });
      send(res, 500, 'text/plain', 'boom');
    };
    const out = await connector().writeBack([item, { ...item, metric: 'other' }]);
    expect(out.map((o) => o.status === 'failed' && o.retryable)).toEqual([true, true]);
    expect(hits.filter((h) => h.method === 'POST')).toHaveLength(1);
  });
});

describe('429 with Retry-After', () => {
  beforeEach(() => {
    handler = (_req, res) => {
      res.statusCode = 429;
      res.setHeader('retry-after', '7');
      res.end('slow down');
    };
  });

  it('list fails retryable with retryAfterSeconds', async () => {
    const err = await caught(connector().list(window));
    expect(err).toMatchObject({
      code: 'PHOENIX_RATE_LIMITED',
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
        code: 'PHOENIX_RATE_LIMITED',
        retryAfterSeconds: 7,
        error: expect.any(String),
      },
    ]);
  });

  it('a 503 with an HTTP-date Retry-After is retryable with the wait', async () => {
    handler = (_req, res) => {
      res.statusCode = 503;
      res.setHeader('retry-after', new Date(Date.now() + 30_000).toUTCString());
      res.end();
    };
    const err = await caught(connector().list(window));
    expect(err).toMatchObject({ code: 'PHOENIX_UNAVAILABLE', retryable: true });
    expect(err.retryAfterSeconds).toBeGreaterThan(20);
  });
});

describe('401: the API key refused', () => {
  beforeEach(() => {
    handler = (_req, res) => replay(res, 'unauthorized');
  });

  it('every operation fails not retryable, and the key is in no error', async () => {
    for (const run of [
      () => connector().check(),
      () => connector().list(window),
      () => connector().fetch([header(T.agent)]),
    ]) {
      const err = await caught(run());
      expect(err).toMatchObject({
        code: 'PHOENIX_ACCESS_DENIED',
        kind: 'permission_denied',
        retryable: false,
      });
      expect(err.message).toContain('answered 401');
      noKey(err);
    }
    const out = await connector().writeBack([item]);
    expect(out).toEqual([
      {
        status: 'failed',
        retryable: false,
        code: 'PHOENIX_ACCESS_DENIED',
        error: expect.stringContaining('401'),
      },
    ]);
    noKey(out);
    expect(hits.every((h) => h.auth === `Bearer ${KEY}`)).toBe(true);
  });

  it('no API key sends no authorization header', async () => {
    await caught(connector({ apiKey: () => undefined }).list(window));
    expect(hits[0]?.auth).toBeUndefined();
  });
});

describe('404: an unknown project', () => {
  beforeEach(() => {
    handler = (_req, res) => replay(res, 'check-unknown');
  });

  it('check, list and fetch name the project, not retryable', async () => {
    for (const run of [
      () => connector().check(),
      () => connector().list(window),
      () => connector().fetch([header(T.agent)]),
    ]) {
      const err = await caught(run());
      expect(err).toMatchObject({ code: 'PHOENIX_PROJECT_NOT_FOUND', kind: 'not_found' });
      expect(err.message).toContain(JSON.stringify(cassette.project));
    }
  });

  it('write-back fails the item, not retryable', async () => {
    const [out] = await connector().writeBack([item]);
    expect(out).toMatchObject({ status: 'failed', retryable: false });
  });

  it('a project name with "/" is refused before any request', async () => {
    const err = await caught(connector({ project: 'team/agents' }).list(window));
    expect(err).toMatchObject({ code: 'PHOENIX_PROJECT_NOT_FOUND' });
    expect(err.message).toContain('project id');
    expect(hits).toEqual([]);
  });
});

describe('other refusals and unreadable answers', () => {
  it("Phoenix's 422 names the request field only", async () => {
    handler = (_req, res) => replay(res, 'limit-too-large');
    const err = await caught(connector().list(window));
    expect(err).toMatchObject({ code: 'PHOENIX_REQUEST_REFUSED', retryable: false });
    expect(err.message).toContain('422 (request validation: query.limit)');
    expect(err.message).not.toContain('5000');
  });

  it('invalid JSON and JSON of another shape are bad responses', async () => {
    handler = (_req, res) => json(res, 200, '{"data": [{"trace_id": "ab');
    const broken = await caught(connector().list(window));
    expect(broken).toMatchObject({ code: 'PHOENIX_BAD_RESPONSE' });
    expect(broken.message).toMatch(/invalid JSON/);
    handler = (_req, res) => json(res, 200, { data: 'nope' });
    expect(await caught(connector().list(window))).toMatchObject({ code: 'PHOENIX_BAD_RESPONSE' });
    expect(await caught(connector().fetch([header(T.agent)]))).toMatchObject({
      code: 'PHOENIX_BAD_RESPONSE',
    });
  });

  it('a redirect is not followed', async () => {
    handler = (_req, res) => {
      res.statusCode = 302;
      res.setHeader('location', 'http://169.254.169.254/');
      res.end();
    };
    const err = await caught(connector().list(window));
    expect(err).toMatchObject({ code: 'PHOENIX_BAD_RESPONSE' });
    expect(err.message).toContain('302 redirect');
    expect(hits).toHaveLength(1);
  });

  it('an annotation answer with the wrong number of ids is a failure, not a guess', async () => {
    handler = (req, res) => {
      if (req.method === 'GET') return json(res, 200, { data: [], next_cursor: null });
      json(res, 200, { data: [] });
    };
    const [out] = await connector().writeBack([item]);
    expect(out).toMatchObject({ status: 'failed', retryable: false });
    expect((out as { error: string }).error).toContain('unexpected shape');
  });

  it('a score Phoenix cannot store fails alone, without a request for it', async () => {
    handler = (req, res) => {
      if (req.method === 'GET') return json(res, 200, { data: [], next_cursor: null });
      json(res, 200, { data: [{ id: 'VHJhY2VBbm5vdGF0aW9uOjk=' }] });
    };
    const out = await connector().writeBack([
      { ...item, score: { name: 'tool-errors', value: Number.NaN } },
      item,
    ]);
    expect(out).toEqual([
      {
        status: 'failed',
        retryable: false,
        code: 'PHOENIX_REQUEST_REFUSED',
        error: expect.stringContaining('not a finite number'),
      },
      { status: 'created', remoteId: 'VHJhY2VBbm5vdGF0aW9uOjk=' },
    ]);
  });
});

describe('paging that repeats traces (servers that page by row id while sorting by start time)', () => {
  const trace = (id: string, second: number) => ({
    id: `row-${id}`,
    trace_id: id.repeat(32),
    start_time: `2026-11-22T01:00:0${second}.000000+00:00`,
    end_time: `2026-11-22T01:00:0${second}.500000+00:00`,
  });
  const root = (id: string) => ({
    context: { trace_id: id.repeat(32), span_id: id.repeat(16) },
    parent_id: null,
    start_time: '2026-11-22T01:00:00.000000+00:00',
    attributes: {},
  });

  it('drops a trace an earlier page of the same query returned, and keeps the cursor opaque', async () => {
    const pages: Record<string, unknown> = {
      '': { data: [trace('a', 1), trace('b', 2), trace('b', 2)], next_cursor: 'opaque+/=1' },
      'opaque+/=1': { data: [trace('b', 2), trace('c', 3)], next_cursor: null },
    };
    handler = (req, res) => {
      const url = new URL(req.url ?? '', base);
      if (url.pathname.endsWith('/traces')) {
        return json(res, 200, pages[url.searchParams.get('cursor') ?? '']);
      }
      json(res, 200, {
        data: url.searchParams.getAll('trace_id').map((t) => root(t[0] as string)),
        next_cursor: null,
      });
    };
    const c = connector();
    const range = {
      fromMs: Date.parse('2026-11-22T01:00:00Z'),
      toMs: Date.parse('2026-11-22T01:01:00Z'),
    };
    const first = await c.list({ ...range, pageSize: 3 });
    expect(first.traces.map((h) => h.storeId[0])).toEqual(['a', 'b']);
    expect(first.nextPageToken).toBe('opaque+/=1');
    const second = await c.list({
      ...range,
      pageSize: 3,
      pageToken: first.nextPageToken as string,
    });
    expect(second.traces.map((h) => h.storeId[0])).toEqual(['c']);
    expect(second.nextPageToken).toBeUndefined();
    const lists = hits
      .filter((h) => h.url.includes('/traces?'))
      .map((h) => new URL(h.url, base).searchParams);
    expect(lists[1]?.get('cursor')).toBe('opaque+/=1');
    lists[1]?.delete('cursor');
    expect(lists[1]?.toString()).toBe(lists[0]?.toString());
    // A new query starts afresh: b is listed again.
    const again = await c.list({ ...range, pageSize: 3 });
    expect(again.traces.map((h) => h.storeId[0])).toEqual(['a', 'b']);
  });
});

describe('root spans too large to answer together', () => {
  it('are asked for in halves; a lone root over the cap still proves the trace finished', async () => {
    const ids = ['a', 'b', 'c'].map((c) => c.repeat(32));
    const root = (id: string, size: number) => ({
      context: { trace_id: id, span_id: id.slice(0, 16) },
      parent_id: null,
      start_time: '2026-11-22T01:00:00+00:00',
      attributes: { 'input.value': 'x'.repeat(size), 'touchstone.label.env': 'prod' },
    });
    handler = (req, res) => {
      const url = new URL(req.url ?? '', base);
      if (url.pathname.endsWith('/traces')) {
        return json(res, 200, {
          data: ids.map((id, i) => ({
            trace_id: id,
            start_time: `2026-11-22T01:00:0${i}+00:00`,
            end_time: `2026-11-22T01:00:0${i + 1}+00:00`,
          })),
          next_cursor: null,
        });
      }
      const asked = url.searchParams.getAll('trace_id');
      json(res, 200, {
        data: asked.map((id) => root(id, id === ids[2] ? 300_000 : 60_000)),
        next_cursor: null,
      });
    };
    const c = connector({ maxTraceBytes: 200_000 });
    const { traces } = await c.list({
      fromMs: Date.parse('2026-11-22T01:00:00Z'),
      toMs: Date.parse('2026-11-22T01:01:00Z'),
      pageSize: 10,
    });
    expect(traces.map((h) => [h.inProgress, h.resource])).toEqual([
      [false, { 'touchstone.label.env': 'prod' }],
      [false, { 'touchstone.label.env': 'prod' }],
      [false, {}],
    ]);
    const rootAsks = hits
      .filter((h) => h.url.includes('parent_id=null'))
      .map((h) => new URL(h.url, base).searchParams.getAll('trace_id').length);
    expect(rootAsks).toEqual([3, 2, 1]);
  });
});

describe('traces whose spans are missing, malformed or too large', () => {
  it('each a {missing} reason, the others read', async () => {
    const agentSpans = FETCHED.data.filter((s) => s.context.trace_id === T.agent);
    const bad = 'b'.repeat(32);
    handler = (req, res) => {
      const ids = new URL(req.url ?? '', base).searchParams.getAll('trace_id');
      const data = [
        ...agentSpans.filter(() => ids.includes(T.agent)),
        ...(ids.includes(bad)
          ? [{ context: { trace_id: bad, span_id: 'not-hex' }, name: 'x', start_time: 'soon' }]
          : []),
      ];
      json(res, 200, { data, next_cursor: null });
    };
    const fetched = await connector().fetch([header(T.agent), header(bad), header('c'.repeat(32))]);
    expect((fetched.get(T.agent) as { spans: Span[] }).spans).toHaveLength(6);
    expect(fetched.get(bad)).toEqual({
      missing: expect.stringMatching(/^no Phoenix span could be read/),
    });
    expect(fetched.get('c'.repeat(32))).toEqual({
      missing: 'Phoenix holds no spans for this trace',
    });
  });

  it('a trace over maxTraceBytes is missing; the traces batched with it are read one by one', async () => {
    const agentSpans = FETCHED.data.filter((s) => s.context.trace_id === T.agent);
    const huge = 'd'.repeat(32);
    const big = {
      context: { trace_id: huge, span_id: 'd'.repeat(16) },
      name: 'big',
      parent_id: null,
      start_time: '2026-11-22T01:00:00+00:00',
      end_time: '2026-11-22T01:00:01+00:00',
      attributes: { 'output.value': 'x'.repeat(400_000) },
    };
    handler = (req, res) => {
      const ids = new URL(req.url ?? '', base).searchParams.getAll('trace_id');
      const data = [
        ...agentSpans.filter(() => ids.includes(T.agent)),
        ...(ids.includes(huge) ? [big] : []),
      ];
      json(res, 200, { data, next_cursor: null });
    };
    const fetched = await connector({ maxTraceBytes: 200_000 }).fetch([
      header(T.agent),
      header(huge),
    ]);
    expect(fetched.get(huge)).toEqual({
      missing: 'the trace is larger than the response size cap',
    });
    expect((fetched.get(T.agent) as { spans: Span[] }).spans).toHaveLength(6);
    expect(hits.map((h) => new URL(h.url, base).searchParams.getAll('trace_id').length)).toEqual([
      2, 1, 1,
    ]);
  });

  it('a trace whose spans come in several pages is read whole', async () => {
    const agentSpans = FETCHED.data.filter((s) => s.context.trace_id === T.agent);
    handler = (req, res) => {
      const cursor = new URL(req.url ?? '', base).searchParams.get('cursor');
      const at = cursor === null ? 0 : Number(cursor);
      json(res, 200, {
        data: agentSpans.slice(at, at + 4),
        next_cursor: at + 4 < agentSpans.length ? String(at + 4) : null,
      });
    };
    const fetched = await connector().fetch([header(T.agent)]);
    expect((fetched.get(T.agent) as { spans: Span[] }).spans).toHaveLength(6);
    expect(hits).toHaveLength(2);
  });

  it('a Phoenix trace id that is not OTel hex gets a stable derived id; spans carry it', async () => {
    const odd = 'my-trace-1';
    handler = (req, res) => {
      const url = new URL(req.url ?? '', base);
      if (url.pathname.endsWith('/traces')) {
        return json(res, 200, {
          data: [
            {
              trace_id: odd,
              start_time: '2026-11-22T01:00:00+00:00',
              end_time: '2026-11-22T01:00:01+00:00',
            },
          ],
          next_cursor: null,
        });
      }
      json(res, 200, {
        data: [
          {
            context: { trace_id: odd, span_id: 'e'.repeat(16) },
            parent_id: null,
            name: 'root',
            start_time: '2026-11-22T01:00:00+00:00',
            end_time: '2026-11-22T01:00:01+00:00',
            attributes: {},
          },
        ],
        next_cursor: null,
      });
    };
    const c = connector();
    const { traces } = await c.list({
      fromMs: 0,
      toMs: Date.parse('2027-01-01T00:00:00Z'),
      pageSize: 5,
    });
    expect(traces).toHaveLength(1);
    const h = traces[0] as TraceHeader;
    expect(h.storeId).toBe(odd);
    expect(h.traceId).toMatch(/^[0-9a-f]{32}$/);
    const spans = (await c.fetch([h])).get(odd) as { spans: Span[] };
    expect(spans.spans.map((s) => s.traceId)).toEqual([h.traceId]);
  });
});

describe('requests', () => {
  it('send the bearer key on every call, keep an endpoint path prefix, encode the project', async () => {
    handler = (req, res) => {
      if ((req.url ?? '').includes('/traces?'))
        return json(res, 200, { data: [], next_cursor: null });
      json(res, 200, { data: { id: 'UHJvamVjdDox', name: 'my project' } });
    };
    let n = 0;
    const c = connector({
      endpoint: `${base}/phoenix/`,
      project: 'my project',
      apiKey: () => `k${++n}`,
    });
    await c.check();
    expect(hits).toEqual([
      { method: 'GET', url: '/phoenix/v1/projects/my%20project', auth: 'Bearer k1' },
      {
        method: 'GET',
        url: '/phoenix/v1/projects/my%20project/traces?sort=start_time&order=asc&limit=1',
        auth: 'Bearer k2',
      },
    ]);
  });

  it('clamp the page size to 1000', async () => {
    handler = (_req, res) => json(res, 200, { data: [], next_cursor: null });
    await connector().list({ fromMs: 0, toMs: 10, pageSize: 10_000 });
    expect(new URL(hits[0]?.url ?? '', base).searchParams.get('limit')).toBe('1000');
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
    [401, 'PHOENIX_ACCESS_DENIED', false],
    [403, 'PHOENIX_ACCESS_DENIED', false],
    [404, 'PHOENIX_REQUEST_REFUSED', false],
    [422, 'PHOENIX_REQUEST_REFUSED', false],
    [429, 'PHOENIX_RATE_LIMITED', true],
    [503, 'PHOENIX_UNAVAILABLE', true],
  ])('%i is %s, retryable %s', async (status, code, retryable) => {
    handler = (_req, res) => json(res, status, { detail: 'no' });
    const out = await connector().writeBack([item]);
    expect(out).toEqual([{ status: 'failed', retryable, code, error: expect.any(String) }]);
  });
});
