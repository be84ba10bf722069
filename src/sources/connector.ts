import type { z } from 'zod';
import type { Attributes, Score, Span } from '../core/index.js';
import type { HttpClient } from '../net/index.js';

/**
 * The connector contract. A connector only talks to one kind of store: it lists traces by start
 * time, fetches their spans, and writes scores back. Everything else — watermark, leases, deferral,
 * digests, rate caps, backoff, status, storing and queueing — is the source manager's, the same for
 * every store. Connectors make every call through the HttpClient they are given (the outbound
 * guard is already in it) and throw TouchstoneErrors: `retryable` ones (429/503/5xx/network, with
 * `retryAfterSeconds` when the store sent one) are backed off by the manager.
 */

/** A trace as the store lists it (no spans). */
export interface TraceHeader {
  /** The store's own id (`tr-6a1f…` on MLflow); what fetch and write-back take. */
  storeId: string;
  /** The OpenTelemetry trace id, 32 lowercase hex: the id the trace gets in Touchstone. */
  traceId: string;
  /** Epoch ms the trace started (what the list is ordered and filtered by). */
  startMs: number;
  /** Epoch ms it ended, when the store says. */
  endMs?: number;
  /** The store reports it as still running. */
  inProgress: boolean;
  /**
   * Trace-level attributes that are not on any span (MLflow tags and metadata as
   * `mlflow.tag.<key>` / `mlflow.metadata.<key>`): added to the resource of every span.
   */
  resource: Attributes;
}

export interface ListQuery {
  /** Inclusive lower bound on the start time, epoch ms. */
  fromMs: number;
  /** Exclusive upper bound on the start time, epoch ms. */
  toMs: number;
  pageSize: number;
  /** From the previous page of the same query. */
  pageToken?: string;
  signal?: AbortSignal;
}

export interface ListPage {
  /** Ascending by start time. */
  traces: TraceHeader[];
  nextPageToken?: string;
}

/** Spans of one fetched trace, or why it could not be read (the manager skips it with the reason). */
export type FetchedTrace = { spans: Span[] } | { missing: string };

/** One metric of one policy's results on one trace, to write back. */
export interface WriteBackItem {
  storeId: string;
  traceId: string;
  policy: string;
  /** Metric name (`tool-errors`, `helpfulness.passed`). */
  metric: string;
  score: Score;
  /** Whether the evaluator behind it asks a judge model (MLflow: source type LLM_JUDGE vs CODE). */
  judge: boolean;
  /**
   * The principal of the person whose annotation this is (MLflow source type HUMAN, Phoenix
   * annotator kind HUMAN, Langfuse source ANNOTATION); absent for a policy's scores. `policy` is
   * then `@human/<principal>`, so each person's score is a remote score of its own.
   */
  annotator?: string;
  /** The id the store gave this (trace, policy, metric) last time, when the ledger has it. */
  remoteId?: string;
}

/**
 * A failed item: `retryable` ones (429, 5xx, timeouts, network) are retried with backoff, after
 * `retryAfterSeconds` when the store sent it; the others (401, 403, the trace gone, a refused
 * value) would fail the same way again, so the writer dead-letters them after this one attempt.
 * `code` is the catalogue code of the error behind it (`MLFLOW_ACCESS_DENIED`). `traceMissing`
 * says the store does not hold the trace (its own 404 on it): for a source's trace it is gone,
 * while a sink's pushed trace may not have reached the store yet (the writer waits for it).
 */
export type WriteBackOutcome =
  | { status: 'created' | 'updated'; remoteId: string }
  | {
      status: 'failed';
      error: string;
      retryable: boolean;
      code: string;
      retryAfterSeconds?: number;
      traceMissing?: true;
    };

