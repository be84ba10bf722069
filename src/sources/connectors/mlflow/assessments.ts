import { isTouchstoneError, type Score, type TouchstoneError } from '../../../core/index.js';
import type { WriteBackItem, WriteBackOutcome } from '../../connector.js';
import { isRecord } from '../json-rest.js';
import { MlflowErrors } from './error-codes.js';
import type { MlflowAnswer, MlflowCall, MlflowRest } from './rest.js';

/**
 * Write-back as MLflow feedback assessments: one per (trace, policy, metric), named after the
 * metric, with source `touchstone/<policy>` (type `HUMAN` for a person's annotation, whose
 * policy is `@human/<principal>`; `LLM_JUDGE` when a judge model produced the score; else
 * `CODE`) and the explanation as rationale. MLflow has no upsert, so an item updates
 * the assessment at its `remoteId` (PATCH with an update mask), or else the one already on the
 * trace with the same name and source id, and only then creates one.
 */

/** The source id of a policy's assessments. */
export function assessmentSourceId(policy: string): string {
  return `touchstone/${policy}`;
}

function sourceType(item: WriteBackItem): 'HUMAN' | 'LLM_JUDGE' | 'CODE' {
  if (item.annotator !== undefined) return 'HUMAN';
  return item.judge ? 'LLM_JUDGE' : 'CODE';
}

/** The PATCH update mask: protobuf FieldMask JSON is one comma-separated string. */
export const UPDATE_MASK = 'feedback,rationale';

interface RemoteAssessment {
  id: string;
  name: string;
  sourceId: string;
  valid: boolean;
  updated: string;
}

function feedbackValue(score: Score): number | boolean | string {
  if (score.value !== undefined) {
    if (!Number.isFinite(score.value)) {
      throw MlflowErrors.MLFLOW_REQUEST_REFUSED(
        `score ${JSON.stringify(score.name)} is not a finite number; MLflow cannot store it`,
      );
    }
    return score.value;
  }
  if (score.passed !== undefined) return score.passed;
  if (score.label !== undefined) return score.label;
  throw MlflowErrors.MLFLOW_REQUEST_REFUSED(`score ${JSON.stringify(score.name)} has no value`);
}

function remoteAssessments(info: unknown): RemoteAssessment[] {
  const list = isRecord(info) && Array.isArray(info.assessments) ? info.assessments : [];
  const out: RemoteAssessment[] = [];
  for (const a of list) {
    if (!isRecord(a) || typeof a.assessment_id !== 'string') continue;
    const source = isRecord(a.source) ? a.source : {};
    out.push({
      id: a.assessment_id,
      name: typeof a.assessment_name === 'string' ? a.assessment_name : '',
      sourceId: typeof source.source_id === 'string' ? source.source_id : '',
      valid: a.valid !== false,
      updated: typeof a.last_update_time === 'string' ? a.last_update_time : '',
    });
  }
  return out;
}

/**
 * Where a flavour of MLflow keeps assessments: the v3 routes wrap the assessment in
 * `{assessment}` and take the update mask in the body; Databricks' v4 routes (catalog schemas)
 * take and give the bare assessment, with the mask and the SQL warehouse in the query.
 */
export interface AssessmentRoutes {
  /** Reads the trace's info, whose `assessments` are the ones already there. */
  info(storeId: string): Omit<MlflowCall, 'what' | 'signal'>;
  create(storeId: string, assessment: Record<string, unknown>): Omit<MlflowCall, 'what' | 'signal'>;
  update(
    storeId: string,
    id: string,
    patch: Record<string, unknown>,
  ): Omit<MlflowCall, 'what' | 'signal'>;
  /** The assessment in a create or update answer. */
  assessmentOf(body: Record<string, unknown>): unknown;
}

function pathOf(storeId: string, assessmentId?: string): string {
  const base = `/api/3.0/mlflow/traces/${encodeURIComponent(storeId)}/assessments`;
  return assessmentId === undefined ? base : `${base}/${encodeURIComponent(assessmentId)}`;
}

/** The open-source (and Databricks experiment, SageMaker) routes. */
export const V3_ASSESSMENTS: AssessmentRoutes = {
  info: (storeId) => ({
    method: 'GET',
    path: `/api/3.0/mlflow/traces/${encodeURIComponent(storeId)}`,
  }),
  create: (storeId, assessment) => ({
    method: 'POST',
    path: pathOf(storeId),
    body: { assessment },
  }),
  update: (storeId, id, patch) => ({
    method: 'PATCH',
    path: pathOf(storeId, id),
    body: { assessment: patch, update_mask: UPDATE_MASK },
  }),
  assessmentOf: (body) => body.assessment,
};

function assessmentIdOf(
  body: Record<string, unknown>,
  what: string,
  rest: MlflowRest,
  routes: AssessmentRoutes,
): string {
  const a = routes.assessmentOf(body);
  if (isRecord(a) && typeof a.assessment_id === 'string' && a.assessment_id !== '') {
    return a.assessment_id;
  }
  throw rest.failure({ status: 200, mediaType: 'application/json', json: body }, what);
}

