import { isTouchstoneError, type Score } from '../../../core/index.js';
import type { WriteBackItem, WriteBackOutcome } from '../../connector.js';
import { isRecord } from '../json-rest.js';
import { MlflowErrors } from './error-codes.js';
import type { MlflowRest } from './rest.js';

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
const UPDATE_MASK = 'feedback,rationale';

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

function pathOf(storeId: string, assessmentId?: string): string {
  const base = `/api/3.0/mlflow/traces/${encodeURIComponent(storeId)}/assessments`;
  return assessmentId === undefined ? base : `${base}/${encodeURIComponent(assessmentId)}`;
}

function assessmentIdOf(body: Record<string, unknown>, what: string, rest: MlflowRest): string {
  const a = body.assessment;
  if (isRecord(a) && typeof a.assessment_id === 'string' && a.assessment_id !== '') {
    return a.assessment_id;
  }
  throw rest.failure({ status: 200, mediaType: 'application/json', json: body }, what);
}

export async function writeAssessments(
  rest: MlflowRest,
  items: readonly WriteBackItem[],
  signal?: AbortSignal,
): Promise<WriteBackOutcome[]> {
  // The assessments on each trace, read at most once per call (several metrics share a trace).
  const existing = new Map<string, Promise<RemoteAssessment[]>>();

  async function onTrace(storeId: string): Promise<RemoteAssessment[]> {
    let found = existing.get(storeId);
    if (found === undefined) {
      found = rest
        .expectOk({
          method: 'GET',
          path: `/api/3.0/mlflow/traces/${encodeURIComponent(storeId)}`,
          what: 'traces/get-info',
          ...(signal === undefined ? {} : { signal }),
        })
        .then((body) => remoteAssessments(isRecord(body.trace) ? body.trace.trace_info : body));
      existing.set(storeId, found);
      // A failed read is not cached: the next item retries it.
      found.catch(() => existing.delete(storeId));
    }
    return found;
  }

  async function update(item: WriteBackItem, assessmentId: string): Promise<string | undefined> {
    const answer = await rest.send({
      method: 'PATCH',
      path: pathOf(item.storeId, assessmentId),
      body: {
        assessment: {
          feedback: { value: feedbackValue(item.score) },
          ...(item.score.explanation === undefined ? {} : { rationale: item.score.explanation }),
        },
        update_mask: UPDATE_MASK,
      },
      what: 'assessments/update',
      ...(signal === undefined ? {} : { signal }),
    });
    // Deleted in MLflow since: look again by name and source, or create.
    if (answer.status === 404) return undefined;
    if (answer.status < 200 || answer.status >= 300 || !isRecord(answer.json)) {
      throw rest.failure(answer, 'assessments/update');
    }
    return assessmentIdOf(answer.json, 'assessments/update', rest);
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
    const created = await rest.expectOk({
      method: 'POST',
      path: pathOf(item.storeId),
      body: {
        assessment: {
          assessment_name: item.metric,
          trace_id: item.storeId,
          source: { source_type: sourceType(item), source_id: sourceId },
          feedback: { value: feedbackValue(item.score) },
          ...(item.score.explanation === undefined ? {} : { rationale: item.score.explanation }),
        },
      },
      what: 'assessments/create',
      ...(signal === undefined ? {} : { signal }),
    });
    const id = assessmentIdOf(created, 'assessments/create', rest);
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
      if (!isTouchstoneError(err)) throw err;
      const failed: WriteBackOutcome = {
        status: 'failed',
        error: err.message,
        retryable: err.retryable,
        code: err.code,
      };
      if (err.retryAfterSeconds !== undefined) failed.retryAfterSeconds = err.retryAfterSeconds;
      outcomes.push(failed);
    }
  }
  return outcomes;
}
