import { CoreErrors, isTouchstoneError, type Score } from '../../../core/index.js';
import type { WriteBackItem, WriteBackOutcome } from '../../connector.js';
import { isRecord } from '../json-rest.js';
import { PhoenixErrors } from './error-codes.js';
import type { PhoenixAnswer, PhoenixRest } from './rest.js';

/**
 * Write-back as Phoenix annotations: one per (trace, policy, metric), named after the metric, on
 * the trace (`POST /v1/trace_annotations`), or on one span when the score names it
 * (`score.metadata.spanId`, 16 hex: `POST /v1/span_annotations`). Phoenix upserts an annotation
 * on (name, trace or span, identifier), so every annotation carries the identifier
 * `touchstone/<policy>/<evaluator>`: writing the same metric again updates it in place, whether
 * or not the ledger still has its id, and annotations of other writers (another identifier, or a
 * person's in the UI) are never touched. `annotator_kind` is `HUMAN` for a person's annotation
 * made in Touchstone (policy `@human/<principal>`, the principal also in `metadata.annotator`),
 * `LLM` for judge evaluators, else `CODE`; `result` holds the score (a number; pass/fail as 1/0 with label `pass`/`fail`; a label)
 * and the explanation. Requests use `sync=true`: Phoenix inserts before it answers and returns
 * the annotations' ids, so a write is confirmed (without it Phoenix queues the rows, answers
 * `{"data": []}` and drops rows whose trace it never finds).
 *
 * Phoenix answers the same id whether it inserted or updated. An item whose id the ledger has is
 * `updated` when Phoenix answers that id; for the others the annotations already there with the
 * same identifiers are read first (one request per batch), so an upsert after a lost ledger is
 * reported `updated` too.
 */

/** Annotations per request (Phoenix has no documented cap; answers stay small). */
export const ANNOTATION_BATCH = 100;

const SPAN_ID = /^[0-9a-f]{16}$/;

/** The evaluator instance a metric comes from: `helpfulness.passed` → `helpfulness`. */
export function evaluatorOf(metric: string): string {
  const dot = metric.indexOf('.');
  return dot > 0 ? metric.slice(0, dot) : metric;
}

/** The upsert identifier of a policy's annotations for one evaluator. */
export function annotationIdentifier(policy: string, metric: string): string {
  return `touchstone/${policy}/${evaluatorOf(metric)}`;
}

/** The span a score belongs to (`metadata.spanId`, 16 lowercase hex), if it names one. */
export function scoreSpanId(score: Score): string | undefined {
  const v = score.metadata?.spanId;
  if (typeof v !== 'string') return undefined;
  const id = v.trim().toLowerCase();
  return SPAN_ID.test(id) && !/^0+$/.test(id) ? id : undefined;
}

function result(score: Score): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (score.value !== undefined) {
    if (!Number.isFinite(score.value)) {
      throw PhoenixErrors.PHOENIX_REQUEST_REFUSED(
        `score ${JSON.stringify(score.name)} is not a finite number; Phoenix cannot store it`,
      );
    }
    out.score = score.value;
  } else if (score.passed !== undefined) {
    out.score = score.passed ? 1 : 0;
    out.label = score.passed ? 'pass' : 'fail';
  } else if (score.label !== undefined) {
    out.label = score.label;
  } else {
    throw PhoenixErrors.PHOENIX_REQUEST_REFUSED(`score ${JSON.stringify(score.name)} has no value`);
  }
  if (score.explanation !== undefined) out.explanation = score.explanation;
  return out;
}

interface Prepared {
  index: number;
  item: WriteBackItem;
  target: 'trace' | 'span';
  row: Record<string, unknown>;
}

function prepare(item: WriteBackItem, index: number): Prepared {
  const spanId = scoreSpanId(item.score);
  // The score's own metadata, without the span id it was routed by.
  const { spanId: _routed, ...details } = item.score.metadata ?? {};
  const row: Record<string, unknown> = {
    ...(spanId === undefined ? { trace_id: item.storeId } : { span_id: spanId }),
    name: item.metric,
    annotator_kind: item.annotator !== undefined ? 'HUMAN' : item.judge ? 'LLM' : 'CODE',
    result: result(item.score),
    metadata: {
      source: 'touchstone',
      policy: item.policy,
      evaluator: evaluatorOf(item.metric),
      metric: item.metric,
      ...(spanId === undefined ? {} : { trace_id: item.traceId }),
      ...(item.annotator === undefined ? {} : { annotator: item.annotator }),
      ...(Object.keys(details).length === 0 ? {} : { score: details }),
    },
    identifier: annotationIdentifier(item.policy, item.metric),
  };
  return { index, item, target: spanId === undefined ? 'trace' : 'span', row };
}

function failed(err: unknown, traceMissing = false): WriteBackOutcome {
  if (!isTouchstoneError(err)) throw err;
  const out: WriteBackOutcome = {
    status: 'failed',
    error: err.message,
    retryable: err.retryable,
    code: err.code,
    ...(traceMissing ? { traceMissing } : {}),
  };
  if (err.retryAfterSeconds !== undefined) out.retryAfterSeconds = err.retryAfterSeconds;
  return out;
}

function insertedIds(answer: PhoenixAnswer, count: number): string[] | undefined {
  if (answer.status < 200 || answer.status >= 300 || !isRecord(answer.json)) return undefined;
  const data = answer.json.data;
  if (!Array.isArray(data) || data.length !== count) return undefined;
  const ids: string[] = [];
  for (const d of data) {
    if (!isRecord(d) || typeof d.id !== 'string' || d.id === '') return undefined;
    ids.push(d.id);
  }
  return ids;
}

