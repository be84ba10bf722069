import type { PageProps } from '../app.js';
import { ResultBadges, StatePill } from '../components/badges.js';
import { MessagesOrValue } from '../components/chat.js';
import { JsonView } from '../components/json-view.js';
import { Empty, ErrorNote, Loading } from '../components/status.js';
import { Text } from '../components/text.js';
import { formatNumber, formatTime } from '../format.js';
import { isStatus, useApi, usePages, useTitle } from '../hooks.js';
import { href } from '../router.js';
import type { Result, TraceRecord } from '../types.js';
import { NotFound } from './not-found.js';
import { ResultsTable } from './trace.js';

/**
 * Offline runs: the list (status, gates), and a run's summaries, gates (value against the
 * threshold), trials and per-record results with each record's output; a failed gate links to
 * the records that failed it.
 */

interface GateResult {
  gate: { metric: string; min?: number; max?: number };
  passed: boolean;
  value: number | null;
  reason?: string;
}

interface MetricSummary {
  metric: string;
  evaluator: string;
  kind: string;
  counts: { scored: number; skipped: number; error: number };
  n: number;
  mean: number | null;
  interval: { low: number; high: number } | null;
  passAtK?: Record<string, number | null>;
  passHatK?: Record<string, number | null>;
}

interface Run {
  id: string;
  name: string;
  status: string;
  summaries: MetricSummary[];
  gates: GateResult[];
  createdBy: string;
  createdAt: string;
  finishedAt?: string;
  progress: { total: number; done: number };
  error?: string;
  labels: Record<string, string>;
  spec?: {
    trials?: number;
    dataset?: { path?: string; records?: TraceRecord[] };
    target?: unknown;
  };
}

interface Item {
  recordId: string;
  recordIndex: number;
  trial: number;
  generated?: { output?: unknown };
  error?: string;
  results: Result[];
}

/** `exact-match.pass^3` → `exact-match`: the score a gate reads. */
function gateScore(metric: string): string {
  return metric.replace(/\.pass[\^@]\d+$/, '');
}

/** Whether an item fails a gate: its score fails (or is on the wrong side), or its evaluator errored. */
export function failsGate(item: Item, gate: GateResult['gate']): boolean {
  const name = gateScore(gate.metric);
  for (const r of item.results) {
    if (
      r.outcome === 'OUTCOME_ERROR' &&
      (r.evaluator === name || name.startsWith(`${r.evaluator}.`))
    )
      return true;
    for (const s of r.scores) {
      if (s.name !== name) continue;
      if (s.passed === false) return true;
      if (s.value !== undefined && gate.min !== undefined && s.value < gate.min) return true;
      if (s.value !== undefined && gate.max !== undefined && s.value > gate.max) return true;
    }
  }
  return false;
}

function failsAny(item: Item): boolean {
  return (
    item.error !== undefined ||
    item.results.some(
      (r) => r.outcome === 'OUTCOME_ERROR' || r.scores.some((s) => s.passed === false),
    )
  );
}

function gateText(g: GateResult['gate']): string {
  return g.min !== undefined ? `${g.metric} ≥ ${g.min}` : `${g.metric} ≤ ${g.max ?? '?'}`;
}

