import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';
import type { PageProps } from '../app.js';
import { AnnotateForm } from '../components/annotate.js';
import { Labels, ResultBadges, scoreText } from '../components/badges.js';
import { MessagesOrValue, RawJson } from '../components/chat.js';
import { JsonView, ValueView } from '../components/json-view.js';
import { ErrorNote, Loading } from '../components/status.js';
import { Text } from '../components/text.js';
import { VirtualList } from '../components/virtual-list.js';
import { between, formatDuration, formatNumber, formatTime, tokensOf } from '../format.js';
import { isStatus, useApi, usePages, useTitle } from '../hooks.js';
import { href } from '../router.js';
import type { Result, Step, TraceRecord, TraceSummary } from '../types.js';
import { NotFound } from './not-found.js';

/**
 * One trace: its summary, the trajectory as an indented timeline of steps (virtualized, read from
 * the API in pages so a trace of 50k spans never freezes the tab), the selected step in full (a
 * model call's messages as a chat, a tool call's arguments and result, errors), the record, and
 * every policy's results with explanations, people's annotations among them. Sections are
 * independent: the annotation form (shown to keys holding `traces.annotate`) is one more section
 * reading the same trace id, and a saved annotation reloads the scores.
 */

/** The results group of people's annotations (never a policy name). */
const HUMAN_ANNOTATIONS = '@human';
const STEP_PAGE = 1000;
/** Steps read without asking (then a page more each time the end scrolls into view). */
const STEPS_AT_ONCE = 5000;
const ROW_HEIGHT = 30;
const LIST_HEIGHT = 420;

interface TraceAnswer {
  trace: TraceSummary;
  record: Omit<TraceRecord, 'trajectory'>;
  trajectorySteps: number;
}

interface Row {
  step: Step;
  depth: number;
}

/**
 * Steps with their depth in the span tree. A complete trajectory is put in tree order (each span
 * followed by its children, by start); a partly loaded one keeps record order. Iterative: a
 * trace may nest thousands of spans deep.
 */
export function treeRows(steps: readonly Step[], complete: boolean): Row[] {
  const byId = new Map<string, Step>();
  for (const s of steps) if (s.spanId !== undefined) byId.set(s.spanId, s);
  const parentOf = (s: Step): Step | undefined => {
    const p = s.parentSpanId === undefined ? undefined : byId.get(s.parentSpanId);
    return p === s ? undefined : p;
  };
  const depths = new Map<Step, number>();
  const depth = (s: Step): number => {
    const chain: Step[] = [];
    const onChain = new Set<Step>();
    let at: Step | undefined = s;
    while (at !== undefined && !depths.has(at) && !onChain.has(at)) {
      chain.push(at);
      onChain.add(at);
      at = parentOf(at);
    }
    // A cycle of parents counts from where it closes.
    let d = at === undefined || onChain.has(at) ? -1 : (depths.get(at) as number);
    for (let i = chain.length - 1; i >= 0; i--) depths.set(chain[i] as Step, ++d);
    return depths.get(s) as number;
  };
  if (!complete) return steps.map((step) => ({ step, depth: depth(step) }));

  const children = new Map<Step | undefined, Step[]>();
  for (const s of steps) {
    const parent = parentOf(s);
    const list = children.get(parent);
    if (list === undefined) children.set(parent, [s]);
    else list.push(s);
  }
  const out: Row[] = [];
  const seen = new Set<Step>();
  const walk = (roots: readonly Step[]) => {
    const stack = [...roots].reverse();
    while (stack.length > 0) {
      const s = stack.pop() as Step;
      if (seen.has(s)) continue;
      seen.add(s);
      out.push({ step: s, depth: depth(s) });
      const kids = children.get(s);
      if (kids !== undefined)
        for (let i = kids.length - 1; i >= 0; i--) stack.push(kids[i] as Step);
    }
  };
  walk(children.get(undefined) ?? []);
  walk(steps); // spans in a cycle of parents, which no root reaches
  return out;
}

const TYPE_LABEL: Record<string, string> = {
  llm: 'LLM',
  tool: 'tool',
  retrieval: 'retrieval',
  agent: 'agent',
  handoff: 'handoff',
  guardrail: 'guardrail',
  embedding: 'embedding',
  generic: 'span',
};

