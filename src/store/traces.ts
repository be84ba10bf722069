import { createHash, randomBytes } from 'node:crypto';
import { CompiledQuery, type Kysely, type Selectable, type SqlBool, sql } from 'kysely';
import {
  type Attributes,
  attachDetachedEvents,
  type DetachedEvents,
  type EvalRecord,
  type NormalizedTrace,
  type Span,
  type TraceRoot,
} from '../core/index.js';
import {
  encodeAppend,
  PAUSE_CHARS,
  ROOT_RESOURCE_INLINE_MAX,
  type StoredRoot,
  traceKey,
  usageColumn,
} from './append-encoding.js';
import { batches, placeholders } from './batches.js';
import { decodeChunk, fromJson } from './chunk-format.js';
import { labelsMatch, toIso, toMillis } from './columns.js';
import { decodePageToken, encodePageToken, pageLimit } from './page-token.js';
import type {
  AppendOptions,
  AppendResult,
  CompletionResult,
  CompletionRules,
  EncodedAppend,
  EncodedChunk,
  EncodedTrace,
  Page,
  PageRequest,
  PendingTrace,
  SpanBatch,
  SpansReadOptions,
  StoreDialect,
  StoredTrace,
  TraceFilter,
  TraceStore,
} from './ports.js';
import type { Database, SpanChunksTable, SpanResourcesTable, TracesTable } from './schema.js';
import { otherLabelsMatch, planLead, resultsCheck, runList, traceIdIn } from './trace-filters.js';

/** Rows per multi-row INSERT on PostgreSQL (SQLite's groups are smaller: batches.ts). */
const CHUNK = 1000;

/** Rows per read of `span_resources` (two parameters each). */
const RESOURCE_READ = 500;

/** `appendSpans` calls of this process, in order (8 hex digits, wrapping). */
let callSequence = 0;
function nextCallSequence(): string {
  callSequence = (callSequence + 1) % 0x1_0000_0000;
  return callSequence.toString(16).padStart(8, '0');
}

/** A span chunk as inserted: its format given (the column's default is for older builds). */
type ChunkRow = Omit<SpanChunksTable, 'format'> & { format: number };

/** Consecutive runs of rows whose chunk JSON adds up to about `chars` (at least one row each). */
function runsOf(rows: ChunkRow[], chars: number): ChunkRow[][] {
  const runs: ChunkRow[][] = [];
  let run: ChunkRow[] = [];
  let size = 0;
  for (const row of rows) {
    if (run.length > 0 && size + row.spans.length > chars) {
      runs.push(run);
      run = [];
      size = 0;
    }
    run.push(row);
    size += row.spans.length;
  }
  if (run.length > 0) runs.push(run);
  return runs;
}

/** The columns of an open trace's row, as `appendSpans` inserts it. */
const OPEN_COLUMNS = [
  'project',
  'trace_id',
  'source',
  'ingest_labels',
  'first_seen_at',
  'last_span_at',
  'root_ended_at',
  'start_ms',
] as const;

/** …and of a whole trace's, inserted complete: the columns `complete` writes, then its spans. */
const WHOLE_COLUMNS = [
  ...OPEN_COLUMNS,
  'completed_at',
  'service',
  'name',
  'duration_ms',
  'steps',
  'error',
  'labels',
  'digest',
  'record',
  'root',
  'usage',
  'spans',
  'spans_format',
] as const;

/** The columns a StoredTrace is read from: lists select these, not the record or root. */
export const SUMMARY_COLUMNS = [
  'project',
  'trace_id',
  'service',
  'name',
  'start_ms',
  'duration_ms',
  'steps',
  'error',
  'labels',
  'source',
  'digest',
  'completed_at',
  'last_span_at',
  'usage',
] as const;

/** What a read of a completed trace selects: its summary, record and root, not its spans. */
const RECORD_COLUMNS = [...SUMMARY_COLUMNS, 'record', 'root'] as const;

/** SUMMARY_COLUMNS named by table, for queries that join another table with the same names. */
const TRACE_SUMMARY = SUMMARY_COLUMNS.map((c) => `traces.${c}` as const);