export interface TraceStoreConnector {
  /** Checks the endpoint and locations (resolves experiment names, …); throws a clear error. */
  check(signal?: AbortSignal): Promise<void>;
  list(query: ListQuery): Promise<ListPage>;
  /** Full spans of these traces, in our span model, keyed by `storeId`. */
  fetch(headers: readonly TraceHeader[], signal?: AbortSignal): Promise<Map<string, FetchedTrace>>;
  /**
   * Writes each item: creates the remote score, or updates the one at `remoteId`; when there is no
   * `remoteId` it first looks for an existing one with the same name and source (a lost ledger
   * must not make duplicates).
   */
  writeBack(items: readonly WriteBackItem[], signal?: AbortSignal): Promise<WriteBackOutcome[]>;
}

/**
 * What a connector can do, declared by its manifest and asked by the code that needs it instead
 * of a connector's name: `write-back` lets a source enable `writeBack`; `long-running-search`
 * says a list may start a search the store runs on its own time (Databricks catalog schemas).
 * Every connector lists and fetches: a source reads traces.
 */
export const CAPABILITIES = ['list', 'fetch', 'write-back', 'long-running-search'] as const;
export type Capability = (typeof CAPABILITIES)[number];

/** The part of a source's spec a connector reads, as the source's schema parsed it. */
export interface SourceConnection {
  connector: string;
  variant?: string | undefined;
  endpoint: string;
  locations: readonly string[];
  auth?: Readonly<Record<string, unknown>> | undefined;
}

/** Server settings a connector is built with, passed in by the composition root. */
export interface ConnectorSettings {
  /** Longest string attribute kept, as for pushed traces (`traces.max_attribute_bytes`). */
  maxAttributeBytes: number;
  /** Page size when a list query names none; the connector's own default when absent. */
  pageSize?: number;
}

/**
 * Settings of a connector built without any (tests, tools). The server always passes its own;
 * a test keeps this equal to the `traces.max_attribute_bytes` default.
 */
export const DEFAULT_CONNECTOR_SETTINGS: ConnectorSettings = { maxAttributeBytes: 64 * 1024 };

export interface ConnectorContext {
  /** The guarded outbound client. */
  http: HttpClient;
  /** The credential's value (bearer token, API key…), resolved at each build (rotation). */
  credential?: string;
  settings: ConnectorSettings;
}

/** A connector's declaration of itself: what it is, can do and accepts. */
export interface ConnectorManifest<C extends z.ZodType = z.ZodType> {
  /** `spec.connector`, e.g. `mlflow`. */
  type: string;
  /** `spec.variant`; absent for the store's own open-source flavour. */
  variant?: string;
  description: string;
  capabilities: readonly Capability[];
  /**
   * Validates the connection part of the spec for this connector and gives the config `create`
   * takes; its issues are reported under `spec.` with their paths.
   */
  config: C;
  /**
   * `spec.auth.<key>` this declaration owns, with its schema (the source's schema is strict: a
   * key nobody declares is an unknown field).
   */
  auth?: { key: string; schema: z.ZodType };
  /**
   * Rules with an outcome of their own (a refusal code, not SOURCE_INVALID): throw it. Runs
   * before `config`.
   */
  rules?(spec: SourceConnection): void;
  /** Page sizes: the default when a query names none and the largest the store accepts. */
  defaults: { pageSize: number; maxPageSize: number };
}

/**
 * A connector type (or variant) as one declaration: its manifest and how it is built. Without
 * `create` it is declared but not built in this version: its specs validate, applying one is
 * refused as not supported yet. With `refused` every spec naming it is refused with that reason.
 */
export interface ConnectorFactory<C extends z.ZodType = z.ZodType> {
  manifest: ConnectorManifest<C>;
  create?(config: z.infer<C>, ctx: ConnectorContext): TraceStoreConnector;
  refused?: string;
}

/** Keeps the config type flowing from the schema to `create`. */
export function defineConnector<C extends z.ZodType>(
  factory: ConnectorFactory<C>,
): ConnectorFactory<C> {
  return factory;
}