export function RunsPage({ project }: PageProps) {
  useTitle('Runs');
  const pages = usePages<Run, { runs: Run[]; next_page_token?: string }>(
    '/v1alpha1/runs',
    { project, page_size: '100' },
    (a) => ({ items: a.runs, next: a.next_page_token }),
  );
  return (
    <section>
      <h1>Runs</h1>
      {pages.error !== undefined && <ErrorNote error={pages.error} what="runs" />}
      {!pages.loading && pages.items.length === 0 && pages.error === undefined && (
        <Empty>No runs in project {project}.</Empty>
      )}
      {pages.items.length > 0 && (
        <div class="table-wrap">
          <table>
            <caption class="sr-only">Runs of project {project}, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Run</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
                <th scope="col">Finished</th>
                <th scope="col">Progress</th>
                <th scope="col">Gates</th>
              </tr>
            </thead>
            <tbody>
              {pages.items.map((r) => {
                const failed = r.gates.filter((g) => !g.passed).length;
                return (
                  <tr key={r.id}>
                    <td>
                      <a href={href(`/runs/${encodeURIComponent(r.id)}`, { project })}>{r.name}</a>
                      <div class="muted mono">{r.id}</div>
                    </td>
                    <td>
                      <StatePill state={r.status} />
                    </td>
                    <td>{formatTime(r.createdAt)}</td>
                    <td>{formatTime(r.finishedAt)}</td>
                    <td class="num">
                      {r.progress.done}/{r.progress.total}
                    </td>
                    <td>
                      {r.gates.length === 0 ? (
                        <span class="muted">—</span>
                      ) : failed > 0 ? (
                        <span class="pill bad">{failed} failed</span>
                      ) : (
                        <span class="pill good">{r.gates.length} passed</span>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {pages.loading && <Loading what="runs" />}
      {pages.more && !pages.loading && (
        <button type="button" onClick={() => pages.loadMore()}>
          Load more runs
        </button>
      )}
    </section>
  );
}

function Summaries({ summaries }: { summaries: MetricSummary[] }) {
  if (summaries.length === 0) return <p class="muted">No summaries yet.</p>;
  return (
    <table>
      <caption class="sr-only">Metric summaries</caption>
      <thead>
        <tr>
          <th scope="col">Metric</th>
          <th scope="col">Mean</th>
          <th scope="col">95% interval</th>
          <th scope="col">Scored</th>
          <th scope="col">Skipped</th>
          <th scope="col">Errors</th>
          <th scope="col">pass^k</th>
        </tr>
      </thead>
      <tbody>
        {summaries.map((s) => (
          <tr key={s.metric}>
            <td>{s.metric}</td>
            <td class="num">{formatNumber(s.mean)}</td>
            <td class="num">
              {s.interval === null
                ? '—'
                : `${formatNumber(s.interval.low)} – ${formatNumber(s.interval.high)}`}
            </td>
            <td class="num">{s.counts.scored}</td>
            <td class="num">{s.counts.skipped}</td>
            <td class="num">{s.counts.error}</td>
            <td>
              {Object.entries(s.passHatK ?? {})
                .map(([k, v]) => `^${k} ${formatNumber(v)}`)
                .join(', ') || '—'}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** The records of a dataset-path run (the first 1000, for showing their outputs). */
function useDatasetRecords(project: string, path: string | undefined) {
  const m =
    path === undefined ? null : /^datasets\/[^/]+\/([^/]+)\/([0-9a-f]{64})\.jsonl$/.exec(path);
  return useApi<{ records: TraceRecord[] }>(
    m === null ? null : `/v1alpha1/datasets/${encodeURIComponent(m[1] as string)}/records`,
    m === null ? {} : { project, sha256: m[2] as string, page_size: '1000' },
  );
}

export function RunPage({ project, id, query, session }: PageProps) {
  useTitle(`Run ${id}`);
  const run = useApi<Run>(`/v1alpha1/runs/${encodeURIComponent(id)}`, { project });
  const items = usePages<Item, { results: Item[]; next_page_token?: string }>(
    run.data === undefined ? null : `/v1alpha1/runs/${encodeURIComponent(id)}/results`,
    { project, page_size: '200' },
    (a) => ({ items: a.results, next: a.next_page_token }),
  );
  const canReadDatasets = session.permissions.includes('datasets.read');
  const dataset = useDatasetRecords(
    project,
    canReadDatasets ? run.data?.spec?.dataset?.path : undefined,
  );
  if (isStatus(run.error, 404))
    return <NotFound what={`run ${id} in project ${project}`} project={project} />;
  if (run.error !== undefined) return <ErrorNote error={run.error} what={`run ${id}`} />;
  if (run.data === undefined) return <Loading what="the run" />;
  const r = run.data;
  const filter = query.get('failed');
  const gate = r.gates.find((g) => g.gate.metric === filter);
  const shown = items.items.filter((item) =>
    filter === null ? true : gate !== undefined ? failsGate(item, gate.gate) : failsAny(item),
  );
  const records = r.spec?.dataset?.records ?? dataset.data?.records;

  return (
    <section>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href={href('/runs', { project })}>Runs</a> / <span class="mono">{r.id}</span>
      </nav>
      <h1>
        {r.name} <StatePill state={r.status} />
      </h1>
      <dl class="facts">
        <dt>Created</dt>
        <dd>
          {formatTime(r.createdAt)} by {r.createdBy}
        </dd>
        <dt>Finished</dt>
        <dd>{formatTime(r.finishedAt)}</dd>
        <dt>Progress</dt>
        <dd>
          {r.progress.done} of {r.progress.total} items
        </dd>
        <dt>Trials</dt>
        <dd>{r.spec?.trials ?? 1}</dd>
        <dt>Dataset</dt>
        <dd class="mono">
          {r.spec?.dataset?.path ??
            (r.spec?.dataset?.records === undefined
              ? '—'
              : `${r.spec.dataset.records.length} inline records`)}
        </dd>
      </dl>
      {r.error !== undefined && (
        <div class="error-note" role="alert">
          <strong>The run ended in error:</strong> <Text value={r.error} />
        </div>
      )}
      <h2>Gates</h2>
      {r.gates.length === 0 ? (
        <p class="muted">No gates (or the run has not finished).</p>
      ) : (
        <table>
          <caption class="sr-only">Gates of run {r.id}</caption>
          <thead>
            <tr>
              <th scope="col">Gate</th>
              <th scope="col">Result</th>
              <th scope="col">Value</th>
              <th scope="col">Records</th>
            </tr>
          </thead>
          <tbody>
            {r.gates.map((g) => (
              <tr key={g.gate.metric} class={g.passed ? undefined : 'has-error'}>
                <td class="mono">{gateText(g.gate)}</td>
                <td>
                  <StatePill state={g.passed ? 'pass' : 'fail'} />
                </td>
                <td class="num">
                  {formatNumber(g.value)}{' '}
                  {g.gate.min !== undefined
                    ? `vs min ${g.gate.min}`
                    : `vs max ${g.gate.max ?? '?'}`}
                  {g.reason !== undefined && <div class="muted">{g.reason}</div>}
                </td>
                <td>
                  {!g.passed && (
                    <a
                      href={`${href(`/runs/${encodeURIComponent(r.id)}`, { project, failed: g.gate.metric })}#results`}
                    >
                      records that failed it
                    </a>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>Summaries</h2>
      <Summaries summaries={r.summaries} />
      <h2 id="results">
        Results per record{' '}
        {filter !== null && (
          <span class="muted">
            — failing {gate === undefined ? 'anything' : gateText(gate.gate)}
          </span>
        )}
      </h2>
      <p>
        {filter === null ? (
          <a
            href={`${href(`/runs/${encodeURIComponent(r.id)}`, { project, failed: 'any' })}#results`}
          >
            Only failing records
          </a>
        ) : (
          <a href={`${href(`/runs/${encodeURIComponent(r.id)}`, { project })}#results`}>
            All records
          </a>
        )}
      </p>
      {items.error !== undefined && <ErrorNote error={items.error} what="the run's results" />}
      {shown.map((item) => {
        const record = records?.[item.recordIndex];
        const output = item.generated?.output ?? record?.output;
        return (
          <details
            key={`${item.recordIndex}/${item.trial}`}
            id={`record-${item.recordIndex}-${item.trial}`}
            class="run-item"
            open={filter !== null}
          >
            <summary>
              <span class="mono">{item.recordId}</span>{' '}
              <span class="muted">trial {item.trial + 1}</span>{' '}
              {item.results.map((res) => (
                <ResultBadges key={res.evaluator} result={res} />
              ))}
              {item.error !== undefined && <span class="pill bad">target failed</span>}
            </summary>
            {item.error !== undefined && (
              <div class="step-error">
                <strong>Target error:</strong> <Text value={item.error} />
              </div>
            )}
            {record?.input !== undefined && (
              <>
                <h4>Input</h4>
                <MessagesOrValue value={record.input} label="record input" />
              </>
            )}
            <h4>Output</h4>
            <MessagesOrValue value={output} label="record output" />
            {record?.reference !== undefined && (
              <>
                <h4>Reference</h4>
                <MessagesOrValue value={record.reference} label="record reference" />
              </>
            )}
            <ResultsTable
              results={item.results}
              caption={`Results of ${item.recordId}, trial ${item.trial + 1}`}
            />
          </details>
        );
      })}
      {!items.loading && shown.length === 0 && items.error === undefined && (
        <Empty>No records{filter === null ? '' : ' failed'} here.</Empty>
      )}
      {items.loading && <Loading what="results" />}
      {items.more && !items.loading && (
        <button type="button" onClick={() => items.loadMore()}>
          Load more results
        </button>
      )}
      <h2>Spec</h2>
      {r.spec === undefined ? <p class="muted">—</p> : <JsonView value={r.spec} label="run spec" />}
    </section>
  );
}
