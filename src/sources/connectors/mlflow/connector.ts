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
import { writeAssessments } from './assessments.js';
import { bearerAuth, type MlflowAuth } from './auth.js';
import { MlflowErrors } from './error-codes.js';
import { createMlflowRest, type MlflowAnswer, type MlflowRest } from './rest.js';
import {
  batchGetEntries,
  type ConvertOptions,
  spansFromArtifact,
  spansFromBatchGet,
} from './spans.js';
import { spansLocation, traceHeader } from './trace-info.js';

/**
 * The open-source MLflow (3.x) trace store: experiments by name or id, traces listed with the v3
 * search (ascending start time, offset page tokens passed through), spans by batchGet with the
 * trace artifact as fallback, scores written back as feedback assessments.
 */

export interface MlflowConnectorOptions {
  /** The server's base URL (`http://mlflow:5000`, or with a path prefix behind a proxy). */
  endpoint: string;
  /** Experiment names or ids. An all-digit entry is tried as an id first, then as a name. */
  locations: readonly string[];
  /** The product's outbound client (outbound rules already in it). */
  http: HttpClient;
  /** The bearer token, read for every request (so a rotated credential is picked up). */
  token?: () => string | undefined;
  /** How requests are authorized, instead of `token` (a service principal, a signature). */
  auth?: MlflowAuth;
  /** Names the store in messages; `MLflow` by default. */
  product?: string;
  /**
   * Reads the spans of a trace whose spans batchGet does not serve; MLflow's trace artifact
   * route by default. With it, batchGet is not used at all.
   */
  artifacts?: ArtifactReader;
  /** Page size when a list query names none: 1 to 500, default 100 (MLflow's own default). */
  pageSize?: number;
  /** Longest string attribute kept, as for pushed traces. Default `traces.max_attribute_bytes`. */
  maxAttributeBytes?: number;
  /**
   * Largest span answer read for one trace; a larger trace is reported missing. Default: the
   * HTTP client's response cap.
   */
  maxTraceBytes?: number;
}

/** MLflow rejects a larger `max_results` with 400. */
export const MAX_PAGE_SIZE = 500;
export const DEFAULT_PAGE_SIZE = 100;
/** Trace ids per batchGet: they travel in the query string, and answers stay small. */
export const BATCH_GET_SIZE = 10;
/** batchGet requests in flight at once during one fetch. */
const FETCH_CONCURRENCY = 4;

const SEARCH_PATH = '/api/3.0/mlflow/traces/search';
const BATCH_GET_PATH = '/api/3.0/mlflow/traces/batchGet';
const ARTIFACT_PATH = '/ajax-api/2.0/mlflow/get-trace-artifact';

/** A page size within what MLflow accepts; `fallback` when none is given. */
export function pageSizeOf(n: number | undefined, fallback: number): number {
  if (n === undefined || !Number.isFinite(n) || n <= 0) return fallback;
  return Math.min(MAX_PAGE_SIZE, Math.max(1, Math.floor(n)));
}

function isTooLarge(err: unknown): boolean {
  return isTouchstoneError(err) && err.code === NetErrors.OUTBOUND_RESPONSE_TOO_LARGE.code;
}

function ok(answer: MlflowAnswer): answer is MlflowAnswer & { json: Record<string, unknown> } {
  return answer.status >= 200 && answer.status < 300 && isRecord(answer.json);
}

/** A 404 that is not an MLflow error body: the route does not exist on this server. */
function routeMissing(answer: MlflowAnswer): boolean {
  return answer.status === 404 && answer.errorCode === undefined;
}

/** Reads one trace's spans from where the store keeps them outside its tracking store. */
export type ArtifactReader = (
  rest: MlflowRest,
  header: TraceHeader,
  convert: ConvertOptions,
  signal?: AbortSignal,
) => Promise<FetchedTrace>;

