import { createHash } from 'node:crypto';
import { isTouchstoneError } from '../../../core/index.js';
import type { HttpClient } from '../../../net/index.js';
import { NetErrors } from '../../../net/index.js';
import {
  DEFAULT_CONNECTOR_SETTINGS,
  type FetchedTrace,
  type ListPage,
  type ListQuery,
  type TraceHeader,
  type TraceStoreConnector,
  type WriteBackItem,
  type WriteBackOutcome,
} from '../../connector.js';
import { isRecord } from '../json-rest.js';
import { writeAnnotations } from './annotations.js';
import { PhoenixErrors } from './error-codes.js';
import { createPhoenixRest, type PhoenixAnswer } from './rest.js';
import { type ConvertOptions, isoToMs, msToIso, rootLabels, spansFromPhoenix } from './spans.js';

/**
 * The Arize Phoenix trace store (REST `/v1`, verified against Phoenix 20.26.1): one project per
 * source (by name or project id).
 *
 * - **List**: `GET /v1/projects/{project}/traces` with `start_time` (inclusive) and `end_time`
 *   (exclusive) on the trace start, `sort=start_time&order=asc`, `limit` = the page size, and
 *   Phoenix's `next_cursor` handed back as the page token, opaque: every page of one query is
 *   asked with the same sort, order, bounds and limit (Phoenix's keyset cursor is tied to them).
 *   Trace ids already returned by an earlier page of the same query are dropped (servers that
 *   page by row id while sorting by start time can repeat a trace).
 * - **In progress**: Phoenix has no trace state; a trace is a row made from whichever spans have
 *   arrived. The root spans of a page's traces are read in one request per 100 traces
 *   (`GET .../spans?trace_id=…&parent_id=null`): a trace without a root span is reported running
 *   (`inProgress`), and the manager defers it until its root arrives (or `maxInProgressAge`).
 * - **Labels**: `touchstone.label.<key>` on the root span (attribute, or a key of its `metadata`)
 *   become resource attributes of the header, so they reach normalization and a changed label
 *   is a changed trace version.
 * - **Fetch**: `GET .../spans?trace_id=…` for up to 20 traces a request, every page; spans are
 *   converted with their OpenInference attributes restored (spans.ts).
 * - **Write-back**: annotations (annotations.ts).
 */

export interface PhoenixConnectorOptions {
  /** The server's base URL (`http://phoenix:6006`, or with a path prefix behind a proxy). */
  endpoint: string;
  /** The project's name or id (GlobalID, `UHJvamVjdDox`). */
  project: string;
  /** The product's outbound client (outbound rules already in it). */
  http: HttpClient;
  /** The API key (bearer), read for every request (so a rotated credential is picked up). */
  apiKey?: () => string | undefined;
  /** Page size when a list query names none: 1 to 1000, default 100 (Phoenix's own default). */
  pageSize?: number;
  /** Longest string attribute kept, as for pushed traces. Default `traces.max_attribute_bytes`. */
  maxAttributeBytes?: number;
  /**
   * Largest span data read for one trace (all its pages); a larger trace is reported missing.
   * Default: the HTTP client's response cap.
   */
  maxTraceBytes?: number;
}

/** Phoenix refuses a larger `limit` with 422. */
export const MAX_PAGE_SIZE = 1000;
export const DEFAULT_PAGE_SIZE = 100;
/** Trace ids per root-span query: they travel in the query string. */
export const ROOT_QUERY_SIZE = 100;
/** Trace ids per span fetch. */
export const FETCH_BATCH_SIZE = 20;
/** Spans per page of a fetch (Phoenix's maximum). */
export const SPAN_PAGE_SIZE = 1000;
/** Spans per page when one trace's page was over the response cap. */
const SMALL_SPAN_PAGE_SIZE = 50;
/** Pages read for one span query at most (a runaway cursor must end). */
const MAX_SPAN_PAGES = 1000;

const HEX32 = /^[0-9a-f]{32}$/;

function pageSizeOf(n: number | undefined, fallback: number): number {
  if (n === undefined || !Number.isFinite(n) || n <= 0) return fallback;
  return Math.min(MAX_PAGE_SIZE, Math.max(1, Math.floor(n)));
}