/**
 * MLflow's own 404 on a trace route, whose error body says the resource does not exist: the
 * store does not hold the trace. A route the server lacks answers 404 without that code (an HTML
 * page, or Databricks' `ENDPOINT_NOT_FOUND`).
 */
function traceUnknown(answer: MlflowAnswer): boolean {
  return (
    answer.status === 404 &&
    (answer.errorCode === 'RESOURCE_DOES_NOT_EXIST' || answer.errorCode === 'NOT_FOUND')
  );
}

/** The item's trace is not in MLflow: `error` says so as the refusal it is. */
class TraceMissing extends Error {
  constructor(readonly error: TouchstoneError) {
    super(error.message);
  }
}

export async function writeAssessments(
  rest: MlflowRest,
  items: readonly WriteBackItem[],
  signal?: AbortSignal,
  routes: AssessmentRoutes = V3_ASSESSMENTS,
): Promise<WriteBackOutcome[]> {
  // The assessments on each trace, read at most once per call (several metrics share a trace).
  const existing = new Map<string, Promise<RemoteAssessment[]>>();

  /** The trace's assessments; throws a TraceMissing when MLflow does not hold the trace. */
  async function onTrace(storeId: string): Promise<RemoteAssessment[]> {
    let found = existing.get(storeId);
    if (found === undefined) {
      const what = 'traces/get-info';
      found = rest
        .send({ ...routes.info(storeId), what, ...(signal === undefined ? {} : { signal }) })
        .then((answer) => {
          if (traceUnknown(answer)) throw new TraceMissing(rest.failure(answer, what));
          if (answer.status < 200 || answer.status >= 300 || !isRecord(answer.json)) {
            throw rest.failure(answer, what);
          }
          const body = answer.json;
          return remoteAssessments(isRecord(body.trace) ? body.trace.trace_info : body);
        });
      existing.set(storeId, found);
      // A failed read is not cached: the next item retries it.
      found.catch(() => existing.delete(storeId));
    }
    return found;
  }

  async function update(item: WriteBackItem, assessmentId: string): Promise<string | undefined> {
    const answer = await rest.send({
      ...routes.update(item.storeId, assessmentId, {
        feedback: { value: feedbackValue(item.score) },
        ...(item.score.explanation === undefined ? {} : { rationale: item.score.explanation }),
      }),
      what: 'assessments/update',
      ...(signal === undefined ? {} : { signal }),
    });
    // Deleted in MLflow since: look again by name and source, or create.
    if (answer.status === 404) return undefined;
    if (answer.status < 200 || answer.status >= 300 || !isRecord(answer.json)) {
      throw rest.failure(answer, 'assessments/update');
    }
    return assessmentIdOf(answer.json, 'assessments/update', rest, routes);
  }

  async function writeOne(item: WriteBackItem): Promise<WriteBackOutcome> {
    const sourceId = assessmentSourceId(item.policy);
    if (item.remoteId !== undefined && item.remoteId !== '') {
      const id = await update(item, item.remoteId);
      if (id !== undefined) return { status: 'updated', remoteId: id };
    }
    const mine = (await onTrace(item.storeId))
      .filter((a) => a.valid && a.name === item.metric && a.sourceId === sourceId)
      .sort((a, b) => b.updated.localeCompare(a.updated));
    for (const a of mine) {
      const id = await update(item, a.id);
      if (id !== undefined) return { status: 'updated', remoteId: id };
    }
    const what = 'assessments/create';
    const answer = await rest.send({
      ...routes.create(item.storeId, {
        assessment_name: item.metric,
        trace_id: item.storeId,
        source: { source_type: sourceType(item), source_id: sourceId },
        feedback: { value: feedbackValue(item.score) },
        ...(item.score.explanation === undefined ? {} : { rationale: item.score.explanation }),
      }),
      what,
      ...(signal === undefined ? {} : { signal }),
    });
    // Deleted between the read and the write.
    if (traceUnknown(answer)) throw new TraceMissing(rest.failure(answer, what));
    if (answer.status < 200 || answer.status >= 300 || !isRecord(answer.json)) {
      throw rest.failure(answer, what);
    }
    const id = assessmentIdOf(answer.json, what, rest, routes);
    (await onTrace(item.storeId)).push({
      id,
      name: item.metric,
      sourceId,
      valid: true,
      // Sorts after every server timestamp: the newest.
      updated: '~',
    });
    return { status: 'created', remoteId: id };
  }

  const outcomes: WriteBackOutcome[] = [];
  for (const item of items) {
    signal?.throwIfAborted();
    try {
      outcomes.push(await writeOne(item));
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      const cause = err instanceof TraceMissing ? err.error : err;
      if (!isTouchstoneError(cause)) throw err;
      const failed: WriteBackOutcome = {
        status: 'failed',
        error: cause.message,
        retryable: cause.retryable,
        code: cause.code,
        ...(err instanceof TraceMissing ? { traceMissing: true } : {}),
      };
      if (cause.retryAfterSeconds !== undefined) failed.retryAfterSeconds = cause.retryAfterSeconds;
      outcomes.push(failed);
    }
  }
  return outcomes;
}
