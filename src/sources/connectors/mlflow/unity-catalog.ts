import { isTouchstoneError } from '../../../core/index.js';
import type { HttpClient } from '../../../net/index.js';
import {
  DEFAULT_CONNECTOR_SETTINGS,
  type FetchedTrace,
  type ListPage,
  type ListQuery,
  type TraceHeader,
  type TraceStoreConnector,
} from '../../connector.js';
import { isRecord } from '../json-rest.js';
import { type AssessmentRoutes, UPDATE_MASK, writeAssessments } from './assessments.js';
import type { MlflowAuth } from './auth.js';
import { BATCH_GET_SIZE, DEFAULT_PAGE_SIZE, pageSizeOf } from './connector.js';
import { MlflowErrors } from './error-codes.js';
import { createMlflowRest, type MlflowRest } from './rest.js';
import { batchGetEntries, spansFromBatchGet } from './spans.js';
import { traceHeader } from './trace-info.js';

/**
 * Databricks traces in Unity Catalog schemas (`catalog.schema`), read through the v4 API with a
 * SQL warehouse: a long-running search (an operation polled until done, at most five minutes of
 * polling per pull), spans by batchGet per schema, assessments on the v4 routes (bare bodies,
 * update mask and warehouse in the query). A trace is `catalog.schema/<hex id>` in Touchstone.
 */

const CATALOG_SCHEMA = /^[^.\s/]+\.[^.\s/]+$/;

export function isCatalogSchema(location: string): boolean {
  return CATALOG_SCHEMA.test(location);
}

/** Time for polling, controllable in tests. */
export interface PollClock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

const systemPollClock: PollClock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      signal?.addEventListener('abort', () => {
        clearTimeout(t);
        resolve();
      });
    }),
};

/** Polling of one pull's searches stops after this long; the manager retries next pull. */
export const SEARCH_POLL_BUDGET_MS = 5 * 60_000;
/** Between two polls of an operation (the Databricks web UI's own pace). */
export const SEARCH_POLL_INTERVAL_MS = 2_000;
/** Poll failures in a row tolerated before the search fails (as the web UI does). */
const POLL_FAILURES_TOLERATED = 3;

const V4 = '/api/4.0/mlflow/traces';

export interface UnityCatalogOptions {
  endpoint: string;
  locations: readonly string[];
  sqlWarehouseId: string;
  http: HttpClient;
  auth: MlflowAuth;
  pageSize?: number;
  maxAttributeBytes?: number;
  clock?: PollClock;
}

/** `trace:/main.agents/<hex>` (or a bare id) → its schema and hex id. */
function splitTraceId(storeId: string, fallback?: string): { location: string; id: string } {
  const m = /^trace:\/([^/]+)\/([^/]+)$/.exec(storeId);
  if (m !== null) return { location: m[1] as string, id: m[2] as string };
  return { location: fallback ?? '', id: storeId };
}

function schemaLocation(location: string) {
  const [catalog_name, schema_name] = location.split('.');
  return { type: 'UC_SCHEMA', uc_schema: { catalog_name, schema_name } };
}

function assessmentRoutes(warehouse: string): AssessmentRoutes {
  const base = (storeId: string) => {
    const { location, id } = splitTraceId(storeId);
    return `${V4}/${encodeURIComponent(location)}/${encodeURIComponent(id)}`;
  };
  return {
    info: (storeId) => ({
      method: 'GET',
      path: `${base(storeId)}/info`,
      query: { sql_warehouse_id: warehouse },
    }),
    create: (storeId, assessment) => ({
      method: 'POST',
      path: `${base(storeId)}/assessments`,
      query: { sql_warehouse_id: warehouse },
      body: assessment,
    }),
    update: (storeId, assessmentId, patch) => ({
      method: 'PATCH',
      path: `${base(storeId)}/assessments/${encodeURIComponent(assessmentId)}`,
      query: { sql_warehouse_id: warehouse, update_mask: UPDATE_MASK },
      body: patch,
    }),
    assessmentOf: (body) => body,
  };
}

