import { isTouchstoneError } from '../../../core/index.js';
import { type HttpClient, NetErrors } from '../../../net/index.js';
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
import { LangfuseErrors } from './error-codes.js';
import {
  type ConvertOptions,
  oldestStartMs,
  rootHeaders,
  spansOf,
  truncatedMetadataKeys,
} from './observations.js';
import { createLangfuseRest } from './rest.js';
import { writeScores } from './scores.js';
import {
  decodeToken,
  encodeToken,
  firstWindow,
  MIN_WINDOW_MS,
  shrunkWidth,
  type WindowState,
  widthAfter,
  windowEnd,
} from './windows.js';

/**
 * Langfuse (v4, or v3.133+ with the v4 preview opt-in; self-hosted or Cloud) through its public
 * API: traces are listed as their root observations (`GET /api/public/v2/observations?
 * isRootObservation=true`, one start-time window per page: windows.ts), each trace's
 * observations are read with `traceId=` (pages of 1000, cursor) and mapped to spans
 * (observations.ts), and scores are written back with `POST /api/public/scores` (scores.ts).
 *
 * Langfuse v3 servers (3.133+, with the v4 preview opt-in) serve the same route but ignore
 * `isRootObservation` (added in v4.0.0): there every observation of a window is listed and the
 * connector keeps the roots itself (observations.ts: `isRootRow`), which is correct but slower.
 *
 * A trace is running while its root observation has no end time (an EVENT root never has one
 * and is never running). Langfuse SDKs v3+ export a span when it ends, so a trace whose root has
 * not ended usually has no root observation yet and is simply not listed until it has.
 */

export interface LangfuseConnectorOptions {
  /** The server's base URL (`https://cloud.langfuse.com`, or a path prefix behind a proxy). */
  endpoint: string;
  /** The one environment to read (the source's location); every environment when absent. */
  environment?: string;
  /** The product's outbound client (outbound rules already in it). */
  http: HttpClient;
  /** `<public key>:<secret key>`, read for every request (a rotated credential applies at once). */
  credential?: () => string | undefined;
  /** Root observations per listing page when a query names none: 1 to 1000, default 100. */
  pageSize?: number;
  /** Longest string attribute kept, as for pushed traces. Default `traces.max_attribute_bytes`. */
  maxAttributeBytes?: number;
  /** A trace with more observations is reported missing. Default 10 000. */
  maxObservationsPerTrace?: number;
  /** Largest answer read for one page of observations. Default: the HTTP client's cap. */
  maxResponseBytes?: number;
}

/** Langfuse refuses a larger `limit` with 400. */
export const MAX_PAGE_SIZE = 1000;
export const DEFAULT_PAGE_SIZE = 100;
/** Observations per page when a trace is read. */
export const FETCH_PAGE_SIZE = 1000;
export const DEFAULT_MAX_OBSERVATIONS = 10_000;
/** Requests one `list` call may spend on empty or overflowing windows before it answers. */
export const MAX_REQUESTS_PER_PAGE = 16;

export const OBSERVATIONS_PATH = '/api/public/v2/observations';
const HEALTH_PATH = '/api/public/health';
/** What a root needs: ids and times (core), environment and level (basic), tags (trace_context). */
export const ROOT_FIELDS = 'core,basic,trace_context';
export const TRACE_FIELDS = 'core,basic,time,io,metadata,model,usage,prompt,trace_context';
/** Metadata keys named in one `expandMetadata` (the rest stay as served). */
const MAX_EXPANDED_KEYS = 50;

function pageSizeOf(n: number | undefined, fallback: number): number {
  if (n === undefined || !Number.isFinite(n) || n <= 0) return fallback;
  return Math.min(MAX_PAGE_SIZE, Math.max(1, Math.floor(n)));
}

