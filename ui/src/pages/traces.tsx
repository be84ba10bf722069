import { useMemo } from 'preact/hooks';
import type { PageProps } from '../app.js';
import { Labels, PolicyScores } from '../components/badges.js';
import { Field } from '../components/field.js';
import { Select } from '../components/select.js';
import { Empty, ErrorNote, Loading } from '../components/status.js';
import { Text } from '../components/text.js';
import { formatDuration, formatNumber, formatTime, tokensOf } from '../format.js';
import { useApi, useOnVisible, usePages, useTitle } from '../hooks.js';
import { href, navigate } from '../router.js';
import { fromLocalInput, RANGES, rangeStart, toLocalInput } from '../time-range.js';
import type { Resource, TraceSummary } from '../types.js';

/**
 * The traces list: newest first, filters that are the API's own parameters (kept in the URL),
 * each trace's scores per policy as badges, the next page when the end of the list scrolls into
 * view (or on the button).
 */

/** Filters in the URL, by the API parameter they set. */
const TEXT_FILTERS = ['service', 'name', 'source', 'evaluator'] as const;
const OUTCOMES = [
  ['OUTCOME_SCORED', 'scored'],
  ['OUTCOME_SKIPPED', 'skipped'],
  ['OUTCOME_ERROR', 'error'],
] as const;

/** `tier=gold, env=prod` → ['tier=gold', 'env=prod']. */
export function parseLabels(text: string): string[] {
  return text
    .split(/[,\s]+/)
    .map((s) => s.trim())
    .filter((s) => s.includes('='));
}

function Filters({
  project,
  query,
  policies,
}: {
  project: string;
  query: URLSearchParams;
  policies: string[];
}) {
  function submit(event: Event): void {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    const get = (name: string) => String(form.get(name) ?? '').trim();
    const range = get('range');
    navigate(
      href('/traces', {
        project,
        ...Object.fromEntries(TEXT_FILTERS.map((f) => [f, get(f)])),
        labels: parseLabels(get('labels')),
        error: get('error'),
        policy: get('policy'),
        outcome: get('outcome'),
        range,
        ...(range === 'custom'
          ? { since: fromLocalInput(get('since')), until: fromLocalInput(get('until')) }
          : {}),
      }),
    );
  }
  const value = (name: string) => query.get(name) ?? '';
  return (
    <form class="filters" onSubmit={submit} aria-label="Trace filters" key={query.toString()}>
      {TEXT_FILTERS.map((f) => (
        <div class="field" key={f}>
          <label for={`f-${f}`}>{f[0]?.toUpperCase() + f.slice(1)}</label>
          <input id={`f-${f}`} name={f} defaultValue={value(f)} />
        </div>
      ))}
      <Field id="f-labels" label="Labels" wide>
        <input
          id="f-labels"
          name="labels"
          placeholder="key=value, key=value"
          defaultValue={query.getAll('labels').join(', ')}
        />
      </Field>
      <Field id="f-range" label="Started">
        <Select
          id="f-range"
          name="range"
          value={value('range')}
          options={[
            ['', 'any time'],
            ...RANGES.map((r) => [r.value, r.label.toLowerCase()] as const),
            ['custom', 'between…'],
          ]}
        />
      </Field>
      <Field id="f-since" label="From">
        <input
          id="f-since"
          name="since"
          type="datetime-local"
          defaultValue={toLocalInput(query.get('since'))}
        />
      </Field>
      <Field id="f-until" label="To">
        <input
          id="f-until"
          name="until"
          type="datetime-local"
          defaultValue={toLocalInput(query.get('until'))}
        />
      </Field>
      <Field id="f-error" label="Error">
        <Select
          id="f-error"
          name="error"
          value={value('error')}
          options={[
            ['', 'any'],
            ['true', 'with an error'],
            ['false', 'without'],
          ]}
        />
      </Field>
      <Field id="f-policy" label="Scored by policy">
        <Select
          id="f-policy"
          name="policy"
          value={value('policy')}
          options={[
            ['', 'any'],
            ...[...new Set([...policies, value('policy')].filter((p) => p !== ''))].map(
              (p) => [p, p] as const,
            ),
          ]}
        />
      </Field>
      <Field id="f-outcome" label="Outcome">
        <Select
          id="f-outcome"
          name="outcome"
          value={value('outcome')}
          options={[['', 'any'], ...OUTCOMES]}
        />
      </Field>
      <div class="actions">
        <button type="submit">Apply filters</button>
        <a href={href('/traces', { project })}>Clear</a>
      </div>
    </form>
  );
}