export function createUnityCatalogConnector(options: UnityCatalogOptions): TraceStoreConnector {
  const rest: MlflowRest = createMlflowRest({
    endpoint: options.endpoint,
    http: options.http,
    auth: options.auth,
    product: 'Databricks',
  });
  const clock = options.clock ?? systemPollClock;
  const warehouse = options.sqlWarehouseId;
  const schemas = [...new Set(options.locations.map((l) => l.trim()))].filter(isCatalogSchema);
  const defaultPageSize = pageSizeOf(options.pageSize, DEFAULT_PAGE_SIZE);
  const convert = {
    maxAttributeBytes: options.maxAttributeBytes ?? DEFAULT_CONNECTOR_SETTINGS.maxAttributeBytes,
  };
  const routes = assessmentRoutes(warehouse);
  // The polling budget of this connector, which the manager builds for one pull.
  let pollingSince: number | undefined;

  /** An operation's result: its response when done, or undefined while it runs. */
  function settled(op: Record<string, unknown>): Record<string, unknown> | undefined {
    if (isRecord(op.error)) {
      const code = typeof op.error.error_code === 'string' ? ` ${op.error.error_code}` : '';
      throw MlflowErrors.MLFLOW_REQUEST_REFUSED(
        `Databricks at ${rest.host} (traces/search-long-running) failed the search${code}`,
      );
    }
    if (op.done === true) return isRecord(op.response) ? op.response : {};
    // No name: no trace tables resolved for the schemas, so nothing to find.
    if (typeof op.name !== 'string' || op.name === '') return {};
    return undefined;
  }

  async function search(body: Record<string, unknown>, signal?: AbortSignal) {
    const s = signal === undefined ? {} : { signal };
    let op = await rest.expectOk({
      method: 'POST',
      path: `${V4}/search-long-running`,
      body,
      what: 'traces/search-long-running',
      ...s,
    });
    const name = op.name;
    pollingSince ??= clock.now();
    let failures = 0;
    for (;;) {
      const result = settled(op);
      if (result !== undefined) return result;
      if (clock.now() - pollingSince >= SEARCH_POLL_BUDGET_MS) {
        throw MlflowErrors.MLFLOW_SEARCH_TIMEOUT(
          `Databricks at ${rest.host} did not finish the catalog-schema search within ${SEARCH_POLL_BUDGET_MS / 60_000} minutes; it is retried at the next pull`,
        );
      }
      await clock.sleep(SEARCH_POLL_INTERVAL_MS, signal);
      signal?.throwIfAborted();
      try {
        const next = await rest.expectOk({
          method: 'GET',
          path: `${V4}/search/operations/${encodeURIComponent(String(name))}`,
          what: 'traces/search/operations',
          ...s,
        });
        // A poll answer may leave out the name it was asked for.
        op = { name, ...next };
        failures = 0;
      } catch (err) {
        if (!isTouchstoneError(err) || !err.retryable || ++failures >= POLL_FAILURES_TOLERATED) {
          throw err;
        }
      }
    }
  }

  function header(info: unknown, location: string): TraceHeader | undefined {
    const h = traceHeader(info);
    if (h === undefined) return undefined;
    const { location: own, id } = splitTraceId(h.storeId, location);
    return { ...h, traceId: `${own}/${id.toLowerCase()}` };
  }

  async function list(query: ListQuery): Promise<ListPage> {
    const fromMs = Math.ceil(query.fromMs);
    const toMs = Math.ceil(query.toMs);
    if (!(toMs > fromMs)) return { traces: [] };
    const size = pageSizeOf(query.pageSize, defaultPageSize);
    const json = await search(
      {
        locations: schemas.map(schemaLocation),
        filter: `trace.timestamp_ms >= ${fromMs} AND trace.timestamp_ms < ${toMs}`,
        max_results: size,
        order_by: ['timestamp_ms ASC'],
        sql_warehouse_id: warehouse,
        ...(query.pageToken === undefined || query.pageToken === ''
          ? {}
          : { page_token: query.pageToken }),
      },
      query.signal,
    );
    const infos = Array.isArray(json.trace_infos) ? json.trace_infos : [];
    const traces: TraceHeader[] = [];
    for (const info of infos) {
      const h = header(info, schemas[0] ?? '');
      if (h !== undefined) traces.push(h);
    }
    traces.sort((a, b) => a.startMs - b.startMs);
    const page: ListPage = { traces };
    // The long-running search gives a token even with its last, short page.
    if (
      infos.length >= size &&
      typeof json.next_page_token === 'string' &&
      json.next_page_token !== ''
    ) {
      page.nextPageToken = json.next_page_token;
    }
    return page;
  }

  async function fetchTraces(
    headers: readonly TraceHeader[],
    signal?: AbortSignal,
  ): Promise<Map<string, FetchedTrace>> {
    const out = new Map<string, FetchedTrace>();
    const bySchema = new Map<string, TraceHeader[]>();
    for (const h of headers) {
      const { location } = splitTraceId(h.storeId, schemas[0]);
      bySchema.set(location, [...(bySchema.get(location) ?? []), h]);
    }
    for (const [location, list] of bySchema) {
      for (let i = 0; i < list.length; i += BATCH_GET_SIZE) {
        signal?.throwIfAborted();
        const chunk = list.slice(i, i + BATCH_GET_SIZE);
        const json = await rest.expectOk({
          method: 'GET',
          path: `${V4}/${encodeURIComponent(location)}/batchGet`,
          query: {
            trace_ids: chunk.map((h) => splitTraceId(h.storeId).id),
            sql_warehouse_id: warehouse,
          },
          what: 'traces/batchGet',
          ...(signal === undefined ? {} : { signal }),
        });
        const entries = batchGetEntries(json);
        for (const h of chunk) {
          const entry = entries.get(h.storeId);
          out.set(
            h.storeId,
            entry === undefined
              ? { missing: 'Databricks batchGet returned no spans for this trace' }
              : spansFromBatchGet(entry, h, convert),
          );
        }
      }
    }
    return out;
  }

  return {
    async check(signal) {
      if (warehouse === '') {
        throw MlflowErrors.MLFLOW_REQUEST_REFUSED(
          'catalog-schema locations need auth.databricks.sqlWarehouseId',
        );
      }
      await search(
        {
          locations: schemas.map(schemaLocation),
          max_results: 1,
          sql_warehouse_id: warehouse,
        },
        signal,
      );
    },
    list,
    fetch: fetchTraces,
    writeBack: (items, signal) => writeAssessments(rest, items, signal, routes),
  };
}