function StepRow({ row, traceStart, traceMs }: { row: Row; traceStart: number; traceMs: number }) {
  const { step } = row;
  const startMs = step.start === undefined ? undefined : Date.parse(step.start) - traceStart;
  const ms = between(step.start, step.end);
  const left = startMs === undefined || traceMs <= 0 ? 0 : Math.min(100, (startMs / traceMs) * 100);
  const width =
    ms === undefined || traceMs <= 0
      ? 0
      : Math.max(0.5, Math.min(100 - left, (ms / traceMs) * 100));
  return (
    <div class={step.error === '' ? 'step-row' : 'step-row has-error'}>
      <span class="step-name" style={{ paddingLeft: `${row.depth * 14}px` }}>
        <span class={`tag ${step.type}`}>{TYPE_LABEL[step.type] ?? step.type}</span>{' '}
        <Text value={step.name === '' ? '(unnamed)' : step.name} clamp={60} />
        {step.model !== undefined && <span class="muted"> · {step.model}</span>}
        {step.error !== '' && (
          <span class="error-flag" title={step.error}>
            {' '}
            ✖ error
          </span>
        )}
      </span>
      <span class="timeline" aria-hidden="true">
        <span class="bar" style={{ left: `${left}%`, width: `${width}%` }} />
      </span>
      <span class="num">{formatDuration(ms)}</span>
    </div>
  );
}

function StepDetail({ step }: { step: Step }) {
  const ms = between(step.start, step.end);
  const tokens = tokensOf(step.usage);
  return (
    <article class="step-detail" aria-label={`Step ${step.name}`}>
      <h3>
        <span class={`tag ${step.type}`}>{TYPE_LABEL[step.type] ?? step.type}</span>{' '}
        <Text value={step.name} />
      </h3>
      <dl class="facts">
        {step.model !== undefined && (
          <>
            <dt>Model</dt>
            <dd>{step.model}</dd>
          </>
        )}
        <dt>Started</dt>
        <dd>{formatTime(step.start)}</dd>
        <dt>Duration</dt>
        <dd>{formatDuration(ms)}</dd>
        {tokens !== undefined && (
          <>
            <dt>Tokens</dt>
            <dd>
              {formatNumber(tokens)}
              {step.usage?.inputTokens !== undefined &&
                ` (${step.usage.inputTokens} in, ${step.usage.outputTokens ?? 0} out)`}
            </dd>
          </>
        )}
        {step.spanId !== undefined && (
          <>
            <dt>Span</dt>
            <dd class="mono">{step.spanId}</dd>
          </>
        )}
      </dl>
      {step.error !== '' && (
        <div class="step-error" role="alert">
          <strong>Error:</strong> <Text value={step.error} />
        </div>
      )}
      {step.type === 'tool' ? (
        <>
          <h4>Arguments</h4>
          {typeof step.input === 'string' ? (
            <RawJson text={step.input} label="tool arguments" />
          ) : (
            <ValueView value={step.input} label="tool arguments" />
          )}
          <h4>Result</h4>
          {typeof step.output === 'string' ? (
            <RawJson text={step.output} label="tool result" />
          ) : (
            <ValueView value={step.output} label="tool result" />
          )}
        </>
      ) : (
        <>
          <h4>Input</h4>
          <MessagesOrValue value={step.input} label="input messages" />
          <h4>Output</h4>
          <MessagesOrValue value={step.output} label="output messages" />
        </>
      )}
      {step.attributes !== undefined && Object.keys(step.attributes).length > 0 && (
        <details>
          <summary>Attributes ({Object.keys(step.attributes).length})</summary>
          <JsonView value={step.attributes} label="span attributes" />
        </details>
      )}
    </article>
  );
}

/** Where the timeline starts and how long it is: the trace's, or (before it loads) the steps'. */
function timeSpan(
  trace: TraceSummary | undefined,
  steps: readonly Step[],
): { start: number; ms: number } {
  if (trace !== undefined) return { start: Date.parse(trace.startTime), ms: trace.durationMs };
  let start = Number.POSITIVE_INFINITY;
  let end = Number.NEGATIVE_INFINITY;
  for (const s of steps) {
    if (s.start !== undefined) start = Math.min(start, Date.parse(s.start));
    if (s.end !== undefined) end = Math.max(end, Date.parse(s.end));
  }
  return Number.isFinite(start) && end >= start ? { start, ms: end - start } : { start: 0, ms: 0 };
}