function isTooLarge(err: unknown): boolean {
  return isTouchstoneError(err) && err.code === NetErrors.OUTBOUND_RESPONSE_TOO_LARGE.code;
}

/**
 * The OpenTelemetry trace id of a Phoenix trace id: itself when it is 32 hex (what OTLP ingest
 * stores), else a stable id derived from it (spans created through Phoenix's JSON API may carry
 * any string).
 */
export function otelTraceId(storeId: string): string {
  const lower = storeId.toLowerCase();
  if (HEX32.test(lower) && !/^0+$/.test(lower)) return lower;
  return createHash('sha256').update(`phoenix:${storeId}`).digest('hex').slice(0, 32);
}

/** A Phoenix answer that is the UI's HTML page: the path is not a route of this server. */
function routeMissing(answer: PhoenixAnswer): boolean {
  return (
    answer.mediaType === 'text/html' &&
    (answer.status === 200 || answer.status === 404) &&
    answer.serverVersion !== undefined
  );
}

interface Paging {
  key: string;
  seen: Set<string>;
}

export function createPhoenixConnector(options: PhoenixConnectorOptions): TraceStoreConnector {
  const rest = createPhoenixRest(options);
  const defaultPageSize = pageSizeOf(options.pageSize, DEFAULT_PAGE_SIZE);
  const convert: ConvertOptions = {
    maxAttributeBytes: options.maxAttributeBytes ?? DEFAULT_CONNECTOR_SETTINGS.maxAttributeBytes,
  };
  const project = options.project.trim();
  const projectPath = `/v1/projects/${encodeURIComponent(project)}`;
  // Trace ids returned by the pages of the query being paged (see list).
  let paging: Paging | undefined;

  function projectUsable(): void {
    if (project === '') {
      throw PhoenixErrors.PHOENIX_PROJECT_NOT_FOUND('the Phoenix source names no project');
    }
    // Phoenix decodes %2F before routing: a name with `/` can only be given as the project id.
    if (project.includes('/')) {
      throw PhoenixErrors.PHOENIX_PROJECT_NOT_FOUND(
        'a Phoenix project name containing "/" cannot be used in its REST paths; use the project id (GET /v1/projects lists it) as the location',
      );
    }
  }

  /** The error for a non-2xx answer of a project route: 404 is the project (or the route). */
  function projectFailure(answer: PhoenixAnswer, what: string): Error {
    if (answer.status === 404 && answer.mediaType === 'text/plain') {
      return PhoenixErrors.PHOENIX_PROJECT_NOT_FOUND(
        `Phoenix at ${rest.host} has no project named or numbered ${JSON.stringify(project)}`,
      );
    }
    return rest.failure(answer, what);
  }

  function traceApiMissing(answer: PhoenixAnswer): Error {
    const version = answer.serverVersion === undefined ? '' : ` (Phoenix ${answer.serverVersion})`;
    return PhoenixErrors.PHOENIX_TRACE_API_MISSING(
      `Phoenix at ${rest.host}${version} has no trace list (GET /v1/projects/{project}/traces, Phoenix 13.15 and newer)`,
    );
  }

  async function listTraces(
    query: Record<string, string>,
    signal?: AbortSignal,
  ): Promise<Record<string, unknown>> {
    const answer = await rest.send({
      method: 'GET',
      path: `${projectPath}/traces`,
      query,
      what: 'list traces',
      ...(signal === undefined ? {} : { signal }),
    });
    if (answer.status >= 200 && answer.status < 300 && isRecord(answer.json)) return answer.json;
    if (routeMissing(answer)) throw traceApiMissing(answer);
    throw projectFailure(answer, 'list traces');
  }

  /**
   * Every span a span query answers, page by page. `undefined` when one page was over the
   * response cap (or the bytes of all pages over `maxTraceBytes`).
   */
  async function allSpans(
    query: Record<string, string | readonly string[]>,
    what: string,
    limit: number,
    signal?: AbortSignal,
  ): Promise<unknown[] | undefined> {
    const out: unknown[] = [];
    let cursor: string | undefined;
    let bytes = 0;
    for (let pages = 0; pages < MAX_SPAN_PAGES; pages++) {
      let answer: PhoenixAnswer;
      try {
        answer = await rest.send({
          method: 'GET',
          path: `${projectPath}/spans`,
          query: {
            ...query,
            limit: String(limit),
            ...(cursor === undefined ? {} : { cursor }),
          },
          what,
          ...(options.maxTraceBytes === undefined
            ? {}
            : { maxResponseBytes: options.maxTraceBytes }),
          ...(signal === undefined ? {} : { signal }),
        });
      } catch (err) {
        if (isTooLarge(err)) return undefined;
        throw err;
      }
      if (
        answer.status < 200 ||
        answer.status >= 300 ||
        !isRecord(answer.json) ||
        !Array.isArray(answer.json.data)
      ) {
        throw projectFailure(answer, what);
      }
      bytes += answer.bytes;
      if (options.maxTraceBytes !== undefined && bytes > options.maxTraceBytes) return undefined;
      out.push(...answer.json.data);
      const next = answer.json.next_cursor;
      if (typeof next !== 'string' || next === '' || next === cursor) return out;
      cursor = next;
    }
    return out;
  }

  /**
   * Root spans of these traces, by Phoenix trace id (the earliest when a trace has several). A
   * root-span answer over the response cap is split; for one trace it proves the root is there,
   * though unread (`null`: no labels).
   */
  async function roots(ids: string[], signal?: AbortSignal): Promise<Map<string, unknown>> {
    const out = new Map<string, { span: unknown; start: number }>();
    async function read(chunk: string[]): Promise<void> {
      const spans = await allSpans(
        { trace_id: chunk, parent_id: 'null' },
        'list root spans',
        SPAN_PAGE_SIZE,
        signal,
      );
      if (spans === undefined) {
        if (chunk.length === 1) {
          out.set(chunk[0] as string, { span: null, start: Number.POSITIVE_INFINITY });
          return;
        }
        const half = Math.ceil(chunk.length / 2);
        await read(chunk.slice(0, half));
        await read(chunk.slice(half));
        return;
      }
      for (const s of spans) {
        if (!isRecord(s) || !isRecord(s.context) || typeof s.context.trace_id !== 'string') {
          continue;
        }
        const start = isoToMs(s.start_time) ?? Number.POSITIVE_INFINITY;
        const known = out.get(s.context.trace_id);
        if (known === undefined || start < known.start) {
          out.set(s.context.trace_id, { span: s, start });
        }
      }
    }
    for (let i = 0; i < ids.length; i += ROOT_QUERY_SIZE) {
      await read(ids.slice(i, i + ROOT_QUERY_SIZE));
    }
    return new Map([...out].map(([id, { span }]) => [id, span]));
  }

  async function list(query: ListQuery): Promise<ListPage> {
    const fromMs = Math.ceil(query.fromMs);
    const toMs = Math.ceil(query.toMs);
    if (!(toMs > fromMs)) return { traces: [] };
    projectUsable();
    const limit = pageSizeOf(query.pageSize, defaultPageSize);
    const token =
      query.pageToken === undefined || query.pageToken === '' ? undefined : query.pageToken;
    // Sort, order, bounds and limit are the same on every page of one query.
    const key = `${fromMs}:${toMs}:${limit}`;
    if (token === undefined || paging?.key !== key) paging = { key, seen: new Set() };
    const json = await listTraces(
      {
        start_time: msToIso(fromMs),
        end_time: msToIso(toMs),
        sort: 'start_time',
        order: 'asc',
        limit: String(limit),
        ...(token === undefined ? {} : { cursor: token }),
      },
      query.signal,
    );
    if (!Array.isArray(json.data))
      throw rest.failure(
        { status: 200, mediaType: 'application/json', json, bytes: 0 },
        'list traces',
      );
    const seen = paging.seen;
    const listed: { storeId: string; startMs: number; endMs?: number }[] = [];
    for (const t of json.data) {
      if (!isRecord(t) || typeof t.trace_id !== 'string' || t.trace_id === '') continue;
      const startMs = isoToMs(t.start_time);
      if (startMs === undefined || seen.has(t.trace_id)) continue;
      seen.add(t.trace_id);
      const endMs = isoToMs(t.end_time);
      listed.push({ storeId: t.trace_id, startMs, ...(endMs === undefined ? {} : { endMs }) });
    }
    const rootSpans =
      listed.length === 0
        ? new Map<string, unknown>()
        : await roots(
            listed.map((l) => l.storeId),
            query.signal,
          );
    const traces: TraceHeader[] = listed.map((l) => {
      const hasRoot = rootSpans.has(l.storeId);
      const header: TraceHeader = {
        storeId: l.storeId,
        traceId: otelTraceId(l.storeId),
        startMs: l.startMs,
        inProgress: !hasRoot,
        resource: hasRoot ? rootLabels(rootSpans.get(l.storeId)) : {},
      };
      if (hasRoot && l.endMs !== undefined) header.endMs = l.endMs;
      return header;
    });
    // The server orders them already; a stable sort keeps that promise whatever it does.
    traces.sort((a, b) => a.startMs - b.startMs);
    const page: ListPage = { traces };
    if (typeof json.next_cursor === 'string' && json.next_cursor !== '') {
      page.nextPageToken = json.next_cursor;
    } else {
      paging = undefined;
    }
    return page;
  }

  async function fetchTraces(
    headers: readonly TraceHeader[],
    signal?: AbortSignal,
  ): Promise<Map<string, FetchedTrace>> {
    projectUsable();
    const out = new Map<string, FetchedTrace>();
    const unique = new Map<string, TraceHeader>();
    for (const h of headers) if (!unique.has(h.storeId)) unique.set(h.storeId, h);
    const tooLarge: FetchedTrace = { missing: 'the trace is larger than the response size cap' };

    async function read(chunk: readonly TraceHeader[], limit: number): Promise<void> {
      signal?.throwIfAborted();
      const spans = await allSpans(
        { trace_id: chunk.map((h) => h.storeId) },
        'list spans',
        limit,
        signal,
      );
      if (spans === undefined) {
        if (chunk.length > 1) {
          for (const h of chunk) await read([h], limit);
        } else if (limit > SMALL_SPAN_PAGE_SIZE && options.maxTraceBytes === undefined) {
          // One page of 1000 spans over the cap: smaller pages may fit.
          await read(chunk, SMALL_SPAN_PAGE_SIZE);
        } else {
          out.set((chunk[0] as TraceHeader).storeId, tooLarge);
        }
        return;
      }
      const byTrace = new Map<string, unknown[]>();
      for (const s of spans) {
        const id = isRecord(s) && isRecord(s.context) ? s.context.trace_id : undefined;
        if (typeof id !== 'string') continue;
        const list = byTrace.get(id) ?? [];
        list.push(s);
        byTrace.set(id, list);
      }
      for (const h of chunk) {
        out.set(h.storeId, spansFromPhoenix(byTrace.get(h.storeId) ?? [], h, convert));
      }
    }

    const all = [...unique.values()];
    for (let i = 0; i < all.length; i += FETCH_BATCH_SIZE) {
      await read(all.slice(i, i + FETCH_BATCH_SIZE), SPAN_PAGE_SIZE);
    }
    return out;
  }

  return {
    async check(signal) {
      projectUsable();
      const s = signal === undefined ? {} : { signal };
      const answer = await rest.send({
        method: 'GET',
        path: projectPath,
        what: 'get project',
        ...s,
      });
      if (answer.status < 200 || answer.status >= 300 || !isRecord(answer.json)) {
        if (routeMissing(answer)) throw traceApiMissing(answer);
        throw projectFailure(answer, 'get project');
      }
      // The trace list must be there (older servers answer the UI's page).
      await listTraces({ sort: 'start_time', order: 'asc', limit: '1' }, signal);
    },
    list,
    fetch: fetchTraces,
    writeBack(items: readonly WriteBackItem[], signal?: AbortSignal): Promise<WriteBackOutcome[]> {
      try {
        projectUsable();
      } catch (err) {
        if (!isTouchstoneError(err)) throw err;
        const failed = { error: err.message, retryable: false, code: err.code };
        return Promise.resolve(items.map(() => ({ status: 'failed', ...failed })));
      }
      return writeAnnotations(rest, projectPath, items, signal);
    },
  };
}