export function fromRow(
  row: Pick<Selectable<TracesTable>, (typeof SUMMARY_COLUMNS)[number]>,
): StoredTrace {
  return {
    traceId: row.trace_id,
    project: row.project,
    service: row.service,
    name: row.name,
    startTime: toIso(row.start_ms),
    durationMs: row.duration_ms,
    steps: row.steps,
    error: row.error === 1,
    labels: JSON.parse(row.labels) as Record<string, string>,
    source: row.source,
    digest: row.digest,
    completedAt: toIso(row.completed_at ?? row.last_span_at),
    ...(row.usage === null ? {} : { usage: JSON.parse(row.usage) as StoredTrace['usage'] }),
  };
}

export class KyselyTraceStore implements TraceStore {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: StoreDialect,
  ) {}

  async appendSpans(
    spanBatches: readonly SpanBatch[],
    now: number,
    options: AppendOptions = {},
  ): Promise<AppendResult> {
    return this.appendEncoded(await encodeAppend(spanBatches, options.pause), now, options);
  }

  async appendEncoded(
    encoded: EncodedAppend,
    now: number,
    options: AppendOptions = {},
  ): Promise<AppendResult> {
    const { pause } = options;
    // Chunk keys order by arrival: the time, then this process's call sequence (calls within one
    // millisecond — two requests of one exporter — keep their order: a span sent again replaces
    // the earlier copy, and detached events past the cap are the later ones), then a random part
    // that keeps them unique across replicas, then the batch index (and, for the parts of a large
    // batch after its first, the part's), without a random draw per trace.
    const stamp = `${String(now).padStart(13, '0')}-${nextCallSequence()}-${randomBytes(4).toString('hex')}`;
    const chunkRow = (
      project: string,
      traceId: string,
      c: Omit<EncodedChunk, 'project' | 'traceId'>,
    ): ChunkRow => ({
      project,
      trace_id: traceId,
      chunk: `${stamp}-${c.key}`,
      spans: c.text,
      format: c.format,
    });
    await this.insertResources(encoded.resources);
    await this.insertChunks(
      encoded.chunks.map((c) => chunkRow(c.project, c.traceId, c)),
      pause,
    );
    const { completed, reopened } = await this.traceRows(encoded.traces, now);
    // A whole trace whose row was there already (earlier spans, a retry) keeps that row's spans:
    // its chunk joins the trace's other chunks. Its batch was the call's first of the trace.
    const late: ChunkRow[] = [];
    if (reopened.size > 0) {
      for (const t of encoded.traces) {
        const chunk = t.whole?.chunk;
        if (chunk !== undefined && reopened.has(traceKey(t.project, t.traceId))) {
          late.push(chunkRow(t.project, t.traceId, chunk));
        }
      }
    }
    await this.insertChunks(late, pause);
    return { completed };
  }

  /**
   * The `traces` rows of a call: each trace opened or re-opened, except a whole trace with no
   * row yet, which is inserted complete, with its chunk when it has one. Returns those completed
   * on arrival, and the keys of whole traces whose row existed (re-opened).
   */
  private async traceRows(
    traces: readonly EncodedTrace[],
    now: number,
  ): Promise<{ completed: AppendResult['completed']; reopened: Set<string> }> {
    const open: unknown[][] = [];
    const whole: unknown[][] = [];
    for (const t of traces) {
      // Placeholders until completion writes the summary; an open trace is not listed.
      const row: unknown[] = [
        t.project,
        t.traceId,
        t.source,
        t.labels,
        now,
        now,
        t.rootEnded ? now : null,
        t.startMs ?? now,
      ];
      if (t.whole === undefined) open.push(row);
      else {
        row[7] = t.whole.startMs;
        row.push(
          now,
          ...t.whole.columns,
          t.whole.chunk?.text ?? null,
          t.whole.chunk?.format ?? null,
        );
        whole.push(row);
      }
    }
    // A row that exists already (earlier spans of the trace, or this batch sent again) is
    // re-opened as for any batch: the completer then completes the union of its spans. Its
    // inline spans, if any, stay.
    const conflict = `on conflict (project, trace_id) do update set
             last_span_at = excluded.last_span_at,
             root_ended_at = coalesce(traces.root_ended_at, excluded.root_ended_at),
             completed_at = null,
             ingest_labels = excluded.ingest_labels`;
    for (const part of batches(this.dialect, open, CHUNK)) {
      await this.db.executeQuery(
        CompiledQuery.raw(
          `insert into traces (${OPEN_COLUMNS.join(', ')}) values ${placeholders(this.dialect, part.length, OPEN_COLUMNS.length)}
           ${conflict}`,
          part.flat(),
        ),
      );
    }
    const completed: AppendResult['completed'] = [];
    const reopened = new Set<string>();
    for (const part of batches(this.dialect, whole, CHUNK)) {
      // `completed_at` is returned non-null only by rows inserted here; a re-opened row has null.
      const result = await this.db.executeQuery<{
        project: string;
        trace_id: string;
        digest: string;
        completed_at: number | string | null;
      }>(
        CompiledQuery.raw(
          `insert into traces (${WHOLE_COLUMNS.join(', ')}) values ${placeholders(this.dialect, part.length, WHOLE_COLUMNS.length)}
           ${conflict}
           returning project, trace_id, digest, completed_at`,
          part.flat(),
        ),
      );
      for (const r of result.rows) {
        if (r.completed_at !== null)
          completed.push({
            project: r.project,
            traceId: r.trace_id,
            digest: r.digest,
            firstSeenAt: now,
          });
        else reopened.add(traceKey(r.project, r.trace_id));
      }
    }
    return { completed, reopened };
  }

  /**
   * Inserts span chunks, the hot path of ingest: one multi-row VALUES statement for the whole
   * request, built as text, skipping Kysely's query builder, which dominates for many rows. Each
   * value is its own parameter on both dialects: PostgreSQL arrays (`unnest`) had the driver escape
   * every quote of the span JSON into an array literal, which cost more than the rest of the write.
   */
  private async insertChunks(
    rows: ChunkRow[],
    pause: (() => Promise<void>) | undefined,
  ): Promise<void> {
    // With a pause, statements of about PAUSE_CHARS each and a pause between them.
    for (const run of pause === undefined ? [rows] : runsOf(rows, PAUSE_CHARS)) {
      for (const part of batches(this.dialect, run, CHUNK)) {
        await this.db.executeQuery(
          CompiledQuery.raw(
            `insert into span_chunks (project, trace_id, chunk, spans, format) values ${placeholders(this.dialect, part.length, 5)}`,
            part.flatMap((r) => [r.project, r.trace_id, r.chunk, r.spans, r.format]),
          ),
        );
      }
      if (run !== rows) await pause?.();
    }
  }

  /**
   * Stores resources not stored yet (equal content, one row). In key order, so that two PostgreSQL
   * transactions inserting the same resources wait for each other instead of deadlocking.
   */
  private async insertResources(rows: SpanResourcesTable[]): Promise<void> {
    rows.sort((a, b) =>
      a.project === b.project ? (a.id < b.id ? -1 : 1) : a.project < b.project ? -1 : 1,
    );
    for (const part of batches(this.dialect, rows, CHUNK)) {
      await this.db.executeQuery(
        CompiledQuery.raw(
          `insert into span_resources (project, id, attributes) values ${placeholders(this.dialect, part.length, 3)}
           on conflict (project, id) do nothing`,
          part.flatMap((r) => [r.project, r.id, r.attributes]),
        ),
      );
    }
  }

  /**
   * The resources named by `refs` (project → ids), each parsed once: the spans naming one share
   * it, as the spans of one OTLP resource do when decoded.
   */
  private async resourcesOf(refs: Map<string, Set<string>>): Promise<Map<string, Attributes>> {
    const wanted = [...refs].flatMap(([project, ids]) => [...ids].map((id) => ({ project, id })));
    const out = new Map<string, Attributes>();
    for (const r of await this.resourceRows(wanted))
      out.set(`${r.project}\u0000${r.id}`, fromJson<Attributes>(r.attributes));
    return out;
  }

  /** The stored `span_resources` rows of these (project, id) keys, RESOURCE_READ per query. */
  private async resourceRows(
    wanted: readonly { project: string; id: string }[],
  ): Promise<SpanResourcesTable[]> {
    const out: SpanResourcesTable[] = [];
    for (let i = 0; i < wanted.length; i += RESOURCE_READ) {
      const part = wanted.slice(i, i + RESOURCE_READ);
      const rows = await this.db
        .selectFrom('span_resources')
        .select(['project', 'id', 'attributes'])
        .where((eb) =>
          eb(
            eb.refTuple('project', 'id'),
            'in',
            part.map((r) => eb.tuple(r.project, r.id)),
          ),
        )
        .execute();
      out.push(...rows);
    }
    return out;
  }

  async dueForCompletion(
    now: number,
    rules: CompletionRules,
    limit: number,
  ): Promise<PendingTrace[]> {
    const rows = await this.db
      .selectFrom('traces')
      .select(['project', 'trace_id', 'last_span_at', 'ingest_labels', 'source', 'digest'])
      .where('completed_at', 'is', null)
      .where((eb) =>
        eb.or([
          eb.and([
            eb('root_ended_at', 'is not', null),
            eb('last_span_at', '<=', now - rules.graceMs),
          ]),
          eb('last_span_at', '<=', now - rules.idleMs),
          eb('first_seen_at', '<=', now - rules.maxAgeMs),
        ]),
      )
      .orderBy('last_span_at')
      .limit(limit)
      .execute();
    return rows.map((r) => ({
      project: r.project,
      traceId: r.trace_id,
      lastSpanAt: r.last_span_at,
      labels: JSON.parse(r.ingest_labels) as Record<string, string>,
      source: r.source,
      digest: r.digest,
    }));
  }

  async spans(project: string, traceId: string, options?: SpansReadOptions): Promise<Span[]> {
    const [spans] = await this.spansOf([{ project, traceId }], options);
    return spans ?? [];
  }

  async spansOf(
    traces: readonly { project: string; traceId: string }[],
    options: SpansReadOptions = {},
  ): Promise<Span[][]> {
    if (traces.length === 0) return [];
    const wanted = sql<SqlBool>`(project, trace_id) in (${sql.join(
      traces.map((t) => sql`(${t.project}, ${t.traceId})`),
    )})`;
    // A whole trace's inline chunk (key '') comes before the chunks that reached it later.
    const rows = await this.db
      .selectFrom('traces')
      .select([
        'project',
        'trace_id',
        sql<string>`''`.as('chunk'),
        'spans',
        'spans_format as format',
      ])
      .where(wanted)
      .where('spans', 'is not', null)
      .$narrowType<{ spans: string; format: number }>()
      .unionAll((db) =>
        db
          .selectFrom('span_chunks')
          .select(['project', 'trace_id', 'chunk', 'spans', 'format'])
          .where(wanted),
      )
      .orderBy('chunk')
      .execute();
    // A span sent again (an exporter's retry, a re-pulled page) replaces the earlier copy; a span
    // naming a resource gets it once all chunks are read (one query for all of them).
    const byTrace = new Map<string, { spans: Map<string, Span>; detached: DetachedEvents[] }>();
    const named: { span: Span; key: string }[] = [];
    const refs = new Map<string, Set<string>>();
    for (const row of rows) {
      const key = traceKey(row.project, row.trace_id);
      let trace = byTrace.get(key);
      if (trace === undefined) {
        trace = { spans: new Map(), detached: [] };
        byTrace.set(key, trace);
      }
      const chunk = decodeChunk(Number(row.format), row.spans, row.trace_id);
      for (const d of chunk.detached) trace.detached.push(d);
      let ids: Set<string> | undefined;
      for (let i = 0; i < chunk.spans.length; i++) {
        const span = chunk.spans[i]!;
        trace.spans.set(span.spanId, span);
        const ref = chunk.refs[i];
        if (ref === undefined) continue;
        named.push({ span, key: `${row.project}\u0000${ref}` });
        if (ids === undefined) {
          ids = refs.get(row.project);
          if (ids === undefined) {
            ids = new Set();
            refs.set(row.project, ids);
          }
        }
        ids.add(ref);
      }
    }
    const resources =
      refs.size === 0 ? new Map<string, Attributes>() : await this.resourcesOf(refs);
    for (const { span, key } of named) span.resource = resources.get(key) ?? {};
    return traces.map((t) => {
      const trace = byTrace.get(traceKey(t.project, t.traceId));
      if (trace === undefined) return [];
      const spans = [...trace.spans.values()];
      return trace.detached.length === 0
        ? spans
        : attachDetachedEvents(spans, trace.detached, options.maxEventsPerSpan);
    });
  }

  async complete(
    pending: PendingTrace,
    trace: NormalizedTrace,
    digest: string,
    now: number,
    recordJson?: string,
  ): Promise<CompletionResult> {
    // Raw statements: completion runs per trace, and the query builder's compile dominated it.
    const p = (n: number) => (this.dialect === 'postgres' ? `$${n}` : '?');
    let previous = pending.digest;
    if (previous === undefined) {
      const before = await this.db.executeQuery<{ digest: string }>(
        CompiledQuery.raw(
          `select digest from traces where project = ${p(1)} and trace_id = ${p(2)}`,
          [pending.project, pending.traceId],
        ),
      );
      previous = before.rows[0]?.digest ?? '';
    }
    const s = trace.summary;
    const result = await this.db.executeQuery(
      CompiledQuery.raw(
        `update traces set completed_at = ${p(1)}, service = ${p(2)}, name = ${p(3)}, start_ms = ${p(4)},
           duration_ms = ${p(5)}, steps = ${p(6)}, error = ${p(7)}, labels = ${p(8)}, digest = ${p(9)},
           record = ${p(10)}, root = ${p(11)}, usage = ${p(12)}
         where project = ${p(13)} and trace_id = ${p(14)} and completed_at is null
           and last_span_at = ${p(15)} and digest = ${p(16)}`,
        [
          now,
          // PostgreSQL text cannot hold NUL; span data is JSON (escaped), these columns are not.
          s.service.replaceAll('\u0000', '\ufffd'),
          s.name.replaceAll('\u0000', '\ufffd'),
          toMillis(s.startTime, 'startTime'),
          s.durationMs,
          s.steps,
          s.error ? 1 : 0,
          JSON.stringify(s.labels),
          digest,
          recordJson ?? JSON.stringify(trace.record),
          trace.root === undefined ? null : await this.rootColumn(pending.project, trace.root),
          usageColumn(trace.record),
          pending.project,
          pending.traceId,
          pending.lastSpanAt,
          previous,
        ],
      ),
    );
    const completed = (result.numAffectedRows ?? 0n) > 0n;
    return { completed, changed: completed && previous !== digest };
  }

  async list(filter: TraceFilter, page: PageRequest): Promise<Page<StoredTrace>> {
    const limit = pageLimit(page);
    const after = decodePageToken(page.pageToken);
    const plan =
      filter.project === undefined
        ? {}
        : await planLead(this.db, this.dialect, { ...filter, project: filter.project });
    const lead = plan.ids;
    if (lead?.length === 0) return { items: [] };
    // A label leads in the list's order (its entries in trace_labels' key, each trace read
    // by key) unless ids lead; else the walk of traces_project_start_idx (or the service's).
    const label = lead === undefined ? plan.label : undefined;
    const order = label === undefined ? 'traces' : 'l';
    let q = this.db
      .selectFrom('traces')
      .$if(label !== undefined, (b) =>
        b.innerJoin('trace_labels as l', (j) =>
          j.onRef('l.project', '=', 'traces.project').onRef('l.trace_id', '=', 'traces.trace_id'),
        ),
      )
      .select(TRACE_SUMMARY)
      .where('traces.completed_at', 'is not', null)
      .orderBy(sql.ref(`${order}.start_ms`), 'desc')
      .orderBy(sql.ref(`${order}.trace_id`), 'desc')
      .limit(limit + 1);
    if (label !== undefined && filter.project !== undefined) {
      q = q.where(
        sql<SqlBool>`l.project = ${filter.project} and l.key = ${label[0]} and l.value = ${label[1]}`,
      );
    }
    if (filter.project !== undefined) q = q.where('traces.project', '=', filter.project);
    if (filter.service !== undefined) q = q.where('traces.service', '=', filter.service);
    if (filter.services !== undefined) {
      // An empty grant sees nothing (`in ()` is not valid SQL).
      q =
        filter.services.length > 0
          ? q.where('traces.service', 'in', [...filter.services])
          : q.where(sql<SqlBool>`1 = 0`);
    }
    if (filter.name !== undefined) q = q.where('traces.name', '=', filter.name);
    if (filter.source !== undefined) q = q.where('traces.source', '=', filter.source);
    if (filter.error !== undefined) q = q.where('traces.error', '=', filter.error ? 1 : 0);
    const start = sql.ref(`${order}.start_ms`);
    if (filter.since !== undefined) {
      q = q.where(sql<SqlBool>`${start} >= ${toMillis(filter.since, 'since')}`);
    }
    if (filter.until !== undefined) {
      q = q.where(sql<SqlBool>`${start} < ${toMillis(filter.until, 'until')}`);
    }
    const labels =
      label === undefined || filter.project === undefined
        ? labelsMatch(this.dialect, filter.labels)
        : otherLabelsMatch(this.dialect, filter.project, filter.labels, label);
    if (labels !== undefined) q = q.where(labels);
    const scored = resultsCheck(this.dialect, filter, plan);
    if (scored !== undefined) q = q.where(scored);
    if (lead !== undefined) q = q.where(traceIdIn(this.dialect, lead));
    if (after !== undefined) {
      q = q.where(
        sql<SqlBool>`(${start}, ${sql.ref(`${order}.trace_id`)}) < (${after.at}, ${after.id})`,
      );
    }
    const rows = await runList(this.db, this.dialect, q, plan);
    const items = rows.slice(0, limit);
    const last = items.at(-1);
    const out = items.map(fromRow);
    if (rows.length <= limit || last === undefined) return { items: out };
    return { items: out, nextPageToken: encodePageToken({ at: last.start_ms, id: last.trace_id }) };
  }

  async get(
    project: string,
    traceId: string,
  ): Promise<{ trace: StoredTrace; record: EvalRecord; root?: TraceRoot } | undefined> {
    const row = await this.db
      .selectFrom('traces')
      .select(RECORD_COLUMNS)
      .where('project', '=', project)
      .where('trace_id', '=', traceId)
      .where('completed_at', 'is not', null)
      .executeTakeFirst();
    if (row === undefined || row.record === null) return undefined;
    const out: { trace: StoredTrace; record: EvalRecord; root?: TraceRoot } = {
      trace: fromRow(row),
      record: JSON.parse(row.record) as EvalRecord,
    };
    if (row.root !== null) out.root = await this.rootOf(project, row.root);
    return out;
  }

  async getRecordJson(
    project: string,
    traceId: string,
  ): Promise<{ trace: StoredTrace; recordJson: string } | undefined> {
    const row = await this.db
      .selectFrom('traces')
      .select([...SUMMARY_COLUMNS, 'record'])
      .where('project', '=', project)
      .where('trace_id', '=', traceId)
      .where('completed_at', 'is not', null)
      .executeTakeFirst();
    if (row === undefined || row.record === null) return undefined;
    return { trace: fromRow(row), recordJson: row.record };
  }

  /**
   * The `root` column: the root span's attributes and resource, the resource by reference when
   * it is large (every trace of a request shares it; inline, it was written once per trace).
   */
  private async rootColumn(project: string, root: TraceRoot): Promise<string> {
    const resource = JSON.stringify(root.resource);
    if (resource.length <= ROOT_RESOURCE_INLINE_MAX) return JSON.stringify(root);
    const id = createHash('sha256').update(resource).digest('hex');
    await this.insertResources([{ project, id, attributes: resource }]);
    return JSON.stringify({ attributes: root.attributes, resourceRef: id });
  }

  private async rootOf(project: string, column: string): Promise<TraceRoot> {
    const root = JSON.parse(column) as StoredRoot;
    const ref = root.resourceRef;
    if (ref === undefined) return root as TraceRoot;
    const row = await this.db
      .selectFrom('span_resources')
      .select('attributes')
      .where('project', '=', project)
      .where('id', '=', ref)
      .executeTakeFirst();
    // Plain JSON: a root's bytes were made base64 text before it was stored.
    return {
      attributes: root.attributes,
      resource: row === undefined ? {} : (JSON.parse(row.attributes) as Attributes),
    };
  }

  async listVersions(
    project: string,
    since: number,
    after: { startMs: number; traceId: string } | undefined,
    limit: number,
  ): Promise<{ traceId: string; digest: string; startMs: number }[]> {
    let q = this.db
      .selectFrom('traces')
      .select(['trace_id', 'digest', 'start_ms'])
      .where('project', '=', project)
      .where('completed_at', 'is not', null)
      .where('start_ms', '>=', since)
      .orderBy('start_ms')
      .orderBy('trace_id')
      .limit(limit);
    if (after !== undefined) {
      q = q.where((eb) =>
        eb(eb.refTuple('start_ms', 'trace_id'), '>', eb.tuple(after.startMs, after.traceId)),
      );
    }
    const rows = await q.execute();
    return rows.map((r) => ({ traceId: r.trace_id, digest: r.digest, startMs: r.start_ms }));
  }

  async countOpen(): Promise<number> {
    const row = await this.db
      .selectFrom('traces')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('completed_at', 'is', null)
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  async projects(): Promise<string[]> {
    // A loose index scan (one index probe per project): `select distinct` would read every row.
    const result = await sql<{ project: string }>`
      with recursive p(project) as (
        select min(project) from traces
        union all
        select (select min(t.project) from traces t where t.project > p.project)
        from p where p.project is not null
      )
      select project from p where project is not null`.execute(this.db);
    return result.rows.map((r) => r.project);
  }

  async getMany(
    traces: readonly { project: string; traceId: string }[],
  ): Promise<({ trace: StoredTrace; record: EvalRecord; root?: TraceRoot } | undefined)[]> {
    type Got = { trace: StoredTrace; record: EvalRecord; root?: TraceRoot };
    const key = (project: string, traceId: string) => `${project}\u0000${traceId}`;
    const byProject = new Map<string, Set<string>>();
    for (const t of traces) {
      const ids = byProject.get(t.project);
      if (ids === undefined) byProject.set(t.project, new Set([t.traceId]));
      else ids.add(t.traceId);
    }
    const found = new Map<string, Got>();
    // Roots whose resource is stored on its own: read once per (project, resource) below.
    const refs = new Map<string, { project: string; id: string; roots: Got[] }>();
    for (const [project, set] of byProject) {
      const ids = [...set];
      for (let i = 0; i < ids.length; i += RESOURCE_READ) {
        const rows = await this.db
          .selectFrom('traces')
          .select(RECORD_COLUMNS)
          .where('project', '=', project)
          .where('trace_id', 'in', ids.slice(i, i + RESOURCE_READ))
          .where('completed_at', 'is not', null)
          .execute();
        for (const row of rows) {
          if (row.record === null) continue;
          const got: Got = { trace: fromRow(row), record: JSON.parse(row.record) as EvalRecord };
          if (row.root !== null) {
            const root = JSON.parse(row.root) as StoredRoot;
            const ref = root.resourceRef;
            if (ref === undefined) got.root = root as TraceRoot;
            else {
              got.root = { attributes: root.attributes, resource: {} };
              const k = key(project, ref);
              const entry = refs.get(k);
              if (entry === undefined) refs.set(k, { project, id: ref, roots: [got] });
              else entry.roots.push(got);
            }
          }
          found.set(key(project, row.trace_id), got);
        }
      }
    }
    for (const row of await this.resourceRows([...refs.values()])) {
      // Plain JSON, as `rootOf` reads it: a root's bytes were made base64 text before it was stored.
      const resource = JSON.parse(row.attributes) as Attributes;
      for (const got of refs.get(key(row.project, row.id))?.roots ?? []) {
        (got.root as TraceRoot).resource = resource;
      }
    }
    return traces.map((t) => found.get(key(t.project, t.traceId)));
  }
}