/** Read beside the trace's record, not after it: the first steps show one round trip sooner. */
function Trajectory({
  project,
  traceId,
  trace,
}: {
  project: string;
  traceId: string;
  trace: TraceSummary | undefined;
}) {
  const pages = usePages<Step, { steps: Step[]; total: number; next_page_token?: string }>(
    `/v1alpha1/traces/${encodeURIComponent(traceId)}/trajectory`,
    { project, page_size: String(STEP_PAGE) },
    (a) => ({ items: a.steps, next: a.next_page_token }),
  );
  const total = pages.last?.total ?? 0;
  const complete = !pages.more && !pages.loading;
  useEffect(() => {
    if (pages.more && !pages.loading && pages.items.length < STEPS_AT_ONCE) pages.loadMore();
  }, [pages]);
  const rows = useMemo(() => treeRows(pages.items, complete), [pages.items, complete]);
  const firstError = useMemo(() => rows.findIndex((r) => r.step.error !== ''), [rows]);
  const [chosen, setChosen] = useState<number | undefined>(undefined);
  const selected = Math.min(rows.length - 1, Math.max(0, chosen ?? firstError));
  const loadMore = useCallback(() => pages.loadMore(), [pages.loadMore]);
  const span = timeSpan(trace, pages.items);
  const step = rows[selected]?.step;
  // A missing trace is the page's to say (its record answers 404 too).
  if (isStatus(pages.error, 404)) return null;

  return (
    <section aria-labelledby="trajectory-h">
      <h2 id="trajectory-h">
        Trajectory{' '}
        <span class="muted">
          ({pages.items.length === total ? total : `${pages.items.length} of ${total}`} steps)
        </span>
      </h2>
      {pages.error !== undefined && <ErrorNote error={pages.error} what="the trajectory" />}
      {total === 0 && !pages.loading && <p class="muted">This trace has no steps.</p>}
      {rows.length > 0 && (
        <div class="trajectory">
          <VirtualList
            count={rows.length}
            rowHeight={ROW_HEIGHT}
            height={Math.min(LIST_HEIGHT, rows.length * ROW_HEIGHT + 2)}
            label="Steps of the trace; use the arrow keys to choose one"
            idPrefix="step"
            selected={selected}
            onSelect={setChosen}
            renderRow={(i) => (
              <StepRow row={rows[i] as Row} traceStart={span.start} traceMs={span.ms} />
            )}
            onNearEnd={loadMore}
          />
          {step !== undefined && <StepDetail step={step} />}
        </div>
      )}
      {pages.loading && <Loading what="steps" />}
    </section>
  );
}

function RecordSection({ record }: { record: TraceAnswer['record'] }) {
  const fields: [string, unknown][] = [
    ['Input', record.input],
    ['Output', record.output],
    ['Reference', record.reference],
    ['Context', record.context],
    ['Metadata', record.metadata],
  ];
  return (
    <section aria-labelledby="record-h">
      <h2 id="record-h">Record</h2>
      <dl class="record">
        {fields.map(([name, value]) => (
          <div key={name} class="record-field">
            <dt>{name}</dt>
            <dd>
              <MessagesOrValue value={value} label={name} />
            </dd>
          </div>
        ))}
      </dl>
    </section>
  );
}