export function createMlflowConnector(options: MlflowConnectorOptions): TraceStoreConnector {
  const rest = createMlflowRest({
    endpoint: options.endpoint,
    http: options.http,
    auth: options.auth ?? bearerAuth(options.token ?? (() => undefined)),
    ...(options.product === undefined ? {} : { product: options.product }),
  });
  const defaultPageSize = pageSizeOf(options.pageSize, DEFAULT_PAGE_SIZE);
  const convert: ConvertOptions = {
    maxAttributeBytes: options.maxAttributeBytes ?? DEFAULT_CONNECTOR_SETTINGS.maxAttributeBytes,
  };
  const spanBytes =
    options.maxTraceBytes === undefined ? {} : { maxResponseBytes: options.maxTraceBytes };
  const locations = [...new Set(options.locations.map((l) => l.trim()).filter((l) => l !== ''))];
  let experimentIds: Promise<string[]> | undefined;
  // Cleared when the server turns out not to serve batchGet (an older 3.x): artifacts only.
  let batchGetServed = options.artifacts === undefined;

  // ------------------------------------------------------------------------------------------
  // Experiments
  // ------------------------------------------------------------------------------------------

  function activeExperimentId(body: Record<string, unknown>, location: string): string {
    const e = body.experiment;
    if (!isRecord(e) || typeof e.experiment_id !== 'string') {
      throw rest.failure(
        { status: 200, mediaType: 'application/json', json: body },
        'experiments/get',
      );
    }
    if (e.lifecycle_stage === 'deleted') {
      throw MlflowErrors.MLFLOW_EXPERIMENT_NOT_FOUND(
        `MLflow experiment ${JSON.stringify(location)} is deleted`,
      );
    }
    return e.experiment_id;
  }

  async function resolveOne(location: string, signal?: AbortSignal): Promise<string> {
    const s = signal === undefined ? {} : { signal };
    if (/^\d+$/.test(location)) {
      const byId = await rest.send({
        method: 'GET',
        path: '/api/2.0/mlflow/experiments/get',
        query: { experiment_id: location },
        what: 'experiments/get',
        ...s,
      });
      if (ok(byId)) return activeExperimentId(byId.json, location);
      if (byId.status !== 404 || byId.errorCode === undefined) {
        throw rest.failure(byId, 'experiments/get');
      }
      // No experiment with that id: perhaps a name made of digits.
    }
    const byName = await rest.send({
      method: 'GET',
      path: '/api/2.0/mlflow/experiments/get-by-name',
      query: { experiment_name: location },
      what: 'experiments/get-by-name',
      ...s,
    });
    if (ok(byName)) return activeExperimentId(byName.json, location);
    if (byName.status === 404 && byName.errorCode === 'RESOURCE_DOES_NOT_EXIST') {
      throw MlflowErrors.MLFLOW_EXPERIMENT_NOT_FOUND(
        `MLflow at ${rest.host} has no experiment named or numbered ${JSON.stringify(location)}`,
      );
    }
    throw rest.failure(byName, 'experiments/get-by-name');
  }

  function resolve(signal?: AbortSignal): Promise<string[]> {
    if (experimentIds === undefined) {
      if (locations.length === 0) {
        return Promise.reject(
          MlflowErrors.MLFLOW_EXPERIMENT_NOT_FOUND('the MLflow source names no experiment'),
        );
      }
      const pending = (async () => {
        const ids: string[] = [];
        for (const l of locations) ids.push(await resolveOne(l, signal));
        return [...new Set(ids)];
      })();
      experimentIds = pending;
      // Only a success is kept: a failed resolution is tried again next time.
      pending.catch(() => {
        if (experimentIds === pending) experimentIds = undefined;
      });
    }
    return experimentIds;
  }

  // ------------------------------------------------------------------------------------------
  // Listing
  // ------------------------------------------------------------------------------------------

  async function search(
    ids: string[],
    body: Record<string, unknown>,
    signal?: AbortSignal,
  ): Promise<Record<string, unknown>> {
    const answer = await rest.send({
      method: 'POST',
      path: SEARCH_PATH,
      body: {
        locations: ids.map((id) => ({
          type: 'MLFLOW_EXPERIMENT',
          mlflow_experiment: { experiment_id: id },
        })),
        ...body,
      },
      what: 'traces/search',
      ...(signal === undefined ? {} : { signal }),
    });
    if (ok(answer)) return answer.json;
    if (routeMissing(answer)) {
      throw MlflowErrors.MLFLOW_TRACE_API_MISSING(
        `MLflow at ${rest.host} has no v3 trace search (404); MLflow 3.x is required`,
      );
    }
    throw rest.failure(answer, 'traces/search');
  }

  async function list(query: ListQuery): Promise<ListPage> {
    const fromMs = Math.ceil(query.fromMs);
    const toMs = Math.ceil(query.toMs);
    if (!(toMs > fromMs)) return { traces: [] };
    const ids = await resolve(query.signal);
    const json = await search(
      ids,
      {
        filter: `trace.timestamp_ms >= ${fromMs} AND trace.timestamp_ms < ${toMs}`,
        max_results: pageSizeOf(query.pageSize, defaultPageSize),
        order_by: ['timestamp_ms ASC'],
        ...(query.pageToken === undefined || query.pageToken === ''
          ? {}
          : { page_token: query.pageToken }),
      },
      query.signal,
    );
    // No match is `{}`: no `traces` key at all.
    const hits = Array.isArray(json.traces) ? json.traces : [];
    const traces: TraceHeader[] = [];
    for (const hit of hits) {
      const header = traceHeader(hit);
      if (header !== undefined) traces.push(header);
    }
    // The server orders them already; a stable sort keeps that promise whatever it does.
    traces.sort((a, b) => a.startMs - b.startMs);
    const page: ListPage = { traces };
    if (typeof json.next_page_token === 'string' && json.next_page_token !== '') {
      page.nextPageToken = json.next_page_token;
    }
    return page;
  }

  // ------------------------------------------------------------------------------------------
  // Spans
  // ------------------------------------------------------------------------------------------

  async function fetchTraces(
    headers: readonly TraceHeader[],
    signal?: AbortSignal,
  ): Promise<Map<string, FetchedTrace>> {
    const out = new Map<string, FetchedTrace>();
    const s = signal === undefined ? {} : { signal };

    const tooLarge = (): FetchedTrace => ({
      missing: 'the trace is larger than the response size cap',
    });

    async function fromArtifact(header: TraceHeader): Promise<void> {
      if (options.artifacts !== undefined) {
        out.set(header.storeId, await options.artifacts(rest, header, convert, signal));
        return;
      }
      let answer: MlflowAnswer;
      try {
        answer = await rest.send({
          method: 'GET',
          path: ARTIFACT_PATH,
          query: { request_id: header.storeId },
          what: 'get-trace-artifact',
          ...spanBytes,
          ...s,
        });
      } catch (err) {
        if (!isTooLarge(err)) throw err;
        out.set(header.storeId, tooLarge());
        return;
      }
      if (answer.status >= 200 && answer.status < 300) {
        if (answer.json !== undefined) {
          out.set(header.storeId, spansFromArtifact(answer.json, header, convert));
        } else if (answer.parseError !== undefined) {
          out.set(header.storeId, { missing: 'the MLflow trace artifact is not valid JSON' });
        } else {
          throw rest.failure(answer, 'get-trace-artifact');
        }
        return;
      }
      if (answer.status === 404) {
        out.set(header.storeId, {
          missing: routeMissing(answer)
            ? 'MLflow serves no spans for this trace (no batchGet entry, no trace artifact route)'
            : `MLflow has no span data for this trace (${answer.errorCode})`,
        });
        return;
      }
      if (answer.status === 400) {
        out.set(header.storeId, {
          missing: `MLflow refused to read this trace's spans (${answer.errorCode ?? '400'})`,
        });
        return;
      }
      throw rest.failure(answer, 'get-trace-artifact');
    }

    async function fromBatchGet(chunk: readonly TraceHeader[]): Promise<void> {
      if (!batchGetServed) {
        for (const h of chunk) await fromArtifact(h);
        return;
      }
      let answer: MlflowAnswer;
      try {
        answer = await rest.send({
          method: 'GET',
          path: BATCH_GET_PATH,
          query: { trace_ids: chunk.map((h) => h.storeId) },
          what: 'traces/batchGet',
          ...spanBytes,
          ...s,
        });
      } catch (err) {
        if (!isTooLarge(err)) throw err;
        if (chunk.length === 1) out.set((chunk[0] as TraceHeader).storeId, tooLarge());
        else for (const h of chunk) await fromBatchGet([h]);
        return;
      }
      if (ok(answer)) {
        const entries = batchGetEntries(answer.json);
        for (const h of chunk) {
          const entry = entries.get(h.storeId);
          // Left out (spans not in the tracking store, or not complete): the artifact has them.
          if (entry === undefined) await fromArtifact(h);
          else out.set(h.storeId, spansFromBatchGet(entry, h, convert));
        }
        return;
      }
      if (routeMissing(answer)) {
        batchGetServed = false;
        for (const h of chunk) await fromArtifact(h);
        return;
      }
      // MLflow's own 500 for the whole batch when one trace's spans are not in the tracking
      // store ("Trace data not stored in tracking store", 3.17): find it one by one. A bare 5xx
      // from a proxy is an outage, thrown at once.
      if (answer.status === 500 && answer.errorCode !== undefined) {
        if (chunk.length > 1) for (const h of chunk) await fromBatchGet([h]);
        else await fromArtifact(chunk[0] as TraceHeader);
        return;
      }
      throw rest.failure(answer, 'traces/batchGet');
    }

    const unique = new Map<string, TraceHeader>();
    for (const h of headers) if (!unique.has(h.storeId)) unique.set(h.storeId, h);
    const batched: TraceHeader[] = [];
    // A few requests at once: one at a time leaves the store (and the pull) mostly waiting.
    const tasks: (() => Promise<void>)[] = [];
    for (const h of unique.values()) {
      signal?.throwIfAborted();
      // Only the tracking store serves batchGet; elsewhere (artifact or archive store, or an
      // older trace that does not say) the artifact route reads them. Downloads from a store's
      // own storage (Databricks) run beside each other too.
      if (batchGetServed && spansLocation(h) === 'TRACKING_STORE') batched.push(h);
      else if (options.artifacts !== undefined) tasks.push(() => fromArtifact(h));
      else await fromArtifact(h);
    }
    for (let i = 0; i < batched.length; i += BATCH_GET_SIZE) {
      const chunk = batched.slice(i, i + BATCH_GET_SIZE);
      tasks.push(() => fromBatchGet(chunk));
    }
    let next = 0;
    const worker = async () => {
      while (next < tasks.length) {
        signal?.throwIfAborted();
        await (tasks[next++] as () => Promise<void>)();
      }
    };
    await Promise.all(Array.from({ length: Math.min(FETCH_CONCURRENCY, tasks.length) }, worker));
    return out;
  }

  return {
    async check(signal) {
      experimentIds = undefined;
      const ids = await resolve(signal);
      // The v3 trace API must be there (a 2.x server answers 404).
      await search(ids, { max_results: 1 }, signal);
    },
    list,
    fetch: fetchTraces,
    writeBack(items: readonly WriteBackItem[], signal?: AbortSignal): Promise<WriteBackOutcome[]> {
      return writeAssessments(rest, items, signal);
    },
  };
}
