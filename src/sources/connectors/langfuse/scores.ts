import { isTouchstoneError, type Score } from '../../../core/index.js';
import type { WriteBackItem, WriteBackOutcome } from '../../connector.js';
import { isRecord } from '../json-rest.js';
import { LangfuseErrors } from './error-codes.js';
import { scoreId } from './ids.js';
import type { LangfuseRest } from './rest.js';
import { ScoreConfigs } from './score-configs.js';

/**
 * Write-back as Langfuse scores (`POST /api/public/scores`): one trace score per (trace, policy,
 * metric), named after the metric, with a client-chosen id (ids.ts: `scoreId`) so that sending it
 * again replaces it — Langfuse upserts scores by id, there is nothing to look up before writing.
 *
 * - `dataType` from the score's kind: a number is NUMERIC, pass/fail BOOLEAN (sent as 1/0, as the
 *   API requires), a label CATEGORICAL;
 * - `comment` is the explanation; `metadata` is `{"source": "touchstone", "policy": <policy>,
 *   "evaluator": "judge" | "code"}`;
 * - `source` is `API` (the create endpoint accepts only API and ANNOTATION; EVAL is reserved for
 *   Langfuse's own evaluators), and `ANNOTATION` for a person's annotation made in Touchstone
 *   (policy `@human/<principal>`), with the `configId` of a score config of its name and data
 *   type (score-configs.ts) and `annotator` (the principal) in `metadata`;
 * - `environment` is the source's environment (its location), else the trace's own, read from
 *   its root observation, so the score shows under the trace's environment filter.
 *
 * Created or updated: an item with the ledger's id is an update; otherwise the ids are looked up
 * once per call (`GET /api/public/v3/scores?id=…`), best effort — Langfuse makes scores visible
 * with a delay, so a score written moments ago may be reported `created` again; its id, and so
 * the score in Langfuse, is the same either way.
 */

export const SCORES_PATH = '/api/public/scores';
const SCORES_V3_PATH = '/api/public/v3/scores';
const OBSERVATIONS_PATH = '/api/public/v2/observations';
/** Ids per v3 lookup (they travel comma-separated in the query string; its page limit is 100). */
const LOOKUP_CHUNK = 50;

export interface ScoreWriteOptions {
  /** The source's environment, when it names one. */
  environment?: string;
  signal?: AbortSignal;
}

export interface ScoreBody {
  id: string;
  traceId: string;
  name: string;
  value: number | string;
  dataType: 'NUMERIC' | 'BOOLEAN' | 'CATEGORICAL';
  comment?: string;
  metadata: Record<string, unknown>;
  environment?: string;
  source: 'API' | 'ANNOTATION';
  configId?: string;
}

function typedValue(score: Score): Pick<ScoreBody, 'value' | 'dataType'> {
  if (score.value !== undefined) {
    if (!Number.isFinite(score.value)) {
      throw LangfuseErrors.LANGFUSE_REQUEST_REFUSED(
        `score ${JSON.stringify(score.name)} is not a finite number; Langfuse cannot store it`,
      );
    }
    return { value: score.value, dataType: 'NUMERIC' };
  }
  if (score.passed !== undefined) return { value: score.passed ? 1 : 0, dataType: 'BOOLEAN' };
  if (score.label !== undefined) return { value: score.label, dataType: 'CATEGORICAL' };
  throw LangfuseErrors.LANGFUSE_REQUEST_REFUSED(`score ${JSON.stringify(score.name)} has no value`);
}

/** The request body that writes one item (exported for tests and docs). */
export function scoreBody(item: WriteBackItem, environment?: string): ScoreBody {
  const body: ScoreBody = {
    id:
      item.remoteId !== undefined && item.remoteId !== ''
        ? item.remoteId
        : scoreId({ traceId: item.storeId, policy: item.policy, metric: item.metric }),
    traceId: item.storeId,
    name: item.metric,
    ...typedValue(item.score),
    metadata: {
      source: 'touchstone',
      policy: item.policy,
      evaluator: item.annotator !== undefined ? 'human' : item.judge ? 'judge' : 'code',
      ...(item.annotator === undefined ? {} : { annotator: item.annotator }),
    },
    source: item.annotator === undefined ? 'API' : 'ANNOTATION',
  };
  if (item.score.explanation !== undefined && item.score.explanation !== '') {
    body.comment = item.score.explanation;
  }
  if (environment !== undefined && environment !== '') body.environment = environment;
  return body;
}