export function ResultsTable({ results, caption }: { results: Result[]; caption: string }) {
  return (
    <table class="results">
      <caption>{caption}</caption>
      <thead>
        <tr>
          <th scope="col">Evaluator</th>
          <th scope="col">Outcome</th>
          <th scope="col">Scores</th>
          <th scope="col">Explanation or reason</th>
          <th scope="col">Time</th>
        </tr>
      </thead>
      <tbody>
        {results.map((r) => (
          <tr key={`${r.evaluator}\u0000${r.annotator?.principal ?? ''}`}>
            <td>
              {r.evaluator}
              {r.annotator !== undefined && (
                <span class="muted">
                  {' '}
                  by <Text value={r.annotator.principal} />
                </span>
              )}
            </td>
            <td>{r.outcome.replace('OUTCOME_', '').toLowerCase()}</td>
            <td>
              <ResultBadges result={r} />
            </td>
            <td>
              {r.reason !== undefined && <Text value={r.reason} />}
              {r.scores
                .filter((s) => s.explanation !== undefined)
                .map((s) => (
                  <p key={s.name}>
                    <strong>
                      {s.name} ({scoreText(s)}):
                    </strong>{' '}
                    <Text value={s.explanation ?? ''} />
                  </p>
                ))}
            </td>
            <td class="num">{formatDuration(r.durationMs)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function ScoresSection({ project, traceId }: { project: string; traceId: string }) {
  const scores = useApi<{ results: Record<string, Result[]>; scoredAt?: string }>(
    `/v1alpha1/traces/${encodeURIComponent(traceId)}/scores`,
    { project },
  );
  const policies = Object.entries(scores.data?.results ?? {});
  return (
    <section aria-labelledby="scores-h">
      <h2 id="scores-h">Scores</h2>
      {scores.loading && <Loading what="scores" />}
      {scores.error !== undefined && <ErrorNote error={scores.error} what="scores" />}
      {scores.data !== undefined && policies.length === 0 && (
        <p class="muted">No policy or person has scored this trace.</p>
      )}
      {policies.map(([policy, results]) => (
        <ResultsTable
          key={policy}
          results={results}
          caption={policy === HUMAN_ANNOTATIONS ? 'Human annotations' : `Policy ${policy}`}
        />
      ))}
    </section>
  );
}

export function TracePage({ project, id, session }: PageProps) {
  useTitle(`Trace ${id}`);
  // Bumped by a saved annotation: the scores section reads again.
  const [scoresVersion, setScoresVersion] = useState(0);
  const answer = useApi<TraceAnswer>(`/v1alpha1/traces/${encodeURIComponent(id)}`, {
    project,
    view: 'basic',
  });
  if (isStatus(answer.error, 404)) {
    return (
      <NotFound
        what={`trace ${id} in project ${project}`}
        project={project}
        detail="it may not have completed yet, or the key may not cover it"
      />
    );
  }
  const data = answer.data;
  return (
    <div class="trace-page">
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href={href('/traces', { project })}>Traces</a> / <span class="mono">{id}</span>
      </nav>
      {answer.error !== undefined && <ErrorNote error={answer.error} what={`trace ${id}`} />}
      {data === undefined ? (
        answer.error === undefined && <Loading what="the trace" />
      ) : (
        <Summary data={data} project={project} />
      )}
      <Trajectory project={project} traceId={id} trace={data?.trace} />
      {data !== undefined && <RecordSection record={data.record} />}
      <ScoresSection key={scoresVersion} project={project} traceId={id} />
      {data !== undefined && session.permissions.includes('traces.annotate') && (
        <AnnotateForm
          project={project}
          traceId={id}
          onSaved={() => setScoresVersion((v) => v + 1)}
        />
      )}
    </div>
  );
}

function Summary({ data, project }: { data: TraceAnswer; project: string }) {
  const { trace, record } = data;
  const tokens = tokensOf(trace.usage ?? record.usage);
  return (
    <>
      <h1>
        <Text value={trace.name === '' ? trace.traceId : trace.name} />
        {trace.error && <span class="pill bad">error</span>}
      </h1>
      <dl class="facts summary">
        <dt>Service</dt>
        <dd>
          <Text value={trace.service} />
        </dd>
        <dt>Started</dt>
        <dd>
          <time dateTime={trace.startTime}>{formatTime(trace.startTime)}</time>
        </dd>
        <dt>Duration</dt>
        <dd>{formatDuration(trace.durationMs)}</dd>
        <dt>Steps</dt>
        <dd>{trace.steps}</dd>
        <dt>Tokens</dt>
        <dd>{formatNumber(tokens)}</dd>
        {trace.source !== undefined && (
          <>
            <dt>Source</dt>
            <dd>
              <a href={href(`/sources/${encodeURIComponent(trace.source)}`, { project })}>
                {trace.source}
              </a>
            </dd>
          </>
        )}
        <dt>Labels</dt>
        <dd>
          <Labels labels={trace.labels} />
        </dd>
        <dt>Trace id</dt>
        <dd class="mono">{trace.traceId}</dd>
      </dl>
    </>
  );
}
