import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { HttpClient, HttpRequest, HttpResponse } from '../../../net/index.js';
import { NetErrors, parseRetryAfter } from '../../../net/index.js';

/**
 * Replays the Phoenix exchanges recorded from a live server (testdata/, made by
 * test/interop/phoenix/record.ts) as an HttpClient: a request must match a recorded one exactly
 * (method, path and query, body), so the tests also prove the connector sends what Phoenix was
 * sent when the answers were recorded.
 */

export interface Exchange {
  group: string;
  method: string;
  url: string;
  requestBody?: string;
  status: number;
  headers: Record<string, string>;
  bodyFile: string;
}

export interface Cassette {
  phoenixVersion: string;
  project: string;
  window: { fromMs: number; toMs: number };
  traces: {
    project: string;
    agent: string;
    langgraph: string;
    questions: string[];
    open: { trace_id: string; span_id: string; start_ns: string };
  };
  exchanges: Exchange[];
}

export const ENDPOINT = 'http://phoenix.test:6006';
const DIR = join(import.meta.dirname, 'testdata');

export function loadCassette(): Cassette {
  return JSON.parse(readFileSync(join(DIR, 'cassette.json'), 'utf8')) as Cassette;
}

export function recordedBody(exchange: Exchange): Buffer {
  return readFileSync(join(DIR, exchange.bodyFile));
}

export function exchangesOf(cassette: Cassette, group: string): Exchange[] {
  return cassette.exchanges.filter((e) => e.group === group);
}

export function responseOf(exchange: Exchange): HttpResponse {
  const res: HttpResponse = {
    status: exchange.status,
    headers: { ...exchange.headers },
    body: recordedBody(exchange),
  };
  const retry = parseRetryAfter(exchange.headers['retry-after'], 0);
  if (retry !== undefined) res.retryAfterSeconds = retry;
  return res;
}

export interface ReplayClient extends HttpClient {
  /** Requests seen, as `METHOD path?query`. */
  readonly seen: string[];
  /** The request bodies seen, parsed, in order. */
  readonly bodies: unknown[];
  /** The authorization headers seen, in order. */
  readonly auth: (string | undefined)[];
  /** Recorded exchanges of the groups that were never asked for. */
  unused(): Exchange[];
}

/** An HttpClient that answers from the recorded exchanges of `groups`, each used once. */
export function replayClient(cassette: Cassette, groups: readonly string[]): ReplayClient {
  const pending = cassette.exchanges.filter((e) => groups.includes(e.group));
  const used = new Set<Exchange>();
  const seen: string[] = [];
  const bodies: unknown[] = [];
  const auth: (string | undefined)[] = [];
  return {
    seen,
    bodies,
    auth,
    async request(req: HttpRequest): Promise<HttpResponse> {
      req.signal?.throwIfAborted();
      const url = new URL(req.url);
      const path = `${url.pathname}${url.search}`;
      const body = req.body === undefined ? undefined : String(req.body);
      seen.push(`${req.method} ${path}`);
      auth.push(req.headers?.authorization);
      if (body !== undefined) bodies.push(JSON.parse(body));
      const match = pending.find(
        (e) => !used.has(e) && e.method === req.method && e.url === path && e.requestBody === body,
      );
      if (match === undefined) {
        throw new Error(`no recorded exchange for ${req.method} ${path} ${body ?? ''}`);
      }
      used.add(match);
      const res = responseOf(match);
      if (req.maxResponseBytes !== undefined && res.body.length > req.maxResponseBytes) {
        throw NetErrors.OUTBOUND_RESPONSE_TOO_LARGE('recorded answer over the cap');
      }
      return res;
    },
    async close() {},
    unused: () => pending.filter((e) => !used.has(e)),
  };
}