export async function writeScores(
  rest: LangfuseRest,
  items: readonly WriteBackItem[],
  options: ScoreWriteOptions = {},
): Promise<WriteBackOutcome[]> {
  const { signal } = options;
  const s = signal === undefined ? {} : { signal };

  // The trace's environment, read at most once per trace and call.
  const environments = new Map<string, Promise<string | undefined>>();
  function environmentOf(traceId: string): Promise<string | undefined> {
    if (options.environment !== undefined) return Promise.resolve(options.environment);
    let found = environments.get(traceId);
    if (found === undefined) {
      found = rest
        .expectOk({
          method: 'GET',
          path: OBSERVATIONS_PATH,
          query: { traceId, isRootObservation: 'true', limit: '1', fields: 'core,basic' },
          what: 'GET v2/observations',
          ...s,
        })
        .then((json) => {
          const row = Array.isArray(json.data) ? json.data[0] : undefined;
          return isRecord(row) && typeof row.environment === 'string' && row.environment !== ''
            ? row.environment
            : undefined;
        });
      environments.set(traceId, found);
      found.catch(() => environments.delete(traceId));
    }
    return found;
  }

  // Which of the ids without a ledger entry Langfuse already holds (best effort).
  async function existing(ids: readonly string[]): Promise<Set<string>> {
    const out = new Set<string>();
    for (let i = 0; i < ids.length; i += LOOKUP_CHUNK) {
      const chunk = ids.slice(i, i + LOOKUP_CHUNK);
      try {
        const answer = await rest.send({
          method: 'GET',
          path: SCORES_V3_PATH,
          query: { id: chunk.join(','), limit: String(LOOKUP_CHUNK) },
          what: 'GET v3/scores',
          ...s,
        });
        if (answer.status < 200 || answer.status >= 300 || !isRecord(answer.json)) continue;
        const data = Array.isArray(answer.json.data) ? answer.json.data : [];
        for (const row of data) if (isRecord(row) && typeof row.id === 'string') out.add(row.id);
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (!isTouchstoneError(err)) throw err;
        // The write itself decides the item's outcome.
      }
    }
    return out;
  }

  const configs = new ScoreConfigs(rest, signal);
  const bodies: (ScoreBody | Error)[] = items.map((item) => {
    try {
      return scoreBody(item);
    } catch (err) {
      return err as Error;
    }
  });
  const unknownIds = bodies.flatMap((b, i) =>
    b instanceof Error || (items[i]?.remoteId ?? '') !== '' ? [] : [b.id],
  );
  const held = unknownIds.length === 0 ? new Set<string>() : await existing(unknownIds);

  const outcomes: WriteBackOutcome[] = [];
  for (const [i, item] of items.entries()) {
    signal?.throwIfAborted();
    try {
      const prepared = bodies[i] as ScoreBody | Error;
      if (prepared instanceof Error) throw prepared;
      const environment = await environmentOf(item.storeId);
      const configId =
        prepared.source === 'ANNOTATION'
          ? await configs.idFor(prepared.name, prepared.dataType, prepared.value)
          : undefined;
      const body = {
        ...prepared,
        ...(environment === undefined ? {} : { environment }),
        ...(configId === undefined ? {} : { configId }),
      };
      const json = await rest.expectOk({
        method: 'POST',
        path: SCORES_PATH,
        body,
        what: 'POST scores',
        ...s,
      });
      const remoteId = typeof json.id === 'string' && json.id !== '' ? json.id : body.id;
      const updated = (item.remoteId ?? '') !== '' || held.has(body.id);
      outcomes.push({ status: updated ? 'updated' : 'created', remoteId });
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