function isTooLarge(err: unknown): boolean {
  return isTouchstoneError(err) && err.code === NetErrors.OUTBOUND_RESPONSE_TOO_LARGE.code;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

const VERSION = /^[0-9A-Za-z.+_-]{1,40}$/;

export function createLangfuseConnector(options: LangfuseConnectorOptions): TraceStoreConnector {
  const rest = createLangfuseRest(options);
  const defaultPageSize = pageSizeOf(options.pageSize, DEFAULT_PAGE_SIZE);
  const maxObservations = options.maxObservationsPerTrace ?? DEFAULT_MAX_OBSERVATIONS;
  const convert: ConvertOptions = {
    maxAttributeBytes: options.maxAttributeBytes ?? DEFAULT_CONNECTOR_SETTINGS.maxAttributeBytes,
  };
  const environment =
    options.environment === undefined || options.environment.trim() === ''
      ? undefined
      : options.environment.trim();
  const envFilter = environment === undefined ? {} : { environment: [environment] };
  const responseCap =
    options.maxResponseBytes === undefined ? {} : { maxResponseBytes: options.maxResponseBytes };

  /** The server's version from its health route, for messages; undefined when it does not say. */
  async function serverVersion(signal?: AbortSignal): Promise<string | undefined> {
    try {
      const answer = await rest.send({
        method: 'GET',
        path: HEALTH_PATH,
        what: 'GET health',
        anonymous: true,
        ...(signal === undefined ? {} : { signal }),
      });
      const v = isRecord(answer.json) ? answer.json.version : undefined;
      return answer.status === 200 && typeof v === 'string' && VERSION.test(v) ? v : undefined;
    } catch {
      if (signal?.aborted) throw signal.reason;
      return undefined;
    }
  }

  /** One page of `GET /api/public/v2/observations`: `data` and the next cursor. */
  async function observations(
    query: Record<string, string | readonly string[] | undefined>,
    signal?: AbortSignal,
    cap: { maxResponseBytes?: number } = {},
  ): Promise<{ rows: unknown[]; cursor?: string }> {
    const what = 'GET v2/observations';
    const answer = await rest.send({
      method: 'GET',
      path: OBSERVATIONS_PATH,
      query,
      what,
      ...cap,
      ...(signal === undefined ? {} : { signal }),
    });
    if (answer.status === 404) {
      const version = await serverVersion(signal);
      const code = answer.errorCode === undefined ? '' : ` ${answer.errorCode}`;
      throw LangfuseErrors.LANGFUSE_OBSERVATIONS_API_MISSING(
        `Langfuse at ${rest.host} does not serve GET ${OBSERVATIONS_PATH} (404${code}` +
          `${version === undefined ? '' : `; server version ${version}`}): upgrade to Langfuse ` +
          'v4, or run Langfuse v3 with LANGFUSE_MIGRATION_V4_ALLOW_PREVIEW_OPT_IN=true (3.179 or ' +
          'later; LANGFUSE_ENABLE_EVENTS_TABLE_V2_APIS=true on 3.143 to 3.178) and ' +
          'LANGFUSE_MIGRATION_V4_WRITE_MODE=dual; also check that the endpoint is the Langfuse base URL',
      );
    }
    if (answer.status < 200 || answer.status >= 300 || !isRecord(answer.json)) {
      throw rest.failure(answer, what);
    }
    const { data, meta } = answer.json;
    if (!Array.isArray(data)) throw rest.failure(answer, what);
    const cursor = isRecord(meta) && typeof meta.cursor === 'string' ? meta.cursor : '';
    return cursor === '' ? { rows: data } : { rows: data, cursor };
  }

  // ------------------------------------------------------------------------------------------
  // Listing: one window of root observations per page (windows.ts)
  // ------------------------------------------------------------------------------------------

  async function list(query: ListQuery): Promise<ListPage> {
    const fromMs = Math.ceil(query.fromMs);
    const toMs = Math.ceil(query.toMs);
    if (!(toMs > fromMs)) return { traces: [] };
    const bounds = { fromMs, toMs };
    const limit = pageSizeOf(query.pageSize, defaultPageSize);
    let state: WindowState =
      (query.pageToken === undefined || query.pageToken === ''
        ? undefined
        : decodeToken(query.pageToken, bounds)) ?? firstWindow(fromMs);
    for (let requests = 0; requests < MAX_REQUESTS_PER_PAGE; requests++) {
      query.signal?.throwIfAborted();
      const end = windowEnd(state, toMs);
      const { rows, cursor } = await observations(
        {
          isRootObservation: 'true',
          fromStartTime: iso(state.start),
          toStartTime: iso(end),
          limit: String(limit),
          fields: ROOT_FIELDS,
          ...envFilter,
          ...(state.cursor === undefined ? {} : { cursor: state.cursor }),
        },
        query.signal,
      );
      const dense = end - state.start <= MIN_WINDOW_MS;
      if (cursor !== undefined && !dense) {
        // More roots than a page: ask again with a narrower window before answering anything.
        const oldest = oldestStartMs(rows) ?? state.start;
        state = { start: state.start, width: shrunkWidth(state.start, end, oldest) };
        continue;
      }
      const traces = rootHeaders(rows).filter((h) => h.startMs >= state.start && h.startMs < end);
      let next: WindowState | undefined;
      if (cursor !== undefined) next = { start: state.start, width: state.width, cursor };
      else if (end < toMs) {
        const roots = state.cursor === undefined ? rows.length : limit;
        next = { start: end, width: widthAfter(state.width, roots, limit) };
      }
      if (traces.length > 0 || next === undefined) {
        return next === undefined
          ? { traces }
          : { traces, nextPageToken: encodeToken(bounds, next) };
      }
      state = next;
    }
    // Many empty windows: answer an empty page so the manager can renew its lease and budget.
    return { traces: [], nextPageToken: encodeToken(bounds, state) };
  }

  // ------------------------------------------------------------------------------------------
  // Observations of one trace
  // ------------------------------------------------------------------------------------------

  async function readTrace(
    traceId: string,
    expand: readonly string[],
    signal?: AbortSignal,
  ): Promise<unknown[] | FetchedTrace> {
    const rows: unknown[] = [];
    let cursor: string | undefined;
    let limit = FETCH_PAGE_SIZE;
    for (;;) {
      signal?.throwIfAborted();
      let page: { rows: unknown[]; cursor?: string };
      try {
        page = await observations(
          {
            traceId,
            fields: TRACE_FIELDS,
            limit: String(limit),
            ...(expand.length === 0 ? {} : { expandMetadata: expand.join(',') }),
            ...(cursor === undefined ? {} : { cursor }),
          },
          signal,
          responseCap,
        );
      } catch (err) {
        if (!isTooLarge(err)) throw err;
        // Fewer observations per page; one that alone is too large cannot be read.
        if (limit === 1) {
          return { missing: 'an observation of this trace is larger than the response size cap' };
        }
        limit = Math.max(1, Math.floor(limit / 10));
        continue;
      }
      rows.push(...page.rows);
      if (rows.length > maxObservations) {
        return { missing: `the trace has more than ${maxObservations} observations` };
      }
      if (page.cursor === undefined) return rows;
      cursor = page.cursor;
    }
  }

  async function fetchTrace(header: TraceHeader, signal?: AbortSignal): Promise<FetchedTrace> {
    let rows = await readTrace(header.storeId, [], signal);
    if (!Array.isArray(rows)) return rows;
    // Metadata values are served cut to 200 characters unless named: read those in full.
    const keys = truncatedMetadataKeys(rows).slice(0, MAX_EXPANDED_KEYS);
    if (keys.length > 0) {
      const full = await readTrace(header.storeId, keys, signal);
      if (Array.isArray(full)) rows = full;
    }
    return spansOf(rows, header, convert);
  }

  async function fetchTraces(
    headers: readonly TraceHeader[],
    signal?: AbortSignal,
  ): Promise<Map<string, FetchedTrace>> {
    const out = new Map<string, FetchedTrace>();
    for (const h of headers) {
      if (out.has(h.storeId)) continue;
      signal?.throwIfAborted();
      out.set(h.storeId, await fetchTrace(h, signal));
    }
    return out;
  }

  return {
    async check(signal) {
      // Credentials, the v2 observations route and the environment filter in one request.
      await observations({ limit: '1', fields: 'core', ...envFilter }, signal);
    },
    list,
    fetch: fetchTraces,
    writeBack(items: readonly WriteBackItem[], signal?: AbortSignal): Promise<WriteBackOutcome[]> {
      return writeScores(rest, items, {
        ...(environment === undefined ? {} : { environment }),
        ...(signal === undefined ? {} : { signal }),
      });
    },
  };
}
