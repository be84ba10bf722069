import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * An in-memory MLflow trace store with the shapes of MLflow 3.x's v3 trace API (checked against
 * answers recorded from MLflow 3.17.2 in src/sources/connectors/mlflow/testdata/): TraceInfoV3
 * search hits, `traces.json` span dicts (base64 ids, JSON-encoded attribute values), batchGet
 * spans (OTLP JSON, typed values), feedback assessments. The Databricks and SageMaker fakes
 * serve it behind their own authentication and routes.
 */

export interface StoredAssessment {
  assessment_id: string;
  assessment_name: string;
  trace_id: string;
  source: { source_type: string; source_id: string };
  feedback?: { value: unknown };
  rationale?: string;
  create_time: string;
  last_update_time: string;
  valid: boolean;
}

export interface StoredTrace {
  /** `tr-<hex>` (experiments) or `trace:/<catalog.schema>/<hex>` (Unity Catalog). */
  traceId: string;
  hex: string;
  /** Experiment id or `catalog.schema`. */
  location: string;
  startMs: number;
  durationMs: number;
  state: 'OK' | 'ERROR' | 'IN_PROGRESS';
  tags: Record<string, string>;
  assessments: StoredAssessment[];
  /** Bytes of an artifact served instead of the real one (size tests). */
  artifactBytes?: number;
}

export class MlflowStoreFake {
  readonly traces = new Map<string, StoredTrace>();
  /** Everything a request did wrong against the contract; tests assert it stays empty. */
  readonly violations: string[] = [];

  /** Adds a finished trace with two spans (a chain calling a retriever). */
  add(location: string, startMs: number, options: Partial<StoredTrace> = {}): StoredTrace {
    const hex = randomBytes(16).toString('hex');
    const uc = location.includes('.');
    const trace: StoredTrace = {
      traceId: uc ? `trace:/${location}/${hex}` : `tr-${hex}`,
      hex,
      location,
      startMs,
      durationMs: 120,
      state: 'OK',
      tags: { 'mlflow.traceName': 'answer' },
      assessments: [],
      ...options,
    };
    this.traces.set(trace.traceId, trace);
    return trace;
  }

  /** TraceInfoV3 as search, get-info and batchGet return it. */
  info(t: StoredTrace): Record<string, unknown> {
    const uc = t.location.includes('.');
    const [catalog_name, schema_name] = t.location.split('.');
    return {
      trace_id: t.traceId,
      trace_location: uc
        ? { type: 'UC_SCHEMA', uc_schema: { catalog_name, schema_name } }
        : { type: 'MLFLOW_EXPERIMENT', mlflow_experiment: { experiment_id: t.location } },
      request_time: new Date(t.startMs).toISOString(),
      execution_duration: `${t.durationMs / 1000}s`,
      state: t.state,
      trace_metadata: { 'mlflow.trace_schema.version': '3' },
      tags: t.tags,
      ...(t.assessments.length === 0 ? {} : { assessments: t.assessments }),
    };
  }

  private spanIds(t: StoredTrace) {
    const b64 = (hex: string) => Buffer.from(hex, 'hex').toString('base64');
    return {
      trace: b64(t.hex),
      root: b64(t.hex.slice(0, 16)),
      child: b64(t.hex.slice(16, 32)),
      startNs: BigInt(t.startMs) * 1_000_000n,
      endNs: BigInt(t.startMs + t.durationMs) * 1_000_000n,
    };
  }

  /** The trace's `traces.json` (MLflow span dicts, attribute values JSON text). */
  artifact(t: StoredTrace): string {
    const ids = this.spanIds(t);
    // Big-int times as MLflow writes them: JSON numbers past 2^53.
    return `{"spans": [{"trace_id": "${ids.trace}", "span_id": "${ids.root}", "parent_span_id": null, "name": "answer", "start_time_unix_nano": ${ids.startNs}, "end_time_unix_nano": ${ids.endNs}, "events": [], "status": {"code": "STATUS_CODE_OK", "message": ""}, "attributes": {"mlflow.traceRequestId": ${JSON.stringify(JSON.stringify(t.traceId))}, "mlflow.spanType": "\\"CHAIN\\"", "mlflow.spanInputs": "{\\"question\\": \\"q\\"}", "mlflow.spanOutputs": "\\"a\\""}}, {"trace_id": "${ids.trace}", "span_id": "${ids.child}", "parent_span_id": "${ids.root}", "name": "retrieve", "start_time_unix_nano": ${ids.startNs + 1000n}, "end_time_unix_nano": ${ids.endNs - 1000n}, "events": [], "status": {"code": "STATUS_CODE_OK", "message": ""}, "attributes": {"mlflow.spanType": "\\"RETRIEVER\\"", "mlflow.spanInputs": "{\\"query\\": \\"q\\"}", "mlflow.spanOutputs": "[\\"doc-1\\"]"}}]}`;
  }

  /** One batchGet `traces[]` entry (OTLP JSON spans, typed values). */
  batchEntry(t: StoredTrace): string {
    const ids = this.spanIds(t);
    const span = (id: string, parent: string | undefined, name: string, s: bigint, e: bigint) =>
      `{"trace_id": "${ids.trace}", "span_id": "${id}"${parent === undefined ? '' : `, "parent_span_id": "${parent}"`}, "name": "${name}", "start_time_unix_nano": ${s}, "end_time_unix_nano": ${e}, "attributes": [{"key": "mlflow.spanType", "value": {"string_value": "CHAIN"}}, {"key": "mlflow.spanInputs", "value": {"kvlist_value": {"values": [{"key": "question", "value": {"string_value": "q"}}]}}}], "status": {"code": "STATUS_CODE_OK"}}`;
    return `{"trace_info": ${JSON.stringify(this.info(t))}, "spans": [${span(ids.root, undefined, 'answer', ids.startNs, ids.endNs)}, ${span(ids.child, ids.root, 'retrieve', ids.startNs + 1000n, ids.endNs - 1000n)}]}`;
  }