/** The upsert key of an annotation: (trace or span id, name, identifier). */
function upsertKey(target: string, name: string, identifier: string): string {
  return JSON.stringify([target, name, identifier]);
}

function targetOf(p: Prepared): string {
  return String(p.target === 'trace' ? p.row.trace_id : p.row.span_id);
}

export async function writeAnnotations(
  rest: PhoenixRest,
  projectPath: string,
  items: readonly WriteBackItem[],
  signal?: AbortSignal,
): Promise<WriteBackOutcome[]> {
  const outcomes: (WriteBackOutcome | undefined)[] = items.map(() => undefined);
  const s = signal === undefined ? {} : { signal };
  const ready: Prepared[] = [];
  for (const [i, item] of items.entries()) {
    try {
      ready.push(prepare(item, i));
    } catch (err) {
      outcomes[i] = failed(err);
    }
  }

  /**
   * The ids of the annotations already on these targets with these identifiers, by upsert key;
   * undefined (and the batch's outcomes set) when Phoenix could not be read.
   */
  async function existing(
    target: 'trace' | 'span',
    batch: readonly Prepared[],
  ): Promise<Map<string, string> | undefined> {
    const out = new Map<string, string>();
    const unknown = batch.filter((p) => p.item.remoteId === undefined || p.item.remoteId === '');
    if (unknown.length === 0) return out;
    const what = `list ${target} annotations`;
    const ids = [...new Set(unknown.map(targetOf))];
    const identifiers = [...new Set(unknown.map((p) => String(p.row.identifier)))];
    let cursor: string | undefined;
    for (let pages = 0; pages < 100; pages++) {
      let answer: PhoenixAnswer;
      try {
        answer = await rest.send({
          method: 'GET',
          path: `${projectPath}/${target}_annotations`,
          query: {
            [`${target}_ids`]: ids,
            identifier: identifiers,
            limit: '1000',
            ...(cursor === undefined ? {} : { cursor }),
          },
          what,
          ...s,
        });
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        const outcome = failed(err);
        for (const p of batch) outcomes[p.index] = outcome;
        return undefined;
      }
      // 404: none of these traces or spans is in the project (the write will say more).
      if (answer.status === 404) return out;
      if (
        answer.status < 200 ||
        answer.status >= 300 ||
        !isRecord(answer.json) ||
        !Array.isArray(answer.json.data)
      ) {
        const outcome = failed(rest.failure(answer, what));
        for (const p of batch) outcomes[p.index] = outcome;
        return undefined;
      }
      for (const a of answer.json.data) {
        if (!isRecord(a) || typeof a.id !== 'string') continue;
        const on = a[`${target}_id`];
        if (typeof on !== 'string' || typeof a.name !== 'string') continue;
        const identifier = typeof a.identifier === 'string' ? a.identifier : '';
        out.set(upsertKey(on, a.name, identifier), a.id);
      }
      const next = answer.json.next_cursor;
      if (typeof next !== 'string' || next === '' || next === cursor) return out;
      cursor = next;
    }
    return out;
  }

  function settle(
    batch: readonly Prepared[],
    ids: readonly string[],
    before: ReadonlyMap<string, string>,
  ): void {
    for (const [j, p] of batch.entries()) {
      const id = ids[j] as string;
      const known =
        p.item.remoteId ||
        before.get(upsertKey(targetOf(p), p.item.metric, String(p.row.identifier)));
      // Phoenix answers the same id for an upsert: a known id back means an update.
      outcomes[p.index] = { status: known === id ? 'updated' : 'created', remoteId: id };
    }
  }

  async function post(
    target: 'trace' | 'span',
    batch: readonly Prepared[],
    before: ReadonlyMap<string, string>,
  ): Promise<void> {
    const what = `${target}_annotations`;
    let answer: PhoenixAnswer;
    try {
      answer = await rest.send({
        method: 'POST',
        path: `/v1/${what}`,
        query: { sync: 'true' },
        body: { data: batch.map((p) => p.row) },
        what,
        ...s,
      });
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      const outcome = failed(err);
      for (const p of batch) outcomes[p.index] = outcome;
      return;
    }
    const ids = insertedIds(answer, batch.length);
    if (ids !== undefined) return settle(batch, ids, before);
    // One missing trace or span (404) or one refused row (400/422) fails a whole batch and
    // inserts nothing: find it one by one so the others are still written.
    const refused = answer.status >= 400 && answer.status < 500 && answer.status !== 429;
    if (refused && batch.length > 1) {
      for (const p of batch) {
        signal?.throwIfAborted();
        await post(target, [p], before);
      }
      return;
    }
    // Phoenix answers an unknown trace or span with a text 404 (a route it lacks, with JSON).
    const missing = answer.status === 404 && answer.mediaType === 'text/plain';
    const err = missing
      ? PhoenixErrors.PHOENIX_REQUEST_REFUSED(
          `Phoenix at ${rest.host} (${what}) answered 404: the ${target} is not in Phoenix (not yet received, or deleted)`,
        )
      : rest.failure(answer, what);
    const outcome = failed(err, missing);
    for (const p of batch) outcomes[p.index] = outcome;
  }

  for (const target of ['trace', 'span'] as const) {
    const mine = ready.filter((p) => p.target === target);
    for (let i = 0; i < mine.length; i += ANNOTATION_BATCH) {
      signal?.throwIfAborted();
      const batch = mine.slice(i, i + ANNOTATION_BATCH);
      const before = await existing(target, batch);
      if (before !== undefined) await post(target, batch, before);
    }
  }
  return outcomes.map(
    (o) =>
      o ?? {
        status: 'failed',
        error: 'not written (internal error)',
        retryable: true,
        code: CoreErrors.INTERNAL.code,
      },
  );
}