/** The API parameters of the URL's filters (`range` becomes `since`, once per filter change). */
function useListParams(project: string, query: URLSearchParams) {
  const key = query.toString();
  return useMemo(() => {
    const range = query.get('range');
    const since =
      range === 'custom' ? (query.get('since') ?? undefined) : rangeStart(range, Date.now());
    return {
      project,
      ...Object.fromEntries(TEXT_FILTERS.map((f) => [f, query.get(f) ?? undefined])),
      labels: query.getAll('labels'),
      error: query.get('error') ?? undefined,
      policy: query.get('policy') ?? undefined,
      outcome: query.get('outcome') ?? undefined,
      since: typeof since === 'number' ? new Date(since).toISOString() : since,
      until: range === 'custom' ? (query.get('until') ?? undefined) : undefined,
      include: 'scores',
      page_size: '50',
    };
  }, [project, key]);
}

function TraceRow({ trace, project }: { trace: TraceSummary; project: string }) {
  return (
    <tr class={trace.error ? 'has-error' : undefined}>
      <td>
        <time dateTime={trace.startTime} title={trace.startTime}>
          {formatTime(trace.startTime)}
        </time>
      </td>
      <td>
        <Text value={trace.service} />
      </td>
      <td>
        <a href={href(`/traces/${encodeURIComponent(trace.traceId)}`, { project })}>
          <Text value={trace.name === '' ? trace.traceId : trace.name} clamp={80} />
        </a>
      </td>
      <td class="num">{formatDuration(trace.durationMs)}</td>
      <td class="num">{trace.steps}</td>
      <td class="num">{formatNumber(tokensOf(trace.usage))}</td>
      <td>{trace.error ? <span class="pill bad">error</span> : <span class="muted">—</span>}</td>
      <td>
        <Labels labels={trace.labels} />
      </td>
      <td>
        <PolicyScores scores={trace.scores} />
      </td>
    </tr>
  );
}

export function TracesPage({ project, query, session }: PageProps) {
  useTitle('Traces');
  const params = useListParams(project, query);
  const pages = usePages<TraceSummary, { traces: TraceSummary[]; next_page_token?: string }>(
    '/v1alpha1/traces',
    params,
    (a) => ({ items: a.traces, next: a.next_page_token }),
  );
  const canReadPolicies = session.permissions.includes('policies.read');
  const policies = useApi<{ policies: Resource[] }>(canReadPolicies ? '/v1alpha1/policies' : null, {
    project,
    page_size: '1000',
  });
  const sentinel = useOnVisible(() => pages.loadMore());

  return (
    <section>
      <h1>Traces</h1>
      <Filters
        project={project}
        query={query}
        policies={(policies.data?.policies ?? []).map((p) => p.metadata.name)}
      />
      {pages.error !== undefined && <ErrorNote error={pages.error} what="traces" />}
      <div class="table-wrap">
        <table class="traces">
          <caption class="sr-only">Traces of project {project}, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Service</th>
              <th scope="col">Name</th>
              <th scope="col">Duration</th>
              <th scope="col">Steps</th>
              <th scope="col">Tokens</th>
              <th scope="col">Error</th>
              <th scope="col">Labels</th>
              <th scope="col">Scores</th>
            </tr>
          </thead>
          <tbody>
            {pages.items.map((t) => (
              <TraceRow key={t.traceId} trace={t} project={project} />
            ))}
          </tbody>
        </table>
      </div>
      {pages.loading && <Loading what="traces" />}
      {!pages.loading && pages.items.length === 0 && pages.error === undefined && (
        <Empty>No traces match these filters.</Empty>
      )}
      <div ref={sentinel} class="sentinel" />
      {pages.more && !pages.loading && (
        <button type="button" onClick={() => pages.loadMore()}>
          Load more traces
        </button>
      )}
    </section>
  );
}