  /**
   * A search over `locations` with the connector's filter (`trace.timestamp_ms >= A AND
   * trace.timestamp_ms < B`), ascending, offset page tokens as MLflow's (base64 `{"offset": n}`).
   */
  search(
    locations: string[],
    filter: unknown,
    maxResults: unknown,
    orderBy: unknown,
    pageToken: unknown,
  ): { hits: StoredTrace[]; next?: string; end: string } | { error: string } {
    if (maxResults !== undefined && (typeof maxResults !== 'number' || maxResults > 500)) {
      return { error: 'max_results must be a number at most 500' };
    }
    let from = Number.NEGATIVE_INFINITY;
    let to = Number.POSITIVE_INFINITY;
    if (filter !== undefined) {
      const m = /^trace\.timestamp_ms >= (\d+) AND trace\.timestamp_ms < (\d+)$/.exec(
        String(filter),
      );
      if (m === null) return { error: `unsupported filter ${String(filter)}` };
      from = Number(m[1]);
      to = Number(m[2]);
    }
    if (orderBy !== undefined && JSON.stringify(orderBy) !== '["timestamp_ms ASC"]') {
      return { error: 'unexpected order_by' };
    }
    const all = [...this.traces.values()]
      .filter((t) => locations.includes(t.location) && t.startMs >= from && t.startMs < to)
      .sort((a, b) => a.startMs - b.startMs || a.traceId.localeCompare(b.traceId));
    const offset =
      typeof pageToken === 'string' && pageToken !== ''
        ? (JSON.parse(Buffer.from(pageToken, 'base64').toString()) as { offset: number }).offset
        : 0;
    const size = typeof maxResults === 'number' ? maxResults : 100;
    const hits = all.slice(offset, offset + size);
    const token = (n: number) => Buffer.from(JSON.stringify({ offset: n })).toString('base64');
    // `end`: a token past the last hit, which Databricks' long-running search hands out anyway.
    const end = token(offset + hits.length);
    return offset + size < all.length ? { hits, next: token(offset + size), end } : { hits, end };
  }

  createAssessment(t: StoredTrace, a: Record<string, unknown>): StoredAssessment | string {
    const source = a.source as { source_type?: unknown; source_id?: unknown } | undefined;
    if (typeof a.assessment_name !== 'string' || a.assessment_name === '') return 'assessment_name';
    if (a.trace_id !== t.traceId) return 'trace_id must be the trace the path names';
    if (typeof source?.source_type !== 'string' || typeof source.source_id !== 'string') {
      return 'source';
    }
    if (typeof a.feedback !== 'object' || a.feedback === null) return 'feedback';
    const now = new Date().toISOString();
    const stored: StoredAssessment = {
      assessment_id: `a-${randomBytes(16).toString('hex')}`,
      assessment_name: a.assessment_name,
      trace_id: t.traceId,
      source: { source_type: source.source_type, source_id: source.source_id },
      feedback: a.feedback as { value: unknown },
      ...(typeof a.rationale === 'string' ? { rationale: a.rationale } : {}),
      create_time: now,
      last_update_time: now,
      valid: true,
    };
    t.assessments.push(stored);
    return stored;
  }

  /** Answers a v3 create (`{assessment}` in and out); a refused one is a violation. */
  answerV3Create(t: StoredTrace, json: Record<string, unknown>, res: ServerResponse) {
    const made = this.createAssessment(t, (json.assessment ?? {}) as Record<string, unknown>);
    if (typeof made === 'string') return this.refuse(res, `v3 create: ${made}`);
    sendJson(res, 200, { assessment: made });
  }

  /** Answers a v3 update (`{assessment, update_mask}` in, `{assessment}` out). */
  answerV3Update(t: StoredTrace, id: string, json: Record<string, unknown>, res: ServerResponse) {
    const out = this.updateAssessment(
      t,
      id,
      (json.assessment ?? {}) as Record<string, unknown>,
      json.update_mask,
    );
    if (out === 'not-found') {
      return sendError(res, 404, 'RESOURCE_DOES_NOT_EXIST', 'no such assessment');
    }
    if (typeof out === 'string') return this.refuse(res, `v3 update: ${out}`);
    sendJson(res, 200, { assessment: out });
  }

  /** A request against the contract: recorded, and answered 400 as MLflow does. */
  refuse(res: ServerResponse, why: string): void {
    this.violations.push(why);
    sendError(res, 400, 'INVALID_PARAMETER_VALUE', why);
  }

  updateAssessment(
    t: StoredTrace,
    id: string,
    patch: Record<string, unknown>,
    mask: unknown,
  ): StoredAssessment | 'not-found' | string {
    const a = t.assessments.find((x) => x.assessment_id === id);
    if (a === undefined) return 'not-found';
    if (mask !== 'feedback,rationale') return `update_mask ${JSON.stringify(mask)}`;
    if (patch.feedback !== undefined) a.feedback = patch.feedback as { value: unknown };
    if (typeof patch.rationale === 'string') a.rationale = patch.rationale;
    a.last_update_time = new Date().toISOString();
    return a;
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP helpers of the fakes
// ---------------------------------------------------------------------------------------------

export async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

export function sendJson(res: ServerResponse, status: number, body: unknown | string): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

/** An MLflow error body, as the tracking server (and Databricks) answer errors. */
export function sendError(res: ServerResponse, status: number, code: string, message: string) {
  sendJson(res, status, { error_code: code, message });
}
