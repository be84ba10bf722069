import { useMemo } from 'preact/hooks';
import type { PageProps } from '../app.js';
import { Field } from '../components/field.js';
import { type ChartMarker, type ChartPoint, LineChart } from '../components/line-chart.js';
import { Select } from '../components/select.js';
import { Empty, ErrorNote, Loading } from '../components/status.js';
import { formatNumber, formatTime } from '../format.js';
import { useApi, useTitle } from '../hooks.js';
import { href, navigate } from '../router.js';
import { RANGES } from '../time-range.js';
import type { Resource } from '../types.js';
import { parseLabels } from './traces.js';

/**
 * A project's scores over time: each policy metric's window mean (what its alert compares) as a
 * line with the alert threshold, sample counts, and fired/resolved markers; filters for policy,
 * evaluator, labels and range (`GET /v1alpha1/scores:aggregate`).
 */

interface Series {
  policy: string;
  evaluator: string;
  metric: string;
  window: string;
  alert?: {
    below: number;
    minSamples: number;
    firing?: boolean;
    mean?: number;
    n?: number;
    changedAt?: string;
  };
  points: { start: string; n: number; mean: number; windowN: number; windowMean: number }[];
}

interface Transition {
  policy: string;
  metric: string;
  firing: boolean;
  at: string;
  mean: number;
  n: number;
  below: number;
}

interface Aggregate {
  since: string;
  until: string;
  bucket: string;
  series: Series[];
  transitions: Transition[];
}

/** A bucket that gives about 24–170 points over the range. */
const BUCKET_OF: Record<string, string> = {
  '15m': '1m',
  '1h': '1m',
  '6h': '5m',
  '24h': '15m',
  '7d': '1h',
  '30d': '6h',
};

function SeriesFigure({
  series,
  transitions,
  since,
  until,
}: {
  series: Series;
  transitions: Transition[];
  since: number;
  until: number;
}) {
  const points: ChartPoint[] = series.points.map((p) => ({
    at: Date.parse(p.start),
    mean: p.mean,
    n: p.n,
    windowMean: p.windowMean,
  }));
  const markers: ChartMarker[] = transitions
    .filter((t) => t.policy === series.policy && t.metric === series.metric)
    .map((t) => ({ at: Date.parse(t.at), firing: t.firing, mean: t.mean }));
  const title = `${series.policy} · ${series.metric}`;
  const total = series.points.reduce((sum, p) => sum + p.n, 0);
  return (
    <figure class="series">
      <figcaption>
        <h2>{title}</h2>
        <span class="muted">
          evaluator {series.evaluator} · window {series.window} · {total} scores
          {series.alert !== undefined &&
            ` · alert below ${series.alert.below} (at least ${series.alert.minSamples} scores)`}
        </span>
        {series.alert?.firing === true && <span class="pill bad">firing</span>}
        {series.alert?.firing === false && <span class="pill good">not firing</span>}
      </figcaption>
      <LineChart
        title={`${title}: window mean over time${series.alert === undefined ? '' : `, alert threshold ${series.alert.below}`}`}
        points={points}
        {...(series.alert === undefined ? {} : { threshold: series.alert.below })}
        markers={markers}
        since={since}
        until={until}
      />
      <p class="legend">
        <span class="key window-line-key">window mean</span>{' '}
        <span class="key dot-key">bucket mean</span>{' '}
        <span class="key bar-key">scores per bucket</span>
        {series.alert !== undefined && <span class="key threshold-key">alert threshold</span>}{' '}
        <span class="fired">▲ fired</span> <span class="resolved">▼ resolved</span>
      </p>
      <details>
        <summary>Data</summary>
        <table>
          <caption class="sr-only">{title} by bucket</caption>
          <thead>
            <tr>
              <th scope="col">Bucket start</th>
              <th scope="col">Scores</th>
              <th scope="col">Mean</th>
              <th scope="col">Window scores</th>
              <th scope="col">Window mean</th>
            </tr>
          </thead>
          <tbody>
            {series.points.map((p) => (
              <tr key={p.start}>
                <td>{formatTime(p.start)}</td>
                <td class="num">{p.n}</td>
                <td class="num">{formatNumber(p.mean)}</td>
                <td class="num">{p.windowN}</td>
                <td class="num">{formatNumber(p.windowMean)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
}

export function ScoresPage({ project, query, session }: PageProps) {
  useTitle('Scores');
  const range = query.get('range') ?? '24h';
  const key = query.toString();
  const params = useMemo(() => {
    const span = RANGES.find((r) => r.value === range)?.ms ?? 24 * 3_600_000;
    const until = Date.now();
    return {
      project,
      policy: query.get('policy') ?? undefined,
      evaluator: query.get('evaluator') ?? undefined,
      labels: query.getAll('labels'),
      since: new Date(until - span).toISOString(),
      until: new Date(until).toISOString(),
      bucket: BUCKET_OF[range] ?? '1h',
    };
  }, [project, key]);
  const answer = useApi<Aggregate>('/v1alpha1/scores:aggregate', params);
  const policies = useApi<{ policies: Resource[] }>(
    session.permissions.includes('policies.read') ? '/v1alpha1/policies' : null,
    {
      project,
      page_size: '1000',
    },
  );

  function submit(event: Event): void {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    const get = (name: string) => String(form.get(name) ?? '').trim();
    navigate(
      href('/scores', {
        project,
        policy: get('policy'),
        evaluator: get('evaluator'),
        labels: parseLabels(get('labels')),
        range: get('range'),
      }),
    );
  }

  const since = Date.parse(params.since);
  const until = Date.parse(params.until);
  return (
    <section>
      <h1>Scores</h1>
      <form class="filters" onSubmit={submit} aria-label="Score filters" key={key}>
        <Field id="s-policy" label="Policy">
          <Select
            id="s-policy"
            name="policy"
            value={query.get('policy') ?? ''}
            options={[
              ['', 'all'],
              ...(policies.data?.policies ?? []).map(
                (p) => [p.metadata.name, p.metadata.name] as const,
              ),
            ]}
          />
        </Field>
        <Field id="s-evaluator" label="Evaluator">
          <input id="s-evaluator" name="evaluator" defaultValue={query.get('evaluator') ?? ''} />
        </Field>
        <Field id="s-labels" label="Labels" wide>
          <input
            id="s-labels"
            name="labels"
            placeholder="key=value, key=value"
            defaultValue={query.getAll('labels').join(', ')}
          />
        </Field>
        <Field id="s-range" label="Range">
          <Select
            id="s-range"
            name="range"
            value={range}
            options={RANGES.map((r) => [r.value, r.label.toLowerCase()] as const)}
          />
        </Field>
        <div class="actions">
          <button type="submit">Show</button>
        </div>
      </form>
      {answer.error !== undefined && <ErrorNote error={answer.error} what="scores" />}
      {answer.loading && <Loading what="scores" />}
      {answer.data !== undefined && answer.data.series.length === 0 && (
        <Empty>
          No numeric scores in this range. Policies score traces as they complete; see the policies
          page.
        </Empty>
      )}
      {answer.data?.series.map((s) => (
        <SeriesFigure
          key={`${s.policy}/${s.metric}`}
          series={s}
          transitions={answer.data?.transitions ?? []}
          since={since}
          until={until}
        />
      ))}
    </section>
  );
}
